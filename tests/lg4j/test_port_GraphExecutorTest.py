"""Port of LangGraph4j's ``GraphExecutorTest`` (``langgraph4j-core``), in process.

LangGraph4j's ``RunnableConfig.builder().executor(executor)`` runs a whole run on one executor
(an ``Executor`` that carries a ``ThreadLocal`` "caller context" to its threads).  SPEC's
``RunnableConfig`` has no run-wide executor: its counterpart is ``parallel_executors``, the
executor of each plain node (here every node of the graph is given the test's pool), and the
caller's context is a ``contextvars.ContextVar``, which the runtime copies into the threads that
run plain nodes.  What runs outside a node action (after-call hooks, routes, async nodes) runs on
the run's own thread, with the caller's context: those tests check that they keep the context
and never continue on the pool an async node awaited (``other-pool``), where LangGraph4j also
says they run on the run-wide executor.
"""

from __future__ import annotations

import asyncio
import contextvars
import threading
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import pytest

from langgraph_celery import (
    END,
    START,
    AgentState,
    CompileConfig,
    GraphInput,
    RetryPolicy,
    RunnableConfig,
    StateGraph,
    StreamMode,
)
from langgraph_celery.checkpoint import MemorySaver

THREAD_PREFIX = "lg4j-test-executor-"
CALLER_CONTEXT = "caller-context"
CONTEXT: contextvars.ContextVar[str | None] = contextvars.ContextVar("lg4j_context", default=None)


class Recorder:
    """``GraphExecutorTest.seen``/``record``: ``step@thread|context`` for each step."""

    def __init__(self) -> None:
        self.seen: list[str] = []

    def record(self, step: str) -> dict[str, Any]:
        self.seen.append(f"{step}@{threading.current_thread().name}|{CONTEXT.get()}")
        return {}

    def node(self, step: str) -> Any:
        """``recordingNode(step)``"""
        return lambda state: self.record(step)

    def steps(self) -> list[str]:
        return [entry[: entry.index("@")] for entry in self.seen]

    def assert_all_ran_on_executor_with_caller_context(self, expected: list[str]) -> None:
        """``assertAllRanOnExecutorWithCallerContext``"""
        assert self.seen, "no node ran"
        assert self.steps() == expected
        for entry in self.seen:
            assert f"@{THREAD_PREFIX}" in entry, entry
            assert entry.endswith(f"|{CALLER_CONTEXT}"), entry

    def assert_kept_caller_context_off_other_pool(self, steps: list[str]) -> None:
        for entry in self.seen:
            if entry[: entry.index("@")] in steps:
                assert "@other-pool" not in entry, entry
                assert entry.endswith(f"|{CALLER_CONTEXT}"), entry


@pytest.fixture
def pool() -> Iterator[ThreadPoolExecutor]:
    with ThreadPoolExecutor(4, thread_name_prefix=THREAD_PREFIX) as executor:
        yield executor


@pytest.fixture
def other_pool() -> Iterator[ThreadPoolExecutor]:
    with ThreadPoolExecutor(1, thread_name_prefix="other-pool") as executor:
        yield executor


@pytest.fixture
def recorder() -> Recorder:
    return Recorder()


@pytest.fixture(autouse=True)
def caller_context() -> Iterator[None]:
    """``CONTEXT.set(CALLER_CONTEXT)`` (and ``CONTEXT.remove()`` after each test)."""
    token = CONTEXT.set(CALLER_CONTEXT)
    yield
    CONTEXT.reset(token)


def recording_graph(recorder: Recorder) -> StateGraph:
    """``recordingGraph()``: START -> n1 -> END."""
    return (
        StateGraph().add_node("n1", recorder.node("n1")).add_edge(START, "n1").add_edge("n1", END)
    )


def config_with_executor(executor: Any, *nodes: str, **fields: Any) -> RunnableConfig:
    """``configWithExecutor()``: every node of the graph on ``executor``."""
    return RunnableConfig(parallel_executors=dict.fromkeys(nodes, executor), **fields)


