"""compare_modes and its command line (``python -m encore.compare``, the module
:mod:`encore.compare`). The package imports this module, never ``encore.compare``: runpy warns
when the module it runs as ``__main__`` was imported already."""


from __future__ import annotations

import argparse
import itertools
import json
import runpy
from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple

from . import _C
from ._C import Tensor

MODES = ("eager", "traced", "eager_new_length", "traced_new_length", "bucket", "predict_eager", "predict_traced")
_MAX_ITERATED_BATCHES = 16


def _tensor(v: Any) -> Tensor:
    return v if isinstance(v, Tensor) else _C.as_tensor(v)


def _batch(b: Any) -> List[Tensor]:
    if isinstance(b, (tuple, list)):
        return [_tensor(v) for v in b]
    return [_tensor(b)]


def _outputs(result: Any) -> List[Tensor]:
    if result is None:
        return []
    if isinstance(result, (tuple, list)):
        return [_tensor(v) for v in result]
    return [_tensor(result)]


_Make = Optional[Callable[[int], List[Tensor]]]


def _source(data: Any, length: Optional[int]) -> Tuple[List[List[Tensor]], _Make]:
    """(fixed batches, make) from one batch, a sequence or iterator of batches, or a function
    of the length."""
    if callable(data):
        if length is None:
            raise TypeError("compare_modes: data is a function of the length: also pass length= (the fixed batches')")
        return [_batch(data(length))], lambda n: _batch(data(n))
    if isinstance(data, tuple) or isinstance(data, Tensor) or hasattr(data, "__array_interface__"):
        return [_batch(data)], None
    if isinstance(data, list):
        if not data:
            raise ValueError("compare_modes: data is an empty list")
        return [_batch(b) for b in data], None
    if hasattr(data, "__iter__"):
        batches = [_batch(b) for b in itertools.islice(iter(data), _MAX_ITERATED_BATCHES)]
        if not batches:
            raise ValueError("compare_modes: data yielded no batch")
        return batches, None
    raise TypeError(f"compare_modes: data must be a batch, a list or iterator of batches, or a function of the "
                    f"length, got {type(data).__name__}")


class Report:
    """What each mode cost: ``table()``, ``to_dict()``, ``to_json()``, ``plot(path)``,
    ``report["traced"]`` (one mode's dict)."""

    def __init__(self, raw: "_C.CompareReport"):
        self._raw = raw
        self._dict = json.loads(raw.json())

    def table(self) -> str:
        return self._raw.table()

    def __str__(self) -> str:
        return self.table()

    def to_dict(self) -> Dict[str, Any]:
        copy: Dict[str, Any] = json.loads(json.dumps(self._dict))  # a copy the caller may change
        return copy

    def to_json(self, path: Optional[str] = None) -> str:
        text = json.dumps(self._dict, indent=2)
        if path is not None:
            with open(path, "w") as f:
                f.write(text + "\n")
        return text

    @property
    def modes(self) -> List[Dict[str, Any]]:
        modes: List[Dict[str, Any]] = self.to_dict()["modes"]
        return modes

    def __getitem__(self, mode: str) -> Dict[str, Any]:
        for m in self._dict["modes"]:
            if m["mode"] == mode:
                copy: Dict[str, Any] = json.loads(json.dumps(m))
                return copy
        raise KeyError(f"the report has no mode {mode!r}")

    def plot(self, path: str) -> None:
        """Draws per-step times of each mode (left) and cumulative time with each traced mode's
        break-even step marked (right) into a PNG. Needs matplotlib: raises ImportError (naming
        ``pip install matplotlib``) without it."""
        plt = _pyplot()
        fig, (per_step, cumulative) = plt.subplots(1, 2, figsize=(13, 4.5))
        for m in self._dict["modes"]:
            if m["error"]:
                continue
            times = [t for t in m["step_ms"] if t is not None]
            steps = range(1, len(times) + 1)
            line, = per_step.plot(steps, times, marker=".", label=m["mode"])
            total, acc = 0.0, []
            for t in times:
                total += t
                acc.append(total)
            cumulative.plot(steps, acc, color=line.get_color(), label=m["mode"])
            n = m["break_even_step"]
            if m["baseline"] and 0 < n <= len(acc):
                cumulative.axvline(n, color=line.get_color(), linestyle=":", alpha=0.7)
                cumulative.annotate(f"{m['mode']} pays off at step {n}", (n, acc[n - 1]), fontsize=8)
        per_step.set_yscale("log")
        per_step.set_title(f"{self._dict['name']} on {self._dict['device']}: ms per step (steps taken in turn)")
        per_step.set_xlabel("call")
        per_step.set_ylabel("ms")
        cumulative.set_title("cumulative time; dotted: break-even step")
        cumulative.set_xlabel("calls")
        cumulative.set_ylabel("ms")
        for ax in (per_step, cumulative):
            ax.grid(True, alpha=0.3)
            ax.legend(fontsize=8)
        fig.tight_layout()
        fig.savefig(path, dpi=110)
        plt.close(fig)


