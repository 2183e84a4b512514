"""encore.trace: record a Python function into replayable graphs, one per input signature."""

from __future__ import annotations

import functools
import inspect
import warnings
from typing import Any, Callable, List, Optional, Tuple, Union, overload

from . import _C


class RetraceWarning(UserWarning):
    """A traced function has retraced more often than its ``retrace_warning`` threshold."""


def _arg_names(fn: Callable[..., Any]) -> List[str]:
    try:
        params = inspect.signature(fn).parameters.values()
    except (TypeError, ValueError):
        return []
    names = []
    for p in params:
        if p.kind not in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD):
            break
        names.append(p.name)
    return names


def _binder(fn: Callable[..., Any]) -> Optional[Callable[..., Tuple[Any, ...]]]:
    try:
        sig = inspect.signature(fn)
    except (TypeError, ValueError):
        return None

    def bind(*args: Any, **kwargs: Any) -> Tuple[Any, ...]:
        bound = sig.bind(*args, **kwargs)
        if bound.kwargs:
            raise TypeError(
                f"[trace] keyword-only arguments {sorted(bound.kwargs)} cannot be passed to a traced "
                "function; make them positional"
            )
        return tuple(bound.args)

    return bind


def _warn(message: str) -> None:
    # stacklevel 2: the line that called the traced function.
    warnings.warn(message, RetraceWarning, stacklevel=2)


@overload
def trace(
    fn: Callable[..., Any],
    *,
    name: Optional[str] = None,
    shapes: Optional[_C.ShapePolicy] = None,
    max_cached: int = 32,
    max_cached_bytes: int = 0,
    retrace_warning: int = 8,
    alias_outputs: bool = False,
    optimize: bool = True,
) -> _C.TracedFunction: ...
@overload
def trace(
    fn: None = None,
    *,
    name: Optional[str] = None,
    shapes: Optional[_C.ShapePolicy] = None,
    max_cached: int = 32,
    max_cached_bytes: int = 0,
    retrace_warning: int = 8,
    alias_outputs: bool = False,
    optimize: bool = True,
) -> Callable[[Callable[..., Any]], _C.TracedFunction]: ...
def trace(
    fn: Optional[Callable[..., Any]] = None,
    *,
    name: Optional[str] = None,
    shapes: Optional[_C.ShapePolicy] = None,
    max_cached: int = 32,
    max_cached_bytes: int = 0,
    retrace_warning: int = 8,
    alias_outputs: bool = False,
    optimize: bool = True,
) -> Union[_C.TracedFunction, Callable[[Callable[..., Any]], _C.TracedFunction]]:
    """Traces ``fn`` into a static graph per input signature and replays it on later calls.

    Use as ``@encore.trace``, ``@encore.trace(name=..., shapes=encore.bucket(1, [64, 128]))``
    or ``step = encore.trace(fn, ...)``. Arguments of the traced function are Tensors (or
    NumPy arrays) and static ``int``/``float``/``bool``/``str`` values, which are part of the
    cache key. It returns a Tensor, a tuple/list of Tensors, or None, and the traced function
    returns the same structure.

    The function body runs only when a signature traces, symbolically: reading a value
    (``item()``, ``numpy()``, printing) inside it is an error. Tensors it reads from outside
    (parameters, optimizer state) are captured by reference and updated in place on replay.

    Options: ``name`` (for explanations; default the function's name), ``shapes``
    (``encore.exact()`` or ``encore.bucket(axis, sizes, args=(0,))``), ``max_cached`` graphs
    kept (LRU), ``max_cached_bytes`` (all cached graphs' arenas and own buffers together; 0 no
    limit), ``retrace_warning`` (warn once with :class:`RetraceWarning` after that many
    traces; 0 never), ``alias_outputs`` (return views of the Plan's buffers that the next
    replay overwrites, instead of copies), ``optimize`` (graph passes).

    The result has ``.stats`` (dict), ``.explain()``, ``.graph()``, ``.graph_dot()``,
    ``.op_counts()``, ``.stats_table()`` and ``.clear()``.
    """
    if fn is None:
        def decorate(f: Callable[..., Any]) -> _C.TracedFunction:
            return trace(f, name=name, shapes=shapes, max_cached=max_cached, max_cached_bytes=max_cached_bytes,
                         retrace_warning=retrace_warning,
                         alias_outputs=alias_outputs, optimize=optimize)

        return decorate
    if not callable(fn):
        raise TypeError(f"encore.trace expects a callable, got {type(fn).__name__}")
    traced = _C.TracedFunction(
        fn,
        name=str(name or getattr(fn, "__name__", "traced")),
        shapes=shapes if shapes is not None else _C.exact(),
        max_cached=max_cached,
        max_cached_bytes=max_cached_bytes,
        retrace_warning=retrace_warning,
        alias_outputs=alias_outputs,
        optimize=optimize,
        arg_names=_arg_names(fn),
        on_warning=_warn,
    )
    traced._binder = _binder(fn)
    functools.update_wrapper(traced, fn)
    return traced
