"""CUDA queries. Everything works (and reports no devices) on machines without a GPU, the CUDA
libraries or encore's CUDA plugin; :func:`unavailable_reason` says which was missing."""

from __future__ import annotations

from typing import Optional, Union

from . import _C


def is_available() -> bool:
    """True when the CUDA backend is loaded and a GPU is present."""
    return _C.cuda_is_available()


def unavailable_reason() -> str:
    """Why :func:`is_available` is False, e.g. ``"no CUDA plugin: .../libencore_cuda.so not
    found"``, ``"the CUDA plugin ... failed to load: libcudart.so.13: cannot open shared object
    file"``, ``"no CUDA driver found"``; empty when it is True."""
    return _C.cuda_unavailable_reason()


def is_built() -> bool:
    """True when the CUDA backend is present: encore was built with it and its plugin (which
    needs the CUDA libraries) loaded, whether or not a GPU is present."""
    return _C.cuda_is_built()


def device_count() -> int:
    """CUDA devices present (0 without a GPU or without the CUDA backend)."""
    return _C.cuda_device_count()


def stream(device: Optional[Union[str, _C.Device]] = None) -> int:
    """The stream encore queues the calling thread's work for ``device`` (default ``cuda:0``) on,
    as an int (a ``cudaStream_t``): to time encore's work with another library's CUDA events,
    e.g. ``torch.cuda.ExternalStream(encore.cuda.stream())``."""
    return _C.cuda_stream(device)


def synchronize(device: Optional[Union[str, _C.Device]] = None) -> None:
    """Waits until all queued work on ``device`` (default ``cuda:0``) has finished."""
    _C.synchronize(device)
