"""Keras-style layers on batch-major, channels-last tensors ``(batch, steps, channels)``,
Sequential, custom models, checkpoint files (safetensors) and losses.

Custom models and layers subclass :class:`Module`::

    class Net(nn.Module):
        def __init__(self):
            super().__init__()
            self.conv = nn.Conv1D(16, 3, activation="relu")   # registered as "conv"
            self.pool = nn.GlobalAveragePooling1D()
            self.head = nn.Dense(1)
            self.scale = encore.ones(1, requires_grad=True)   # a parameter: "scale"

        def forward(self, x):
            return self.head(self.pool(self.conv(x))) * self.scale

Attributes holding a module, a tuple/list of modules, or a tensor that requires grad are
registered under the attribute's name (parameter names like ``"conv.kernel"`` are stable: they
name tensors in checkpoints and graph dumps). A custom layer may create its weights in
``build(self, input_shape)`` with ``self.add_weight(shape, initializer)``; ``build`` may return
the output shape, else encore runs ``forward`` once on zeros to learn it. Subclasses are real
C++ modules: they run eagerly, inside ``encore.trace``, in Sequential and in ``fit``.

Every module starts in training mode (dropout active), as in PyTorch; ``model.eval()`` /
``model.train()`` switch it and everything inside it; ``predict`` and ``evaluate`` always run in
inference mode. ``encore.training(False)`` still turns every module's training off for a block.
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING, Any, Callable, Dict, List, Mapping, NamedTuple, Optional, Sequence, Tuple, Type, Union

import numpy as np

from . import _C
from ._C import (
    Module,
    binary_accuracy,
    binary_crossentropy,
    categorical_crossentropy,
    mean_squared_error,
    sparse_categorical_crossentropy,
)

if TYPE_CHECKING:
    from ._C import *  # noqa: F401,F403  (type checkers see the layer classes of _C.pyi)

# Every layer class of the extension (a subclass of Module) is an encore.nn layer at run time; a
# new one is also added to __all__ below (a test says so).
_LAYERS = sorted(name for name, value in vars(_C).items() if isinstance(value, type) and issubclass(value, Module))
globals().update({name: getattr(_C, name) for name in _LAYERS})

# A literal list, the form type checkers read: the layers (tests/python/test_package.py checks
# them against _LAYERS), then the functions.
__all__ = [
    "Activation", "AveragePooling1D", "BatchNormalization", "Bidirectional", "Conv1D", "Dense", "Dropout", "Embedding",
    "Flatten", "GRU", "GlobalAveragePooling1D", "GlobalMaxPooling1D", "LSTM", "LayerNormalization", "MaxPooling1D",
    "Module", "Recurrent", "Sequential",
    "save", "load", "save_checkpoint", "load_checkpoint", "binary_crossentropy", "categorical_crossentropy",
    "mean_squared_error", "sparse_categorical_crossentropy", "binary_accuracy", "IncompatibleKeys",
]


class _Modules(Module):
    """A tuple of modules assigned as one attribute: its items are children "0", "1", ..."""

    def __init__(self, modules: Tuple[Module, ...]) -> None:
        super().__init__()
        for i, module in enumerate(modules):
            setattr(self, str(i), module)

    def forward(self, x: Any) -> Any:
        raise TypeError("a list of modules has no forward: call its items")


def _setattr(self: Module, name: str, value: Any) -> None:
    if isinstance(value, (list, tuple)) and value and all(isinstance(v, Module) for v in value):
        # Kept as a tuple: appending to it later would leave the new module unregistered.
        value = tuple(value)
        registered: Any = _Modules(value)
    elif isinstance(value, Module) or (isinstance(value, _C.Tensor) and value.requires_grad):
        registered = value
    else:
        registered = None
    if registered is None:
        self._unregister(name)
    else:
        self._register(name, registered)
    object.__setattr__(self, name, value)


def _delattr(self: Module, name: str) -> None:
    self._unregister(name)
    object.__delattr__(self, name)


def _init_subclass(cls: Type[Module], /, **kwargs: Any) -> None:
    super(Module, cls).__init_subclass__(**kwargs)
    hook = cls.__dict__.get("build")
    if hook is None:
        return
    # `model.build(shape)` stays Module.build (which builds once and names parameters); it calls
    # the subclass' build as its hook. Inside a hook, super().build(input_shape) runs the parent's
    # hook, or does nothing at the top (Keras layers end their build with it).
    setattr(cls, "_build_hook", hook)  # noqa: B010  (an attribute the stub does not declare)

    def build(self: Module, input_shape: Any) -> Any:
        if self._building:
            return hook(self, input_shape)
        return _C.Module.build(self, input_shape)

    build.__doc__ = hook.__doc__
    setattr(cls, "build", build)  # noqa: B010  (the stub's build is a method of Module)


def _summary(self: Module, print_fn: Optional[Callable[[str], Any]] = None) -> None:
    """Prints a Keras-like summary of the built model: a row per layer (name, type, output shape
    with the batch as None, weights), then the total, trainable and non-trainable weight counts.
    ``print_fn`` is called with each line instead of ``print`` (to log it, or to collect it). A
    model that is not built yet raises ValueError: call it on a batch, or ``build(input_shape)``."""
    if print_fn is not None and not callable(print_fn):
        raise TypeError(f"[summary] print_fn must be callable, got {type(print_fn).__name__} (summary takes no "
                        "input shape: build the model, or call it on a batch, first)")
    for line in self._summary().splitlines():
        (print_fn or print)(line)


class IncompatibleKeys(NamedTuple):
    """What ``load_state_dict`` did not match (as in PyTorch): the module's names the state lacks,
    and the state's names the module does not have."""

    missing_keys: List[str]
    unexpected_keys: List[str]


