"""How user callables (nodes, routes, hooks) are inspected and called: one or two arguments,
plain or async."""

from __future__ import annotations

import inspect
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

__all__ = ["CallableSpec", "accepts_config", "is_async_callable"]


def is_async_callable(fn: Any) -> bool:
    """True for ``async def`` functions, partials of them and objects with ``async __call__``."""
    if inspect.iscoroutinefunction(fn):
        return True
    call = getattr(fn, "__call__", None)  # noqa: B004 - we want the bound __call__
    return call is not None and inspect.iscoroutinefunction(call)


def _positional_count(fn: Callable[..., Any]) -> int | None:
    try:
        signature = inspect.signature(fn)
    except (TypeError, ValueError):
        return None
    count = 0
    for parameter in signature.parameters.values():
        if parameter.kind is inspect.Parameter.VAR_POSITIONAL:
            return None
        if parameter.kind in (
            inspect.Parameter.POSITIONAL_ONLY,
            inspect.Parameter.POSITIONAL_OR_KEYWORD,
        ):
            count += 1
    return count


def accepts_config(fn: Callable[..., Any]) -> bool:
    """Whether ``fn`` takes ``(state, config)`` rather than ``(state)``."""
    count = _positional_count(fn)
    return count is None or count >= 2


@dataclass(frozen=True)
class CallableSpec:
    """A node action or route with how to call it."""

    fn: Callable[..., Any]
    takes_config: bool
    is_async: bool

    @classmethod
    def of(cls, fn: Callable[..., Any]) -> CallableSpec:
        return cls(fn, accepts_config(fn), is_async_callable(fn))

    def call(self, state: Any, config: Any) -> Any:
        """Call it; the result may be awaitable (for async callables)."""
        if self.takes_config:
            return self.fn(state, config)
        return self.fn(state)
