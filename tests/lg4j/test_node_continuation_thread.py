"""Port of LangGraph4j's ``NodeContinuationThreadTest`` (``langgraph4j-core``), in process.

An async node that waits on work done by another pool does not move the rest of the run there:
its after-call hooks, its routes, its retries and the next node run on the run's own thread.
LangGraph4j's node returns a ``CompletableFuture`` completed on ``other-pool``; here the async
node awaits ``loop.run_in_executor(other_pool, ...)``.  Not ported:
``interruptingTheLoopThreadEndsARunWaitingOnANode``, about Java's ``Thread.interrupt`` (Python
threads cannot be interrupted; stopping a run is ``stream.cancel()``, ported from
``CancellationTest`` in ``tests/test_cancellation.py``).
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import pytest

from langgraph_celery import (
    END,
    START,
    AgentState,
    GraphInput,
    RetryPolicy,
    RunnableConfig,
    StateGraph,
)

OTHER_POOL = "other-pool"


@pytest.fixture
def other_pool() -> Iterator[ThreadPoolExecutor]:
    with ThreadPoolExecutor(1, thread_name_prefix=OTHER_POOL) as pool:
        yield pool


class Seen:
    """``NodeContinuationThreadTest.seen``: the thread each step ran on."""

    def __init__(self) -> None:
        self.threads: dict[str, str] = {}

    def record(self, step: str) -> dict[str, Any]:
        self.threads.setdefault(step, threading.current_thread().name)
        return {}

    def thread_of(self, step: str) -> str:
        assert step in self.threads, f"{step} did not run: {self.threads}"
        return self.threads[step]


def test_hooks_and_edges_after_an_async_node_run_on_the_loop_thread(
    other_pool: ThreadPoolExecutor,
) -> None:
    """``NodeContinuationThreadTest.hooksAndEdgesAfterAnAsyncNodeRunOnTheLoopThread``."""
    seen = Seen()

    async def on_other_pool(state: AgentState) -> dict[str, Any]:
        loop = asyncio.get_running_loop()
        return await loop.run_in_executor(other_pool, lambda: {})

    def route(state: AgentState) -> str:
        seen.record("edge")
        return "n2"

    graph = (
        StateGraph()
        .add_node("n1", on_other_pool)
        .add_node("n2", lambda state: seen.record("n2"))
        .add_after_call_node_hook("n1", lambda node, state, config, result: seen.record("after"))
        .add_edge(START, "n1")
        .add_conditional_edges("n1", route, {"n2": "n2"})
        .add_edge("n2", END)
        .compile()
    )
    graph.invoke(GraphInput.no_args(), RunnableConfig())

    loop_thread = seen.thread_of("n2")
    assert not loop_thread.startswith(OTHER_POOL)
    assert seen.thread_of("after") == loop_thread
    assert seen.thread_of("edge") == loop_thread


def test_retries_of_an_async_node_are_invoked_on_the_loop_thread(
    other_pool: ThreadPoolExecutor,
) -> None:
    """``NodeContinuationThreadTest.retriesOfAnAsyncNodeAreInvokedOnTheLoopThread``."""
    seen = Seen()
    attempts: list[int] = []

    def transient() -> dict[str, Any]:
        raise OSError("transient")

    async def fails_once_on_other_pool(state: AgentState) -> dict[str, Any]:
        attempts.append(1)
        seen.record(f"attempt{len(attempts)}")
        loop = asyncio.get_running_loop()
        if len(attempts) == 1:
            return await loop.run_in_executor(other_pool, transient)
        return await loop.run_in_executor(other_pool, lambda: {})

    graph = (
        StateGraph()
        .add_node("n1", fails_once_on_other_pool)
        .add_node("n2", lambda state: seen.record("n2"))
        .add_wrap_call_node_hook(
            "n1", RetryPolicy(retry_on=OSError, retry_delay=0.01, jitter=False).as_hook()
        )
        .add_edge(START, "n1")
        .add_edge("n1", "n2")
        .add_edge("n2", END)
        .compile()
    )
    graph.invoke(GraphInput.no_args(), RunnableConfig())

    assert len(attempts) == 2
    loop_thread = seen.thread_of("n2")
    assert seen.thread_of("attempt1") == loop_thread
    assert seen.thread_of("attempt2") == loop_thread
