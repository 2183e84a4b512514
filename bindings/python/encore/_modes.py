"""Grad mode and training mode as context managers that also work as decorators."""

from __future__ import annotations

import contextlib
import functools
from typing import Any, Callable, Optional, TypeVar

from . import _C

F = TypeVar("F", bound=Callable[..., Any])


class _ModeScope(contextlib.ContextDecorator):
    """Sets a thread-local flag for a `with` block (or each call of a decorated function) and
    restores the previous value on exit."""

    _get: Callable[[], bool]
    _set: Callable[[bool], None]

    def __init__(self, on: bool) -> None:
        self._on = bool(on)
        self._previous: list[bool] = []

    def _recreate_cm(self) -> "_ModeScope":
        # A fresh scope per decorated call: concurrent and recursive calls restore correctly.
        return type(self)(self._on)

    def __enter__(self) -> None:
        self._previous.append(type(self)._get())
        type(self)._set(self._on)

    def __exit__(self, *exc: object) -> None:
        type(self)._set(self._previous.pop())


class _GradScope(_ModeScope):
    _get = staticmethod(_C.is_grad_enabled)
    _set = staticmethod(_C._set_grad_enabled)


class _TrainingScope(_ModeScope):
    _get = staticmethod(_C.is_training)
    _set = staticmethod(_C.set_training)


def _scope_or_decorated(scope: _ModeScope, func: Optional[F]) -> Any:
    return scope if func is None else functools.wraps(func)(scope(func))


def no_grad(func: Optional[F] = None) -> Any:
    """Disables autograd recording: ``with encore.no_grad():``, ``@encore.no_grad()`` or
    ``@encore.no_grad``."""
    return _scope_or_decorated(_GradScope(False), func)


def enable_grad(func: Optional[F] = None) -> Any:
    """Re-enables autograd recording inside a ``no_grad`` scope (context manager or decorator)."""
    return _scope_or_decorated(_GradScope(True), func)


def set_grad_enabled(on: bool) -> "_RestoreOnExit":
    """Sets grad mode now; used as a context manager, restores the previous mode on exit."""
    previous = _C.is_grad_enabled()
    _C._set_grad_enabled(bool(on))
    return _RestoreOnExit(_C._set_grad_enabled, previous)


def training(flag: bool = True) -> _ModeScope:
    """Training mode (dropout active) for a block or a decorated function:
    ``with encore.training(False): model(x)``."""
    return _TrainingScope(flag)


class _RestoreOnExit:
    def __init__(self, setter: Callable[[bool], None], previous: bool) -> None:
        self._setter = setter
        self._previous = previous

    def __enter__(self) -> None:
        return None

    def __exit__(self, *exc: object) -> None:
        self._setter(self._previous)
