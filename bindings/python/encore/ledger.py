"""The cost ledger: where the time goes (ops dispatched, dispatch and kernel time, traces,
planning, capture, autotuning, replays, allocations)."""

from __future__ import annotations

from typing import Dict, List, Tuple

from . import _C


def table() -> str:
    """Every non-zero counter as a text table (times in ms)."""
    return _C.ledger_table()


def as_dict() -> Dict[str, int]:
    """Counter name -> value (times in ns)."""
    return _C.ledger_dict()


def reset() -> None:
    """Zeroes every counter and drops the recorded events."""
    _C.ledger_reset()


def is_profiling() -> bool:
    return _C.ledger_profiling()


class profiling:
    """Turns profiling (timed kernels, events for the Chrome trace) on or off now.

    ``encore.ledger.profiling(True)`` sets it; ``with encore.ledger.profiling(): ...`` also
    restores the previous setting when the block ends.
    """

    def __init__(self, on: bool = True) -> None:
        self._previous = _C.ledger_profiling()
        _C.ledger_set_profiling(bool(on))

    def __enter__(self) -> "profiling":
        return self

    def __exit__(self, *exc: object) -> None:
        _C.ledger_set_profiling(self._previous)


def events() -> List[Tuple[str, str, int, int]]:
    """Recorded events: (name, category, start_ns, duration_ns)."""
    return _C.ledger_events()


def chrome_trace_json() -> str:
    """The recorded events as Chrome trace JSON: a track per thread (named by metadata events), kernel
    events with ``args`` (op, device, input and output shapes, bytes, implementation where known), and
    the trace, plan and replay phases around the kernels they ran."""
    return _C.ledger_chrome_trace_json()


def write_chrome_trace(path: str) -> None:
    """Writes the recorded events as Chrome trace JSON (open it in Perfetto), atomically as every
    file encore writes (``encore.FileError``, an OSError, when it cannot be written or is not a
    regular file)."""
    _C.ledger_write_chrome_trace(str(path))
