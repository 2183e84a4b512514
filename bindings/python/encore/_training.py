"""Keras' training methods on every encore.nn.Module: compile, fit, evaluate, predict, the
*_on_batch forms and checkpoints. They are thin: nn::Model (C++) runs the loops, the same code as
from C++. Python adds what belongs here: NumPy arrays and iterables as data, Python losses,
metrics and callbacks, and output through ``sys.stdout``."""

from __future__ import annotations

import os
import sys
import warnings
from typing import Any, Dict, Iterable, Iterator, List, Optional, Tuple, Union

import numpy as np

from . import _C
from .callbacks import Callback, History

Module = _C.Module


def _write(text: str) -> None:
    sys.stdout.write(text)
    sys.stdout.flush()


def _interactive() -> bool:
    try:
        return bool(sys.stdout.isatty())
    except (AttributeError, ValueError):
        return False


def _model(self: Module, compiled: bool = True) -> _C.Model:
    model = self.__dict__.get("_model")
    if model is None:
        if compiled:
            raise ValueError(f"[{self.type_name}] compile the model first: model.compile(optimizer, loss, metrics)")
        model = _C.Model(self)
        object.__setattr__(self, "_model", model)
    return model


def _float_dtype(self: Module) -> np.dtype:
    params = self.parameters()
    return np.dtype(str(params[0].dtype)) if params and params[0].dtype.is_floating_point else np.dtype("float32")


def _as_tensor(self: Module, a: Any, target: bool = False) -> _C.Tensor:
    """A batch-first tensor from a tensor or array: floating (and boolean) values in the model's
    float dtype; integer targets stay integers for sparse_categorical_crossentropy, other losses
    get them as floats, and 1-D targets as a column."""
    if isinstance(a, _C.Tensor):
        return a
    if not isinstance(a, np.ndarray) and hasattr(a, "__dlpack__") and hasattr(a, "__dlpack_device__"):
        t: _C.Tensor = _C.from_dlpack(a)  # a torch / CuPy / JAX tensor, zero-copy
        if t.device.type != "cpu":
            return t
        a = t.numpy()  # a view: converted below like any array
    arr = np.asarray(a)
    float_target = target and self.__dict__.get("_sparse_targets") is False
    if arr.dtype.kind in "fb" or (float_target and arr.dtype.kind in "iu"):
        arr = arr.astype(_float_dtype(self), copy=False)
        if float_target and arr.ndim == 1:
            arr = arr[:, None]
    return _C.Tensor(np.ascontiguousarray(arr))


def _is_array(a: Any) -> bool:
    """A tensor, an array, or nested lists of numbers (not a list of batches: arrays or pairs)."""
    if isinstance(a, (_C.Tensor, np.ndarray)):
        return True
    return isinstance(a, list) and bool(a) and isinstance(a[0], (int, float, list))


def _one_shot(data: Any) -> bool:
    """Whether ``data`` can be iterated once only: an iterator (a generator) is its own iterator;
    a re-iterable (a list, a loader) makes a fresh one per ``iter``."""
    return iter(data) is data


def _batches(self: Module, data: Iterable[Any], name: str) -> _C._PythonBatches:
    """An iterable of batches, read afresh each epoch: (x, y) pairs, (x, y, sample_weight)
    triples, or x alone for predict."""
    try:
        size = len(data)  # type: ignore[arg-type]
    except TypeError:
        size = -1

    def batches(epoch: int) -> Iterator[Tuple[_C.Tensor, Optional[_C.Tensor], Optional[_C.Tensor]]]:
        for item in data:
            if isinstance(item, (tuple, list)):
                if len(item) not in (1, 2, 3):
                    raise ValueError(f"[{name}] a batch is (x, y), (x, y, sample_weight) or x, got a sequence of "
                                     f"{len(item)}")
                x, y = item[0], item[1] if len(item) >= 2 else None
                w = item[2] if len(item) == 3 else None
            else:
                x, y, w = item, None, None
            yield (_as_tensor(self, x), None if y is None else _as_tensor(self, y, target=True),
                   None if w is None else _weights(self, w))

    return _C._PythonBatches(batches, size)