def _as_value(value: Any) -> _C.Tensor:
    return value if isinstance(value, _C.Tensor) else _C.as_tensor(value)


def _state_dict(self: Module) -> Dict[str, _C.Tensor]:
    """PyTorch's state_dict: every parameter and buffer by name (the names of ``named_weights`` and
    of checkpoint files), as tensors sharing the module's memory, detached from autograd. Save it
    with ``safetensors.numpy.save_file({k: v.numpy() for k, v in sd.items()}, path)`` or
    ``encore.nn.save``; load it back with ``load_state_dict``."""
    return dict(self._state_dict())


def _load_state_dict(self: Module, state_dict: Mapping[str, Any], strict: bool = True) -> IncompatibleKeys:
    """Copies ``state_dict`` (name -> Tensor, NumPy array or DLPack tensor such as torch's) into
    the parameters and buffers in place, all or nothing. With ``strict`` (the default) the names
    must be exactly the module's (ValueError naming the missing and unexpected ones); without, the
    matching names are loaded. Shapes must match (ShapeError); values take each tensor's dtype.
    Returns ``IncompatibleKeys(missing_keys, unexpected_keys)``."""
    if not isinstance(state_dict, Mapping):
        raise TypeError(f"[load_state_dict] expected a mapping of names to tensors, got {type(state_dict).__name__}")
    missing, unexpected = self._load_state_dict([(str(k), _as_value(v)) for k, v in state_dict.items()], strict)
    return IncompatibleKeys(missing, unexpected)


def _get_weights(self: Module) -> List[np.ndarray]:
    """Keras' get_weights: copies of every weight as NumPy arrays, layer by layer (a layer's
    trainable weights, then its non-trainable ones, as Keras lists them)."""
    return [w.numpy() for w in self._get_weights()]


def _set_weights(self: Module, weights: Sequence[Any]) -> None:
    """Keras' set_weights: values (NumPy arrays, tensors) in ``get_weights``' order, all or nothing:
    the count and every shape must match."""
    self._set_weights([_as_value(w) for w in weights])


Module.summary = _summary  # type: ignore[method-assign]
Module.state_dict = _state_dict  # type: ignore[method-assign]
Module.load_state_dict = _load_state_dict  # type: ignore[method-assign]
Module.get_weights = _get_weights  # type: ignore[method-assign]
Module.set_weights = _set_weights  # type: ignore[method-assign]
Module.__setattr__ = _setattr  # type: ignore[method-assign,assignment]
Module.__delattr__ = _delattr  # type: ignore[method-assign,assignment]
Module.__init_subclass__ = classmethod(_init_subclass)  # type: ignore[method-assign,assignment]


def save(model: Module, path: Union[str, "os.PathLike[str]"]) -> None:
    """Writes every parameter and buffer (``named_weights()``) of ``model`` to ``path`` as a safetensors file
    that other tools read (``safetensors.numpy.load_file``). The write is atomic: a temporary file
    ``<path>.<pid>-<n>.tmp`` in the same folder is synced and renamed over ``path``, so an
    interrupted save leaves the previous file, and the next save to ``path`` removes the temporary
    files that interrupted saves left. Raises ``encore.FileError`` (an OSError: FileNotFoundError
    for a missing folder, PermissionError, IsADirectoryError, errno ENOSPC for a full disk) when
    the file cannot be written, or when ``path`` names something that is not a regular file (a
    device, a FIFO: renaming over it would replace it)."""
    _C.save_module(model, os.fspath(path))


def load(model: Module, path: Union[str, "os.PathLike[str]"]) -> Module:
    """Loads the safetensors file ``path`` into ``model``'s parameters and buffers in place and returns the
    model. All or nothing: the file must hold every parameter exactly once with its shape and
    dtype, and nothing else; files encore wrote are checked against their checksums; on any
    error (ValueError, or encore.ShapeError for a shape mismatch) the model is unchanged.
    Raises FileNotFoundError (an ``encore.FileError``) when ``path`` does not exist. Files in
    encore's former format of its own are no longer read."""
    _C.load_module(model, os.fspath(path))
    return model


# These wrap _C's functions of the same names, which the type checker also sees (star import above).
def save_checkpoint(  # type: ignore[no-redef]
        model: Module, path: Union[str, "os.PathLike[str]"], optimizer: Any = None,
                    metadata: Optional[Dict[str, str]] = None) -> None:
    """Writes everything a hand-written training loop needs to resume exactly: ``model``'s
    parameters, ``optimizer``'s state (moments, momentum buffers, step count, learning rate) and
    the random generators' state, to one safetensors file, atomically, with your ``metadata``
    strings (the loop's step, say; load_checkpoint returns them). ``model.save_checkpoint`` does
    it for a compiled model, with its counters."""
    _C.save_checkpoint(model, os.fspath(path), optimizer, dict(metadata or {}))


def load_checkpoint(  # type: ignore[no-redef]
        model: Module, path: Union[str, "os.PathLike[str]"], optimizer: Any = None) -> Dict[str, str]:
    """Restores what :func:`save_checkpoint` wrote, all or nothing: on any error (missing,
    truncated, corrupt or mismatched file, another optimizer kind) nothing changes. Returns the
    file's metadata."""
    metadata: Dict[str, str] = _C.load_checkpoint(model, os.fspath(path), optimizer)
    return metadata
