"""Batches of in-memory arrays for training loops: the helper ``Module.fit`` uses.

    for x, y in encore.data.batches(x_train, y_train, batch_size=32, shuffle=True, seed=0, epoch=e):
        step(x, y)

The order of epoch ``e`` depends only on ``(seed, e)``; the last batch is smaller when the rows do
not divide evenly. Batches in order are views of the arrays; shuffled ones are copies."""

from __future__ import annotations

from typing import Any, List, Optional, Tuple

from . import _C
from ._C import ArrayDataset

__all__ = ["ArrayDataset", "batches"]


def batches(x: Any, y: Any = None, batch_size: int = 32, shuffle: bool = False, seed: int = 0,
            epoch: int = 0) -> List[Tuple[_C.Tensor, Optional[_C.Tensor]]]:
    """The (x, y) batches of one epoch (y None when not given)."""
    tx = x if isinstance(x, _C.Tensor) else _C.Tensor(x)
    ty = None if y is None else (y if isinstance(y, _C.Tensor) else _C.Tensor(y))
    return ArrayDataset(tx, ty, batch_size, shuffle, seed).batches(epoch)
