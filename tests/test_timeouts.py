"""Per-node time limits in process: ``add_node(id, action, timeout=seconds)``."""

from __future__ import annotations

import asyncio
import threading
from typing import Any

import pytest

from langgraph_celery import (
    END,
    START,
    CompileConfig,
    GraphDefinitionError,
    NodeError,
    RetryPolicy,
    RunnableConfig,
    StateGraph,
)
from langgraph_celery.checkpoint import BaseCheckpointSaver


def one_node(action: Any, saver: BaseCheckpointSaver | None = None, **node: Any) -> Any:
    return (
        StateGraph()
        .add_node("slow", action, **node)
        .add_edge(START, "slow")
        .add_edge("slow", END)
        .compile(CompileConfig(checkpoint_saver=saver))
    )


def test_an_async_node_past_its_timeout_is_cancelled_and_fails(
    saver: BaseCheckpointSaver,
) -> None:
    cancelled = threading.Event()

    async def slow(state: Any) -> dict[str, Any]:
        try:
            await asyncio.sleep(60)
        except asyncio.CancelledError:
            cancelled.set()
            raise
        return {"done": True}

    graph = one_node(slow, saver, timeout=0.05)
    config = RunnableConfig(thread_id="t")
    with pytest.raises(NodeError) as caught:
        graph.invoke({}, config)
    assert (caught.value.node_id, caught.value.error_type) == ("slow", "TimeoutError")
    assert "did not finish within its timeout of 0.05 s" in str(caught.value)
    assert cancelled.is_set()
    assert graph.get_state(config).next == ("slow",)  # resumable


def test_a_plain_node_past_its_timeout_is_reported_timed_out() -> None:
    release = threading.Event()
    finished = threading.Event()

    def slow(state: Any) -> dict[str, Any]:
        release.wait(60)
        finished.set()
        return {"done": True}

    graph = one_node(slow, timeout=0.05)
    try:
        with pytest.raises(NodeError, match="did not finish within its timeout") as caught:
            graph.invoke({})
        assert caught.value.error_type == "TimeoutError"
        assert not finished.is_set()  # the call itself goes on in its thread
    finally:
        release.set()
    assert finished.wait(10)


def test_a_retry_policy_that_lists_timeout_error_times_each_attempt() -> None:
    attempts: list[int] = []
    release = threading.Event()

    def flaky(state: Any) -> dict[str, Any]:
        attempts.append(len(attempts) + 1)
        if len(attempts) == 1:
            release.wait(60)  # the first attempt hangs
        return {"attempts": len(attempts)}

    graph = (
        StateGraph()
        .add_node("slow", flaky, timeout=0.05)
        .add_wrap_call_node_hook(
            "slow", RetryPolicy(retry_on=TimeoutError, retry_delay=0.01, jitter=False).as_hook()
        )
        .add_edge(START, "slow")
        .add_edge("slow", END)
        .compile()
    )
    try:
        assert graph.invoke({}).data == {"attempts": 2}
    finally:
        release.set()
    assert attempts == [1, 2]


@pytest.mark.parametrize("timeout", [0, -1, "5", True])
def test_a_timeout_that_is_not_positive_seconds_is_refused(timeout: Any) -> None:
    graph = StateGraph().add_node("n", lambda s: None, timeout=timeout)
    with pytest.raises(GraphDefinitionError, match="node 'n': timeout must be positive seconds"):
        graph.add_edge(START, "n").add_edge("n", END).compile()
