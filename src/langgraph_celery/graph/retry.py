"""RetryPolicy: retry a node's transient failures with exponential backoff and jitter.

In process it is a wrap hook (``policy.as_hook()``); on Celery the executor finds it on the node
and turns it into Celery retries with the same delays.
"""

from __future__ import annotations

import asyncio
import inspect
import random
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any

from langgraph_celery.graph._callables import is_async_callable
from langgraph_celery.graph._runner import ASYNC_VARIANT
from langgraph_celery.graph.types import GraphInterrupt

__all__ = ["RetryPolicy", "delay_after"]

RetryOn = type[BaseException] | Callable[[BaseException], bool]


def seconds_of(value: object) -> float | None:
    """``value``, a number of seconds or a ``timedelta``, in seconds; ``None`` if it is neither
    (a bool is not taken for a number).  Durations are given this way throughout (here and in
    ``CeleryExecutor``), each checking its own range."""
    seconds = value.total_seconds() if isinstance(value, timedelta) else value
    if isinstance(seconds, bool) or not isinstance(seconds, int | float):
        return None
    return float(seconds)


def _seconds(name: str, value: float | timedelta) -> float:
    seconds = seconds_of(value)
    if seconds is None or seconds < 0:
        raise ValueError(f"{name} must be a non-negative number of seconds or a timedelta")
    return seconds


@dataclass(frozen=True)
class RetryPolicy:
    """Retry on the exceptions (classes and/or predicates, OR-combined) in ``retry_on``.

    ``max_attempts`` counts the first call; attempt ``k+1`` waits
    ``min(retry_delay * backoff_factor**(k-1), max_interval)`` plus, with jitter, a random amount
    between zero and that.
    """

    retry_on: tuple[RetryOn, ...]
    max_attempts: int = 3
    retry_delay: float = 0.5
    backoff_factor: float = 2.0
    max_interval: float = 128.0
    jitter: bool = True
    _random: random.Random = field(default_factory=random.Random, repr=False, compare=False)

    def __init__(
        self,
        retry_on: RetryOn | Iterable[RetryOn] | None = None,
        max_attempts: int = 3,
        retry_delay: float | timedelta = 0.5,
        backoff_factor: float = 2.0,
        max_interval: float | timedelta = 128.0,
        jitter: bool = True,
    ) -> None:
        if retry_on is None:
            raise ValueError(
                "RetryPolicy needs retry_on: the exception classes and/or predicates to retry on"
            )
        items = (
            (retry_on,)
            if isinstance(retry_on, type) or not isinstance(retry_on, Iterable)
            else tuple(retry_on)
        )
        if not items:
            raise ValueError("RetryPolicy retry_on is empty; name at least one exception class")
        for item in items:
            if isinstance(item, type):
                if not issubclass(item, BaseException):
                    raise ValueError(f"retry_on class {item.__name__} is not an exception class")
            elif not callable(item):
                raise ValueError(f"retry_on takes exception classes or predicates, got {item!r}")
        if isinstance(max_attempts, bool) or not isinstance(max_attempts, int) or max_attempts < 1:
            raise ValueError(f"max_attempts must be an int >= 1, got {max_attempts!r}")
        if not isinstance(backoff_factor, int | float) or backoff_factor < 1:
            raise ValueError(f"backoff_factor must be >= 1, got {backoff_factor!r}")
        object.__setattr__(self, "retry_on", items)
        object.__setattr__(self, "max_attempts", max_attempts)
        object.__setattr__(self, "retry_delay", _seconds("retry_delay", retry_delay))
        object.__setattr__(self, "backoff_factor", float(backoff_factor))
        object.__setattr__(self, "max_interval", _seconds("max_interval", max_interval))
        object.__setattr__(self, "jitter", bool(jitter))
        object.__setattr__(self, "_random", random.Random())

    def should_retry(self, error: BaseException) -> bool:
        """Whether ``error`` is one this policy retries (never an interruption)."""
        if isinstance(error, GraphInterrupt):
            return False
        for item in self.retry_on:
            if isinstance(item, type):
                if isinstance(error, item):
                    return True
            elif item(error):
                return True
        return False

    def base_delay(self, attempt: int) -> float:
        """The delay before attempt ``attempt + 1`` (``attempt`` >= 1 failed ones), no jitter."""
        return min(self.retry_delay * self.backoff_factor ** (attempt - 1), self.max_interval)

    def delay(self, attempt: int) -> float:
        """The delay before attempt ``attempt + 1``, with jitter when enabled."""
        base = self.base_delay(attempt)
        return base + self._random.uniform(0, base) if self.jitter else base

    def to_data(self) -> dict[str, Any]:
        """The timing as plain data (what a Celery task needs to schedule its retries)."""
        return {
            "max_attempts": self.max_attempts,
            "retry_delay": self.retry_delay,
            "backoff_factor": self.backoff_factor,
            "max_interval": self.max_interval,
            "jitter": self.jitter,
        }

    def as_hook(self) -> _RetryHook:
        """A wrap-call node hook that applies this policy."""
        return _RetryHook(self)


def delay_after(policy: RetryPolicy, error: BaseException, attempt: int) -> float | None:
    """How long to wait before attempt ``attempt + 1`` after ``error`` failed attempt
    ``attempt``; ``None`` when ``policy`` does not retry it (the error is not one it retries,
    or that was its last attempt).  The Celery executor's rule for a node's task and for a
    compiled subgraph node's child run."""
    if attempt >= policy.max_attempts or not policy.should_retry(error):
        return None
    return policy.delay(attempt)


class _RetryHook:
    """The wrap hook of a :class:`RetryPolicy`; plain, with an async twin for async nodes.

    Called as a plain hook with an async action (or one that returns an awaitable, as a
    LangGraph4j action returns a future), it returns an awaitable that retries the awaited
    failures."""

    def __init__(self, policy: RetryPolicy) -> None:
        self.policy = policy
        setattr(self, ASYNC_VARIANT, self._async_call)

    def _retries(self, attempt: int, error: Exception) -> bool:
        return attempt < self.policy.max_attempts and self.policy.should_retry(error)

    def __call__(
        self, node_id: str, state: Any, config: Any, action: Callable[[Any, Any], Any]
    ) -> Any:
        if is_async_callable(action):
            return self._async_call(node_id, state, config, action)
        attempt = 1
        while True:
            try:
                result = action(state, config)
            except Exception as error:
                if not self._retries(attempt, error):
                    raise
                time.sleep(self.policy.delay(attempt))
                attempt += 1
                continue
            if inspect.isawaitable(result):
                return self._async_call(node_id, state, config, action, result, attempt)
            return result

    async def _async_call(
        self,
        node_id: str,
        state: Any,
        config: Any,
        action: Callable[[Any, Any], Any],
        pending: Any = None,
        attempt: int = 1,
    ) -> Any:
        while True:
            try:
                result = action(state, config) if pending is None else pending
                pending = None
                while inspect.isawaitable(result):
                    result = await result
                return result
            except Exception as error:
                if not self._retries(attempt, error):
                    raise
                await asyncio.sleep(self.policy.delay(attempt))
                attempt += 1