def _weights(self: Module, w: Any) -> _C.Tensor:
    """Sample weights, one per row, in the model's float dtype."""
    t = _as_tensor(self, np.asarray(w, dtype=_float_dtype(self)) if not isinstance(w, _C.Tensor) else w)
    if len(t.shape) != 1:
        raise ValueError(f"[fit] sample_weight must hold one weight per row (shape (rows,)), got shape {t.shape}")
    return t


_HOOKS = tuple(name for name in vars(Callback) if name.startswith("on_"))


def _callbacks(callbacks: Optional[List[Any]]) -> List[Any]:
    """The callbacks, each a built-in one, a Callback or an object with some of its hooks."""
    callbacks = list(callbacks or [])
    for i, cb in enumerate(callbacks):
        if isinstance(cb, (Callback, _C._CallbackBase)):
            continue
        if isinstance(cb, type) or not any(callable(getattr(cb, hook, None)) for hook in _HOOKS):
            what = f"the class {cb.__name__}" if isinstance(cb, type) else f"a {type(cb).__name__}"
            raise TypeError(f"[fit] callbacks[{i}] is {what}, not a callback (an encore.callbacks.Callback "
                            f"instance, or an object with some of its methods: {', '.join(_HOOKS)})")
    return callbacks


def _data(self: Module, x: Any, y: Any, batch_size: int, name: str, sample_weight: Any = None) -> _C.Dataset:
    if isinstance(x, _C.Dataset):
        return x
    if y is None and x is not None and not _is_array(x):
        if sample_weight is not None:
            raise ValueError(f"[{name}] sample_weight goes with arrays x and y; batches give theirs as "
                             "(x, y, sample_weight)")
        return _batches(self, x, name)
    if x is None:
        raise ValueError(f"[{name}] needs data: arrays x and y, or an iterable of (x, y) batches")
    tx = _as_tensor(self, x)
    return _C.ArrayDataset(tx, None if y is None else _as_tensor(self, y, target=True), batch_size,
                           sample_weight=None if sample_weight is None else _weights(self, sample_weight))


def compile(self: Module, optimizer: Union[str, Any] = "adam", loss: Any = None,
            metrics: Optional[List[Any]] = None, mode: str = "traced",
            shape_policy: Optional[_C.ShapePolicy] = None) -> None:
    """Prepares training: ``optimizer`` (an encore.optim optimizer, or "sgd", "adam", "adamw",
    "rmsprop" made with its defaults once the model is built), ``loss`` ("binary_crossentropy",
    "sparse_categorical_crossentropy" — both of probabilities, as in Keras — "mse", "mae", or a
    function ``loss(y_true, y_pred)``), ``metrics`` (names such as "accuracy", or functions),
    ``mode`` "traced" (each step replays a recorded graph) or "eager" (same results, op by op),
    and the traced steps' ``shape_policy`` (``encore.exact()`` or ``encore.bucket(...)``).
    Compiling again starts afresh (new traced steps, counters at 0)."""
    if loss is None:
        raise ValueError(f"[{self.type_name}] compile needs a loss")
    model = _C.Model(self)
    model.compile(optimizer, loss, list(metrics or []), mode, shape_policy or _C.exact())
    object.__setattr__(self, "_model", model)
    # Targets are converted for a named loss: class ids stay integers, the rest become floats.
    object.__setattr__(self, "_sparse_targets",
                       loss == "sparse_categorical_crossentropy" if isinstance(loss, str) else None)