def _pyplot() -> Any:
    """matplotlib.pyplot on the Agg backend (files, no display), or a clear ImportError."""
    try:
        import matplotlib  # type: ignore[import-not-found, unused-ignore]

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt  # type: ignore[import-not-found, unused-ignore]
    except ImportError as e:
        raise ImportError("Report.plot needs matplotlib: pip install matplotlib (or scripts/python_env.sh --plot)",
                          name="matplotlib") from e
    return plt


def compare_modes(
    step: Optional[Callable[..., Any]] = None,
    data: Any = None,
    *,
    model: Any = None,
    loss: Optional[Callable[[Tensor, Tensor], Tensor]] = None,
    optimizer: Any = None,
    modes: Sequence[str] = ("eager", "traced"),
    steps: int = 30,
    warmup: int = 3,
    profile_steps: int = 5,
    length: Optional[int] = None,
    lengths: Any = None,
    length_axis: int = 1,
    length_args: Sequence[int] = (0,),
    buckets: Sequence[int] = (),
    predict: Optional[Callable[..., Any]] = None,
    state: Sequence[Tensor] = (),
    name: Optional[str] = None,
) -> Report:
    """Runs your training step in each mode, the modes taking their steps in turn, and reports
    per mode: first call, steady median, kernel time vs framework overhead, input copy-in,
    per-shape setup, traces with their structured records, arena vs eager peak bytes, and the
    break-even step (after how many calls tracing has paid for itself).

    ``step(*batch)`` is a whole training step; or pass ``model``, ``loss`` (``loss(y, y_pred)``)
    and ``optimizer`` for batches ``(x, y)``. ``data`` is one batch (a tuple of tensors or
    arrays), a list or iterator of batches (its first 16 are cycled), or a function
    ``data(length)`` that makes a batch of that length (the new-length and bucket modes need
    one; ``length`` is the fixed batches'). ``lengths`` is the new-length modes' schedule: a
    function of the call number or a sequence (cycled); default one longer every call.
    ``modes``: any of eager, traced, eager_new_length, traced_new_length, bucket (padded to
    ``buckets`` along ``length_axis`` of the batch tensors ``length_args``; refused, with the
    reason in the report, where padding cannot be made exact), predict_eager, predict_traced (the
    forward pass, ``predict(*batch)`` or the model, without gradients).

    The model form restores the parameters and the optimizer state afterwards; the step form
    restores the tensors in ``state``, and the report says it trained them otherwise."""
    if data is None:
        raise TypeError("compare_modes: pass data= (a batch, batches, or a function of the length)")
    batches, make = _source(data, length)
    if lengths is None:
        schedule = None
    elif callable(lengths):
        schedule = lambda i: int(lengths(i))  # noqa: E731
    else:
        values = [int(v) for v in lengths]
        if not values:
            raise ValueError("compare_modes: lengths is empty")
        schedule = lambda i: values[i % len(values)]  # noqa: E731
    options: Dict[str, Any] = {
        "modes": list(modes), "steps": int(steps), "warmup": int(warmup), "profile_steps": int(profile_steps),
        "length": schedule, "length_axis": int(length_axis), "length_args": [int(a) for a in length_args],
        "buckets": [int(b) for b in buckets], "state": list(state),
    }
    if predict is not None:
        options["predict"] = lambda b: _outputs(predict(*b))
    if model is not None:
        if step is not None:
            raise TypeError("compare_modes: pass either step or model/loss/optimizer, not both")
        if loss is None or optimizer is None:
            raise TypeError("compare_modes: the model form needs loss= and optimizer=")
        options["name"] = name or "model"
        return Report(_C.compare_modes_model(model, loss, optimizer, batches, make, options))
    if step is None:
        raise TypeError("compare_modes: pass step= (a training step) or model=, loss= and optimizer=")
    if not callable(step):
        raise TypeError(f"compare_modes: step must be callable, got {type(step).__name__}")
    from ._trace import _arg_names  # the step's parameter names name the arguments in records

    options["name"] = name or getattr(step, "__name__", "step")
    options["arg_names"] = _arg_names(step)
    return Report(_C.compare_modes(lambda b: _outputs(step(*b)), batches, make, options))