def test_stream_runs_the_graph_on_the_supplied_executor(
    pool: ThreadPoolExecutor, recorder: Recorder
) -> None:
    """``GraphExecutorTest.streamRunsTheGraphOnTheSuppliedExecutor``."""
    graph = recording_graph(recorder).compile()
    outputs = list(graph.stream(GraphInput.no_args(), config_with_executor(pool, "n1")))
    assert [output.node for output in outputs] == [START, "n1", END]
    recorder.assert_all_ran_on_executor_with_caller_context(["n1"])


def test_stream_snapshots_runs_the_graph_on_the_supplied_executor(
    pool: ThreadPoolExecutor, recorder: Recorder
) -> None:
    """``GraphExecutorTest.streamSnapshotsRunsTheGraphOnTheSuppliedExecutor``
    (``streamSnapshots`` is ``stream`` with ``StreamMode.SNAPSHOTS``, which needs a saver)."""
    graph = recording_graph(recorder).compile(CompileConfig(checkpoint_saver=MemorySaver()))
    config = config_with_executor(
        pool, "n1", thread_id="snapshots", stream_mode=StreamMode.SNAPSHOTS
    )
    list(graph.stream(GraphInput.no_args(), config))
    recorder.assert_all_ran_on_executor_with_caller_context(["n1"])


def test_hooks_and_edges_after_an_async_node_run_on_the_executor(
    pool: ThreadPoolExecutor, other_pool: ThreadPoolExecutor, recorder: Recorder
) -> None:
    """``GraphExecutorTest.hooksAndEdgesAfterAnAsyncNodeRunOnTheExecutor``: n1 completes on
    ``other-pool`` 100 ms in; its after-call hook and its route keep the caller's context and
    do not run on ``other-pool``; n2 runs on the executor."""

    async def on_other_pool(state: AgentState) -> dict[str, Any]:
        def slow() -> dict[str, Any]:
            time.sleep(0.1)
            return {}

        return await asyncio.get_running_loop().run_in_executor(other_pool, slow)

    def route(state: AgentState) -> str:
        recorder.record("edge")
        return "n2"

    graph = (
        StateGraph()
        .add_node("n1", on_other_pool)
        .add_node("n2", recorder.node("n2"))
        .add_after_call_node_hook(
            "n1", lambda node, state, config, result: recorder.record("after")
        )
        .add_edge(START, "n1")
        .add_conditional_edges("n1", route, {"n2": "n2"})
        .add_edge("n2", END)
        .compile()
    )
    graph.invoke(GraphInput.no_args(), config_with_executor(pool, "n1", "n2"))

    assert recorder.steps() == ["after", "edge", "n2"]
    recorder.assert_kept_caller_context_off_other_pool(["after", "edge", "n2"])
    assert f"n2@{THREAD_PREFIX}" in recorder.seen[2]


def _retried_once(n1: Any) -> Any:
    """START -> n1 -> END, n1 retried on ``OSError`` (LangGraph4j's retry hook)."""
    return (
        StateGraph()
        .add_node("n1", n1)
        .add_wrap_call_node_hook(
            "n1", RetryPolicy(retry_on=OSError, retry_delay=0.01, jitter=False).as_hook()
        )
        .add_edge(START, "n1")
        .add_edge("n1", END)
        .compile()
    )


def test_retried_attempts_run_on_the_executor(pool: ThreadPoolExecutor, recorder: Recorder) -> None:
    """``GraphExecutorTest.retriedAttemptsRunOnTheExecutor``."""
    attempts: list[int] = []

    def n1(state: AgentState) -> dict[str, Any]:
        attempts.append(1)
        recorder.record(f"attempt{len(attempts)}")
        if len(attempts) == 1:
            raise OSError("transient")  # (Java's IOException)
        return {}

    _retried_once(n1).invoke(GraphInput.no_args(), config_with_executor(pool, "n1"))

    recorder.assert_all_ran_on_executor_with_caller_context(["attempt1", "attempt2"])