def fit(self: Module, x: Any = None, y: Any = None, batch_size: int = 32, epochs: int = 1, verbose: int = 1,
        callbacks: Optional[List[Any]] = None, validation_split: float = 0.0, validation_data: Any = None,
        shuffle: bool = True, seed: int = 0, initial_epoch: int = 0, class_weight: Optional[Dict[int, float]] = None,
        sample_weight: Any = None, steps_per_epoch: Optional[int] = None) -> History:
    """Trains for ``epochs`` epochs on arrays (NumPy, encore, or DLPack tensors such as torch's)
    ``x`` and ``y`` in batches of ``batch_size`` (shuffled per epoch from ``seed``); on an
    ``encore.data.ArrayDataset``; or on an iterable ``x`` of ``(x, y)`` or ``(x, y, sample_weight)``
    batches. An iterable whose ``__iter__`` starts afresh (a list, a data loader) is read once
    per epoch; a one-shot iterator (a generator) needs ``steps_per_epoch`` to train more than one
    epoch (a ValueError says so before training). ``steps_per_epoch`` (Keras): batches per epoch,
    from one pass that goes on across epochs; data that runs out stops training with a warning.
    ``validation_split`` holds out the last fraction of the rows; ``validation_data`` is
    ``(x_val, y_val)``, ``(x_val, y_val, val_sample_weight)`` or an iterable of batches.
    ``class_weight`` ({class: weight}) and ``sample_weight`` (one per row of x) weigh the loss of
    each row, as Keras (the mean of loss_i * w_i; metrics stay unweighted). The last batch of an
    epoch is smaller when the rows do not divide evenly: it is kept and, as a signature of its own,
    traced once (in the first epoch), not every epoch. ``callbacks``: encore.callbacks
    (EarlyStopping, ModelCheckpoint, LearningRateScheduler) and Callback subclasses. ``verbose``: 0
    silent, 1 a progress bar per epoch, 2 one line per epoch; with 1 or 2 a cost summary line ends
    the fit. Returns a History. Ctrl-C stops training (KeyboardInterrupt)."""
    model = _model(self)
    steps = 0 if steps_per_epoch is None else int(steps_per_epoch)
    if steps < 0:
        raise ValueError(f"[fit] steps_per_epoch must be >= 0, got {steps_per_epoch}")
    weights = None
    tx: Union[_C.Dataset, _C.Tensor]
    ty: Optional[_C.Tensor]
    if isinstance(x, _C.Dataset):
        if sample_weight is not None or validation_split:
            raise ValueError("[fit] an ArrayDataset carries its own sample_weight; validation_split needs arrays")
        tx, ty = x, None
    elif y is None and x is not None and not _is_array(x):
        if validation_split:
            raise ValueError("[fit] validation_split needs arrays x and y; give validation_data instead")
        if sample_weight is not None:
            raise ValueError(
                "[fit] sample_weight goes with arrays x and y; batches give theirs as (x, y, sample_weight)"
            )
        if _one_shot(x) and not steps and epochs - initial_epoch > 1:
            raise ValueError(f"[fit] x is a one-shot iterator ({type(x).__name__}): it gives its batches once, so "
                             f"epochs={epochs} would train one epoch. Pass steps_per_epoch=N to take N batches per "
                             "epoch from it, or an iterable whose __iter__ starts afresh (a list, a class with "
                             "__iter__)")
        tx, ty = _batches(self, x, "fit"), None
    else:
        if x is None or y is None:
            raise ValueError("[fit] needs arrays x and y, or an iterable of (x, y) batches as x")
        tx, ty = _as_tensor(self, x), _as_tensor(self, y, target=True)
        if sample_weight is not None:
            weights = _weights(self, sample_weight)
    validation = None
    if validation_data is not None:
        v = validation_data
        if isinstance(v, tuple) and len(v) in (2, 3) and _is_array(v[0]):
            validation = _data(self, v[0], v[1], batch_size, "fit", v[2] if len(v) == 3 else None)
        else:
            if _one_shot(v) and epochs - initial_epoch > 1:
                raise ValueError(f"[fit] validation_data is a one-shot iterator ({type(v).__name__}): it would "
                                 "validate the first epoch only; pass arrays or an iterable whose __iter__ starts "
                                 "afresh")
            validation = _data(self, v, None, batch_size, "fit")
    model.set_output(_write, _interactive())
    cw = {int(k): float(w) for k, w in (class_weight or {}).items()}
    history, epochs_run, cost, warning = model.fit(tx, ty, batch_size, epochs, initial_epoch, shuffle, seed,
                                                   validation_split, validation, _callbacks(callbacks), verbose,
                                                   cw, weights, steps)
    if warning:
        warnings.warn(warning, UserWarning, stacklevel=2)
    return History(history, epochs_run, cost)


def evaluate(self: Module, x: Any = None, y: Any = None, batch_size: int = 32, verbose: int = 0,
             return_dict: bool = False, sample_weight: Any = None) -> Union[float, List[float], Dict[str, float]]:
    """The loss and metrics over the data (arrays, an ArrayDataset, or an iterable of (x, y) or
    (x, y, sample_weight) batches), in inference mode without autograd: the loss alone when there
    are no metrics, else [loss, *metrics] (Keras' order), or a dict with ``return_dict``.
    ``sample_weight`` weighs each row's loss, as in fit."""
    model = _model(self)
    model.set_output(_write, _interactive())
    logs = model.evaluate(_data(self, x, y, batch_size, "evaluate", sample_weight), verbose)
    return _result(model, logs, return_dict)