_SCRIPT_NAMES = ("step", "data", "model", "loss", "optimizer", "predict", "modes", "lengths", "length",
                 "length_axis", "length_args", "buckets")


def main(argv: Optional[Sequence[str]] = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m encore.compare",
        description="Compare eager, traced, retraced and bucketed execution on the model a script defines. "
                    "The script must define `data` and either `step` or `model`, `loss` and `optimizer`; it may "
                    "define " + ", ".join(f"`{n}`" for n in _SCRIPT_NAMES[5:]) + ".")
    parser.add_argument("script", help="a Python file defining the model and the data")
    parser.add_argument("--modes", help=f"comma-separated, from: {', '.join(MODES)}")
    parser.add_argument("--steps", type=int, default=30)
    parser.add_argument("--warmup", type=int, default=3)
    parser.add_argument("--buckets", help="comma-separated bucket sizes (the bucket mode)")
    parser.add_argument("--json", metavar="FILE", help="write the report as JSON")
    parser.add_argument("--plot", metavar="FILE.png", help="draw per-step and cumulative times (needs matplotlib)")
    args = parser.parse_args(argv)
    if args.plot:
        try:
            _pyplot()  # before the comparison runs, not after
        except ImportError as e:
            parser.error(f"--plot: {e}")
    try:
        ns = runpy.run_path(args.script, run_name="__encore_compare__")
    except FileNotFoundError:
        parser.error(f"no such script: {args.script}")
    given = {k: ns[k] for k in _SCRIPT_NAMES if k in ns}
    if "data" not in given or not ("step" in given or "model" in given):
        parser.error(f"{args.script} must define `data` and either `step` or `model`, `loss` and `optimizer`")
    if args.modes:
        given["modes"] = [m.strip() for m in args.modes.split(",") if m.strip()]
    if args.buckets:
        try:
            given["buckets"] = [int(b) for b in args.buckets.split(",")]
        except ValueError:
            parser.error(f"--buckets needs comma-separated integers, got {args.buckets!r}")
    if "step" in given and "model" in given:
        given.pop("model")  # a script may define a model its step uses
    step = given.pop("step", None)
    data = given.pop("data")
    report = compare_modes(step, data, steps=args.steps, warmup=args.warmup, **given)
    print(report.table())
    if args.json:
        report.to_json(args.json)
        print(f"wrote {args.json}")
    if args.plot:
        report.plot(args.plot)
        print(f"wrote {args.plot}")
    return 0
