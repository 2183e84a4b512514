"""CUDA queries. Everything works (and reports no devices) on machines without a GPU."""

from __future__ import annotations

from typing import Optional, Union

from . import _C


def is_available() -> bool:
    """True when this build has the CUDA backend and a GPU is present."""
    return _C.cuda_is_available()


def is_built() -> bool:
    """True when this build includes the CUDA backend (whether or not a GPU is present)."""
    return _C.cuda_is_built()


def device_count() -> int:
    """CUDA devices present (0 without a GPU or without the CUDA backend)."""
    return _C.cuda_device_count()


def synchronize(device: Optional[Union[str, _C.Device]] = None) -> None:
    """Waits until all queued work on ``device`` (default ``cuda:0``) has finished."""
    _C.synchronize(device)