def predict(self: Module, x: Any, batch_size: int = 32, verbose: int = 0) -> np.ndarray:
    """The outputs for every row of ``x`` (arrays, or an iterable of batches), as a NumPy array: in
    inference mode, without autograd, batched and (in traced mode, also before compile) replayed."""
    model = _model(self, compiled=False)
    model.set_output(_write, _interactive())
    return model.predict(_data(self, x, None, batch_size, "predict"), verbose).numpy()


def train_on_batch(self: Module, x: Any, y: Any, return_dict: bool = False, sample_weight: Any = None) -> Any:
    """One update on one batch (``sample_weight``: one loss weight per row); that batch's loss and
    metrics (see evaluate for the form)."""
    model = _model(self)
    w = None if sample_weight is None else _weights(self, sample_weight)
    return _result(model, model.train_on_batch(_as_tensor(self, x), _as_tensor(self, y, target=True), w),
                   return_dict)


def test_on_batch(self: Module, x: Any, y: Any, return_dict: bool = False) -> Any:
    """The loss and metrics of one batch in inference mode."""
    model = _model(self)
    return _result(model, model.test_on_batch(_as_tensor(self, x), _as_tensor(self, y, target=True)), return_dict)


def predict_on_batch(self: Module, x: Any) -> np.ndarray:
    """The outputs for one batch in inference mode, as a NumPy array."""
    return _model(self, compiled=False).predict_on_batch(_as_tensor(self, x)).numpy()


def _result(model: _C.Model, logs: Dict[str, float], return_dict: bool) -> Union[float, List[float], Dict[str, float]]:
    if return_dict:
        return logs
    values = [logs[n] for n in model.metrics_names]
    return values[0] if len(values) == 1 else values


def save_checkpoint(self: Module, path: Union[str, "os.PathLike[str]"]) -> None:
    """Writes everything needed to resume exactly — parameters, optimizer state, generator state,
    the step and epoch counters — to one safetensors file, atomically."""
    model = self.__dict__.get("_model")
    if model is not None and model.compiled:
        model.save_checkpoint(os.fspath(path))
    else:
        _C.save_checkpoint(self, os.fspath(path))


def load_checkpoint(self: Module, path: Union[str, "os.PathLike[str]"]) -> None:
    """Restores a checkpoint, all or nothing (the model must be built, and compiled with an
    optimizer of the same kind to restore the optimizer). Resume with
    ``fit(..., initial_epoch=model.epoch)``."""
    path = os.fspath(path)
    model = self.__dict__.get("_model")
    if model is not None and model.compiled:
        model.load_checkpoint(path)
    else:
        _C.load_checkpoint(self, path)


def _stop_training(self: Module) -> bool:
    model = self.__dict__.get("_model")
    return bool(model is not None and model.stop_training)


def _set_stop_training(self: Module, on: bool) -> None:
    _model(self).stop_training = bool(on)


def _compiled_attr(name: str, doc: str) -> property:
    return property(lambda self: getattr(_model(self), name), doc=doc)


for _f in (compile, fit, evaluate, predict, train_on_batch, test_on_batch, predict_on_batch, save_checkpoint,
           load_checkpoint):
    setattr(Module, _f.__name__, _f)
# The stub declares these as Module's properties (what users' type checkers see); set here, where
# the model behind a module is known.
_PROPERTIES = {
    "stop_training": property(_stop_training, _set_stop_training,
                              doc="Set by a callback to end fit after the current batch."),
    "optimizer": _compiled_attr("optimizer", "The compiled optimizer (made on first use for a name)."),
    "metrics_names": _compiled_attr("metrics_names", "'loss' and the metrics' names."),
    "iterations": _compiled_attr("iterations", "Updates done by fit and train_on_batch."),
    "epoch": _compiled_attr("epoch", "Epochs fit has completed (restored by load_checkpoint)."),
    "traced_steps": property(
        lambda self: {k: _model(self, compiled=False).traced_function(k) for k in ("train", "test", "predict")},
        doc="Statistics of the traced train, test and predict steps (None before first use)."),
}
for _name, _property in _PROPERTIES.items():
    setattr(Module, _name, _property)
