"""Port of LangGraph4j's ``hook/RetryPolicyTest`` (``langgraph4j-core``).

``RetryPolicy.builder()...build().asHook()`` is ``RetryPolicy(retry_on=..., ...).as_hook()``, a
wrap hook, called here as LangGraph4j's test calls it.  LangGraph4j's actions return a
``CompletableFuture``, failed (``failedFuture``) for an async failure: here an async action,
and the hook's result is awaited; ``retriesSynchronousRetryableFailureUntilSuccess``'s
``throw`` is a plain action's raise.  ``delayNanos(k)`` is ``delay(k)``, in seconds.  Java's
``IOException`` is ``OSError``, ``IllegalStateException`` ``RuntimeError``.  Where LangGraph4j
keeps the default 0.5 s delay although the test is not about delays, the delay here is 10 ms.
Elapsed times are only checked as lower bounds: a delay is never shorter than asked.
"""

from __future__ import annotations

import asyncio
import inspect
import time
from typing import Any

import pytest

from langgraph_celery import (
    END,
    START,
    AgentState,
    NodeError,
    RetryPolicy,
    RunnableConfig,
    StateGraph,
)

FAST = 0.01


class Attempts:
    """An action that fails ``failures`` times with ``error``, then returns ``{"result":
    "done"}``; ``AsyncAttempts`` the same as an async action (LangGraph4j's ``failedFuture``)."""

    def __init__(self, failures: int, error: type[Exception]) -> None:
        self.count = 0
        self.failures = failures
        self.error = error

    def attempt(self) -> dict[str, Any]:
        self.count += 1
        if self.count <= self.failures:
            raise self.error("temporary failure")
        return {"result": "done"}

    def __call__(self, state: AgentState, config: RunnableConfig) -> dict[str, Any]:
        return self.attempt()


class AsyncAttempts(Attempts):
    async def __call__(self, state: AgentState, config: RunnableConfig) -> dict[str, Any]:  # type: ignore[override]
        return self.attempt()


def apply_wrap(policy: RetryPolicy, action: Any) -> Any:
    """``hook.applyWrap("call_api", new State(Map.of()), RunnableConfig.empty(), action)``,
    joined: awaited when it is awaitable."""
    result = policy.as_hook()("call_api", AgentState({}), RunnableConfig(), action)
    if inspect.isawaitable(result):
        return asyncio.run(_awaited(result))
    return result


async def _awaited(awaitable: Any) -> Any:
    return await awaitable


def test_retries_retryable_failure_until_success() -> None:
    """``RetryPolicyTest.retriesRetryableFailureUntilSuccess``; and, as a node's wrap hook in a
    graph, the same."""
    action = AsyncAttempts(2, OSError)
    result = apply_wrap(RetryPolicy(retry_on=OSError, retry_delay=FAST), action)
    assert action.count == 3
    assert result["result"] == "done"

    action = AsyncAttempts(2, OSError)
    graph = (
        StateGraph()
        .add_node("call_api", action)
        .add_edge(START, "call_api")
        .add_edge("call_api", END)
        .add_wrap_call_node_hook(
            "call_api", RetryPolicy(retry_on=OSError, retry_delay=FAST).as_hook()
        )
        .compile()
    )
    assert graph.invoke({}).value("result") == "done"
    assert action.count == 3


def test_retries_synchronous_retryable_failure_until_success() -> None:
    """``RetryPolicyTest.retriesSynchronousRetryableFailureUntilSuccess``."""
    action = Attempts(2, RuntimeError)
    output = apply_wrap(RetryPolicy(retry_on=RuntimeError, retry_delay=FAST), action)
    assert action.count == 3
    assert output["result"] == "done"


def test_delays_retry() -> None:
    """``RetryPolicyTest.delaysRetry``: the default first delay is 0.5 s."""
    action = AsyncAttempts(1, OSError)
    start = time.monotonic()
    result = apply_wrap(RetryPolicy(retry_on=OSError, max_attempts=2), action)
    elapsed = time.monotonic() - start
    assert action.count == 2
    assert result["result"] == "done"
    assert elapsed >= 0.45


def test_increases_delay_for_each_retry() -> None:
    """``RetryPolicyTest.increasesDelayForEachRetry``: 50 ms, then 100 ms."""
    action = AsyncAttempts(2, OSError)
    start = time.monotonic()
    result = apply_wrap(RetryPolicy(retry_on=OSError, retry_delay=0.05, backoff_factor=2.0), action)
    elapsed = time.monotonic() - start
    assert action.count == 3
    assert result["result"] == "done"
    assert elapsed >= 0.125


def test_caps_backoff_delay_at_max_interval() -> None:
    """``RetryPolicyTest.capsBackoffDelayAtMaxInterval``."""
    retry = RetryPolicy(
        retry_on=OSError, retry_delay=0.05, backoff_factor=2.0, max_interval=0.075, jitter=False
    )
    assert retry.delay(1) == pytest.approx(0.05)
    assert retry.delay(2) == pytest.approx(0.075)
    assert retry.delay(3) == pytest.approx(0.075)


def test_adds_jitter_after_capping_delay() -> None:
    """``RetryPolicyTest.addsJitterAfterCappingDelay``: jitter (on by default) adds up to the
    capped delay again."""
    retry = RetryPolicy(retry_on=OSError, retry_delay=0.05, max_interval=0.075)
    delays = [retry.delay(2) for _ in range(50)]
    assert all(0.075 <= delay <= 0.15 for delay in delays)
    assert max(delays) > 0.075  # (some jitter was added)


def test_does_not_retry_non_retryable_failure() -> None:
    """``RetryPolicyTest.doesNotRetryNonRetryableFailure``."""
    action = AsyncAttempts(10, OSError)
    with pytest.raises(OSError):
        apply_wrap(RetryPolicy(retry_on=RuntimeError), action)
    assert action.count == 1


def test_stops_after_max_attempts() -> None:
    """``RetryPolicyTest.stopsAfterMaxAttempts``: three attempts by default, then the last
    error; in a graph, the run fails with a ``NodeError`` naming the node."""
    policy = RetryPolicy(retry_on=OSError, retry_delay=FAST)
    action = AsyncAttempts(10, OSError)
    with pytest.raises(OSError):
        apply_wrap(policy, action)
    assert action.count == 3

    action = AsyncAttempts(10, OSError)
    graph = (
        StateGraph()
        .add_node("call_api", action)
        .add_edge(START, "call_api")
        .add_edge("call_api", END)
        .add_wrap_call_node_hook("call_api", policy.as_hook())
        .compile()
    )
    with pytest.raises(NodeError) as caught:
        graph.invoke({})
    assert caught.value.node_id == "call_api"
    assert isinstance(caught.value.__cause__, OSError)
    assert action.count == 3
