"""Per-shape algorithm choices (cuDNN on the GPU, oneDNN primitives on the CPU): what was
chosen, what it cost, and a file to carry choices to another process."""

from __future__ import annotations

from typing import Any, Dict, List, Tuple

from . import _C


def set_policy(policy: str) -> None:
    """'heuristic' (default: no timing), 'exhaustive' (time every algorithm once per shape) or 'off'."""
    _C.autotune_set_policy(policy)


def policy() -> str:
    return _C.autotune_policy()


def entries() -> List[Dict[str, Any]]:
    """Every choice made or loaded so far (op, key, algorithm, time_ms, backend, source, ...;
    ``timings``: on the CPU under 'exhaustive', every implementation tried and its time)."""
    return _C.autotune_entries()


def save(path: str) -> None:
    """Writes the choices (GPU and CPU) to ``path``, atomically as every file encore writes
    (``encore.FileError``, an OSError, when it cannot be written or is not a regular file)."""
    _C.autotune_save(str(path))


def load(path: str) -> None:
    """Adds the choices saved in ``path``."""
    _C.autotune_load(str(path))


def clear() -> None:
    """Forgets every choice: the next use of each shape searches again."""
    _C.autotune_clear()


def conv1d_primitives() -> List[Tuple[str, str]]:
    """The CPU's cached oneDNN convolution primitives: (shape key, implementation)."""
    return _C.conv1d_primitives()


def clear_conv1d_primitives() -> None:
    """Forgets the CPU's cached primitives: the next use of each shape pays the setup again."""
    _C.clear_conv1d_primitives()


def set_conv1d_layout(layout: str) -> None:
    """The CPU convolutions' activation layout: 'native' (channels-last ``nwc``, never converted;
    the default) or 'blocked' (oneDNN's preferred layout: conv1d emits to_blocked / from_blocked
    nodes around the convolution; a traced step keeps consecutive convolutions blocked; the
    ledger counts the conversions as layout_reorders / layout_reorder_ns)."""
    _C.set_conv1d_layout(layout)


def conv1d_layout() -> str:
    return _C.conv1d_layout()
