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


def accepts_config(fn: Callable[..., Any]) -> bool:
    """Whether ``fn`` takes ``(state, config)`` rather than ``(state)``.

    It does when a second positional parameter has no default (``lambda s, i=i: ...`` is a
    one-argument node), when it has a parameter named ``config``, or when it takes ``*args``.
    """
    try:
        signature = inspect.signature(fn)
    except (TypeError, ValueError):
        return False
    positional = []
    for parameter in signature.parameters.values():
        if parameter.kind is inspect.Parameter.VAR_POSITIONAL:
            return True
        if parameter.name == "config":
            return True
        if parameter.kind in (
            inspect.Parameter.POSITIONAL_ONLY,
            inspect.Parameter.POSITIONAL_OR_KEYWORD,
        ):
            positional.append(parameter)
    return len(positional) >= 2 and positional[1].default is inspect.Parameter.empty


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