def test_retries_of_an_async_node_failing_on_its_own_pool_keep_the_caller_context(
    pool: ThreadPoolExecutor, other_pool: ThreadPoolExecutor, recorder: Recorder
) -> None:
    """``GraphExecutorTest.retriesOfAnAsyncNodeFailingOnItsOwnPoolKeepTheCallerContext``: the
    first attempt fails on ``other-pool``; both attempts keep the caller's context and are not
    called on ``other-pool`` (an async node runs on the run's loop, not on an executor)."""
    attempts: list[int] = []

    def transient() -> dict[str, Any]:
        raise OSError("transient")

    async def fails_once_on_other_pool(state: AgentState) -> dict[str, Any]:
        attempts.append(1)
        recorder.record(f"attempt{len(attempts)}")
        if len(attempts) == 1:
            return await asyncio.get_running_loop().run_in_executor(other_pool, transient)
        return {}

    graph = _retried_once(fails_once_on_other_pool)
    graph.invoke(GraphInput.no_args(), config_with_executor(pool, "n1"))

    assert recorder.steps() == ["attempt1", "attempt2"]
    recorder.assert_kept_caller_context_off_other_pool(["attempt1", "attempt2"])


def test_retry_back_off_lets_a_single_thread_executor_run_other_work() -> None:
    """``GraphExecutorTest.retryBackOffLetsAForkJoinPoolExecutorRunOtherWork``: while n1 waits
    out a back-off (2 s in LangGraph4j, 1 s here), its one-thread executor runs other work."""
    first_attempt_failed = threading.Event()
    attempts: list[int] = []

    def n1(state: AgentState) -> dict[str, Any]:
        attempts.append(1)
        if len(attempts) == 1:
            first_attempt_failed.set()
            raise OSError("transient")
        return {}

    graph = (
        StateGraph()
        .add_node("n1", n1)
        .add_wrap_call_node_hook(
            "n1", RetryPolicy(retry_on=OSError, retry_delay=1.0, jitter=False).as_hook()
        )
        .add_edge(START, "n1")
        .add_edge("n1", END)
        .compile()
    )
    with ThreadPoolExecutor(1) as single, ThreadPoolExecutor(1) as runner:
        run = runner.submit(
            graph.invoke, GraphInput.no_args(), RunnableConfig(parallel_executors={"n1": single})
        )
        assert first_attempt_failed.wait(5)
        single.submit(lambda: None).result(timeout=0.5)  # (Java: get(1, SECONDS))
        run.result(timeout=5)
    assert len(attempts) == 2


def test_resumed_runs_use_the_supplied_executor(
    pool: ThreadPoolExecutor, recorder: Recorder
) -> None:
    """``GraphExecutorTest.resumedRunsUseTheSuppliedExecutor``."""
    graph = (
        StateGraph()
        .add_node("n1", recorder.node("n1"))
        .add_node("n2", recorder.node("n2"))
        .add_edge(START, "n1")
        .add_edge("n1", "n2")
        .add_edge("n2", END)
        .compile(CompileConfig(checkpoint_saver=MemorySaver(), interrupt_after=["n1"]))
    )
    config = config_with_executor(pool, "n1", "n2", thread_id="resume")

    list(graph.stream(GraphInput.no_args(), config))
    list(graph.stream(GraphInput.resume(), config))

    recorder.assert_all_ran_on_executor_with_caller_context(["n1", "n2"])


def test_compiled_subgraphs_inherit_the_executor(
    pool: ThreadPoolExecutor, recorder: Recorder
) -> None:
    """``GraphExecutorTest.compiledSubgraphsInheritTheExecutor``: the child run takes the
    caller's ``parallel_executors`` and context."""
    parent = (
        StateGraph()
        .add_node("sub", recording_graph(recorder).compile())
        .add_edge(START, "sub")
        .add_edge("sub", END)
        .compile()
    )
    parent.invoke(GraphInput.no_args(), config_with_executor(pool, "sub", "n1"))

    recorder.assert_all_ran_on_executor_with_caller_context(["n1"])
