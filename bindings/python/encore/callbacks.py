"""Callbacks of ``Module.fit`` (Keras' hooks) and the History it returns.

Built in (C++, no Python per step): :class:`EarlyStopping`, :class:`ModelCheckpoint`,
:class:`LearningRateScheduler`. Write your own by subclassing :class:`Callback`; its batch
hooks are called only if the subclass overrides them (each call runs Python)."""

from __future__ import annotations

from typing import Any, Dict, List, Optional

from ._C import EarlyStopping, LearningRateScheduler, ModelCheckpoint

__all__ = ["Callback", "EarlyStopping", "History", "LearningRateScheduler", "ModelCheckpoint"]


class Callback:
    """Base of Python callbacks: ``self.model`` is the module being trained; set
    ``self.model.stop_training = True`` to end fit. ``logs`` hold the epoch's (or, at batch end,
    the running) loss and metrics; entries added to the epoch's logs appear in the History."""

    model: Any = None

    def set_model(self, model: Any) -> None:
        self.model = model

    def on_train_begin(self, logs: Optional[Dict[str, float]] = None) -> None: ...
    def on_train_end(self, logs: Optional[Dict[str, float]] = None) -> None: ...
    def on_epoch_begin(self, epoch: int, logs: Optional[Dict[str, float]] = None) -> None: ...
    def on_epoch_end(self, epoch: int, logs: Optional[Dict[str, float]] = None) -> None: ...
    def on_train_batch_begin(self, batch: int, logs: Optional[Dict[str, float]] = None) -> None: ...
    def on_train_batch_end(self, batch: int, logs: Optional[Dict[str, float]] = None) -> None: ...


class History:
    """What fit returns: ``history`` (name -> one value per epoch), ``epoch`` (the epochs run)
    and ``cost`` (the summary line: traces and why, replays, time tracing vs replaying)."""

    def __init__(self, history: Dict[str, List[float]], epoch: List[int], cost: str) -> None:
        self.history = history
        self.epoch = epoch
        self.cost = cost

    def __repr__(self) -> str:
        return f"History(epochs={self.epoch}, history={self.history})"
