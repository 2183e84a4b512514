"""Tensor methods written in Python (none of them is on a hot path)."""

from __future__ import annotations

from typing import Iterator

from ._C import Tensor


def _iter(self: Tensor) -> Iterator[Tensor]:
    if self.ndim == 0:
        raise TypeError("iteration over a 0-d tensor")
    for i in range(len(self)):
        yield self[i]


def _format(self: Tensor, spec: str) -> str:
    if self.ndim == 0 and spec:
        return format(self.item(), spec)
    return str(self)


Tensor.__iter__ = _iter  # type: ignore[method-assign]
Tensor.__format__ = _format  # type: ignore[method-assign,assignment]
