"""Port of LangGraph4j's ``hook/RetryPolicyTest`` (``langgraph4j-core``).

``RetryPolicy.builder()...build().asHook()`` is ``RetryPolicy(retry_on=..., ...).as_hook()``, a
wrap hook.  LangGraph4j's ``failedFuture`` (an async failure) is an async node's raise, which
the hook retries when it wraps that node in a graph; a synchronous ``throw`` is a plain
action's raise, retried by calling the hook as LangGraph4j's test does.  ``delayNanos(k)`` is
``delay(k)``, in seconds.  Java's ``IOException`` is ``OSError``, ``IllegalStateException``
``RuntimeError``.  Where LangGraph4j keeps the default 0.5 s delay although the test is not
about delays, the delay here is 10 ms.  Elapsed times are only checked as lower bounds: a
delay is never shorter than asked.
"""

from __future__ import annotations

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
    def __init__(self, failures: int, error: type[Exception]) -> None:
        self.count = 0
        self.failures = failures
        self.error = error

    def __call__(self, state: AgentState, config: RunnableConfig) -> dict[str, Any]:
        self.count += 1
        if self.count <= self.failures:
            raise self.error("temporary failure")
        return {"result": "done"}


def test_retries_retryable_failure_until_success() -> None:
    """``RetryPolicyTest.retriesRetryableFailureUntilSuccess``: an async action (Java's
    ``failedFuture``) retried by the hook around its node."""
    attempts = 0

    async def call_api(state: AgentState, config: RunnableConfig) -> dict[str, Any]:
        nonlocal attempts
        attempts += 1
        if attempts < 3:
            raise OSError("temporary failure")
        return {"result": "done"}

    hook = RetryPolicy(retry_on=OSError, retry_delay=FAST).as_hook()
    graph = (
        StateGraph()
        .add_node("call_api", call_api)
        .add_edge(START, "call_api")
        .add_edge("call_api", END)
        .add_wrap_call_node_hook("call_api", hook)
        .compile()
    )
    result = graph.invoke({})
    assert attempts == 3
    assert result.value("result") == "done"


def test_retries_synchronous_retryable_failure_until_success() -> None:
    """``RetryPolicyTest.retriesSynchronousRetryableFailureUntilSuccess``."""
    action = Attempts(2, RuntimeError)
    hook = RetryPolicy(retry_on=RuntimeError, retry_delay=FAST).as_hook()
    output = hook("call_api", AgentState({}), RunnableConfig(), action)
    assert action.count == 3
    assert output["result"] == "done"


def test_delays_retry() -> None:
    """``RetryPolicyTest.delaysRetry``: the default first delay is 0.5 s."""
    action = Attempts(1, OSError)
    hook = RetryPolicy(retry_on=OSError, max_attempts=2).as_hook()
    start = time.monotonic()
    result = hook("call_api", AgentState({}), RunnableConfig(), action)
    elapsed = time.monotonic() - start
    assert action.count == 2
    assert result["result"] == "done"
    assert elapsed >= 0.45


def test_increases_delay_for_each_retry() -> None:
    """``RetryPolicyTest.increasesDelayForEachRetry``: 50 ms, then 100 ms."""
    action = Attempts(2, OSError)
    hook = RetryPolicy(retry_on=OSError, retry_delay=0.05, backoff_factor=2.0).as_hook()
    start = time.monotonic()
    result = hook("call_api", AgentState({}), RunnableConfig(), action)
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
    action = Attempts(10, OSError)
    hook = RetryPolicy(retry_on=RuntimeError).as_hook()
    with pytest.raises(OSError):
        hook("call_api", AgentState({}), RunnableConfig(), action)
    assert action.count == 1


def test_stops_after_max_attempts() -> None:
    """``RetryPolicyTest.stopsAfterMaxAttempts``: three attempts by default, then the last
    error; in a graph, the run fails with a ``NodeError`` naming the node."""
    action = Attempts(10, OSError)
    hook = RetryPolicy(retry_on=OSError, retry_delay=FAST).as_hook()
    with pytest.raises(OSError):
        hook("call_api", AgentState({}), RunnableConfig(), action)
    assert action.count == 3

    action = Attempts(10, OSError)
    graph = (
        StateGraph()
        .add_node("call_api", action)
        .add_edge(START, "call_api")
        .add_edge("call_api", END)
        .add_wrap_call_node_hook("call_api", hook)
        .compile()
    )
    with pytest.raises(NodeError) as caught:
        graph.invoke({})
    assert caught.value.node_id == "call_api"
    assert isinstance(caught.value.__cause__, OSError)
    assert action.count == 3
