"""Audit port of LangGraph4j's ``CancellationTest`` (newest version): the
``GraphResult.from(...).isCancelled()`` assertions that the existing ports make in one case only.

The newest ``CancellationTest`` ends every cancelled case of its three methods
(``graphCancelTest``, ``compiledSubGraphCancelTest``, ``graphWithParallelNodesCancelTest``),
with ``forEachAsync`` (here ``astream``) and with the iterator (here ``stream``), by checking
that the generator and its ``GraphResult`` say cancelled;
``tests/lg4j/test_port_CancellationTest.py`` checks the result's ``is_cancelled()`` for
``graphCancelTest``'s iterator only.  SPEC §9: the
cancelled stream's result is also ``is_empty()``; both are asserted.  Java's checks of the
exception chain (``InterruptedException`` as root cause) belong to ``CompletableFuture``: here the
iteration just ends (SPEC §9).  Python cannot interrupt a thread, so a blocking node running when
``cancel(True)`` comes finishes, and nothing after it starts.  Delays are shorter than Java's.
"""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import pytest

from langgraph_celery import (
    END,
    START,
    AgentState,
    Channels,
    CompiledGraph,
    GraphInput,
    RunnableConfig,
    StateGraph,
)

SCHEMA = {"messages": Channels.appender()}  # MessagesState.SCHEMA


class Runs:
    """What the waiting nodes of one run record: started events and completed node ids."""

    def __init__(self) -> None:
        self.started: dict[str, threading.Event] = {}
        self.completed: list[str] = []
        self.lock = threading.Lock()

    def event(self, name: str) -> threading.Event:
        with self.lock:
            return self.started.setdefault(name, threading.Event())


def waiting_node(name: str, delay: float, runs: Runs) -> Callable[..., dict[str, Any]]:
    """``_makeWaitingNode(id, delay)``: sleeps (blocking), then counts itself as completed
    (Java's ``node_completed`` metadata counter) and appends its id to ``messages``."""

    def node(state: AgentState, config: RunnableConfig) -> dict[str, Any]:
        runs.event(name).set()
        time.sleep(delay)
        with runs.lock:
            runs.completed.append(name)
        return {"messages": name}

    return node


def chain(names: list[str], runs: Runs, delay: float, sub: CompiledGraph | None = None) -> Any:
    graph = StateGraph(SCHEMA)
    previous = START
    for name in names:
        action = sub if name == "NODE3" else waiting_node(name, delay, runs)
        graph.add_node(name, action).add_edge(previous, name)
        previous = name
    return graph.add_edge(previous, END).compile()


def drain(
    app: CompiledGraph, config: RunnableConfig, iterate_async: bool, cancel: Callable[[Any], None]
) -> tuple[list[str], Any]:
    """Streams ``app`` (``astream`` for Java's ``forEachAsync``, else the iterator) while
    ``cancel(stream)`` runs on another thread; (the nodes streamed, the stream)."""
    if iterate_async:

        async def main() -> tuple[list[str], Any]:
            stream = app.astream(GraphInput.no_args(), config)
            canceller = asyncio.ensure_future(asyncio.to_thread(cancel, stream))
            seen = [output.node async for output in stream]
            await asyncio.wait_for(canceller, 10)
            return seen, stream

        return asyncio.run(main())
    stream = app.stream(GraphInput.no_args(), config)
    canceller = threading.Thread(target=cancel, args=(stream,))
    canceller.start()
    seen = [output.node for output in stream]
    canceller.join(10)
    assert not canceller.is_alive()
    return seen, stream


def cancel_when_started(runs: Runs, name: str, interrupt: bool = True) -> Callable[[Any], None]:
    def cancel(stream: Any) -> None:
        assert runs.event(name).wait(10)
        time.sleep(0.02)
        assert stream.cancel(interrupt) is True

    return cancel


def wait_until_completed(runs: Runs, name: str) -> None:
    deadline = time.monotonic() + 5
    while name not in runs.completed and time.monotonic() < deadline:
        time.sleep(0.01)
    time.sleep(0.15)  # and nothing after it starts


ITERATIONS = pytest.mark.parametrize(
    "iterate_async", [False, True], ids=["iterator", "for_each_async"]
)


@ITERATIONS
def test_graph_cancel_result_says_cancelled(iterate_async: bool) -> None:
    """``graphCancelTest``: three one-second agents (0.2 s here) cancelled with interrupt
    50 ms in (once agent_1 runs, here)."""
    runs = Runs()
    app = chain(["agent_1", "agent_2", "agent_3"], runs, 0.2)
    seen, stream = drain(app, RunnableConfig(), iterate_async, cancel_when_started(runs, "agent_1"))
    assert seen and seen[-1] != END  # currentOutput not null, not END
    assert seen == [START]
    assert stream.is_cancelled()
    assert stream.result.is_cancelled()
    assert stream.result.is_empty()
    wait_until_completed(runs, "agent_1")
    assert runs.completed == ["agent_1"]
    assert "agent_2" not in runs.started


def compiled_sub_graph_parent(runs: Runs, delay: float) -> CompiledGraph:
    """``compiledSubGraphCancelTest``'s graphs: NODE1 -> NODE2 -> NODE3 (compiled: NODE3.1 ->
    NODE3.2 -> NODE3.3 -> NODE3.4) -> NODE4 -> NODE5, every node a waiting node."""
    child = chain(["NODE3.1", "NODE3.2", "NODE3.3", "NODE3.4"], runs, delay)
    return chain(["NODE1", "NODE2", "NODE3", "NODE4", "NODE5"], runs, delay, child)


def test_compiled_sub_graph_not_cancelled_result_does_not_say_cancelled() -> None:
    """``compiledSubGraphCancelTest``, "NO CANCEL TEST": the last output is END, the generator
    is not cancelled; (beyond the Java test) nor is its result, which holds the final state."""
    runs = Runs()
    stream = compiled_sub_graph_parent(runs, 0.01).stream(GraphInput.no_args(), RunnableConfig())
    outputs = list(stream)
    assert outputs[-1].is_end()
    assert not stream.is_cancelled()
    assert not stream.result.is_cancelled()
    assert stream.result.is_state_data()
    every = ["NODE1", "NODE2", "NODE3.1", "NODE3.2", "NODE3.3", "NODE3.4", "NODE4", "NODE5"]
    assert stream.result.as_state_data()["messages"] == every
    assert runs.completed == every


@ITERATIONS
def test_compiled_sub_graph_cancel_result_says_cancelled(iterate_async: bool) -> None:
    """``compiledSubGraphCancelTest``, "CANCEL TEST USING FOR EACH ASYNC" and "TEST USING
    ITERATOR": cancelled with interrupt while the subgraph's NODE3.2 runs (Java: three
    seconds in, during the subgraph)."""
    runs = Runs()
    app = compiled_sub_graph_parent(runs, 0.2)
    seen, stream = drain(app, RunnableConfig(), iterate_async, cancel_when_started(runs, "NODE3.2"))
    assert seen and seen[-1] != END
    assert seen == [START, "NODE1", "NODE2", "NODE3.1"]
    assert stream.is_cancelled()
    assert stream.result.is_cancelled()
    assert stream.result.is_empty()
    wait_until_completed(runs, "NODE3.2")
    assert runs.completed == ["NODE1", "NODE2", "NODE3.1", "NODE3.2"]
    assert "NODE3.3" not in runs.started and "NODE4" not in runs.started


def parallel_agents(runs: Runs) -> CompiledGraph:
    """``graphWithParallelNodesCancelTest``'s graph: node_start fans out to agent_1 (short),
    agent_2 (long), agent_3 (short), which join in node_end."""
    graph = (
        StateGraph(SCHEMA)
        .add_node("node_start", lambda state, config: {})
        .add_node("node_end", lambda state, config: {})
        .add_node("agent_1", waiting_node("agent_1", 0.05, runs))
        .add_node("agent_2", waiting_node("agent_2", 0.3, runs))
        .add_node("agent_3", waiting_node("agent_3", 0.05, runs))
        .add_edge("node_start", "agent_1")
        .add_edge("node_start", "agent_2")
        .add_edge("node_start", "agent_3")
        .add_edge("agent_1", "node_end")
        .add_edge("agent_2", "node_end")
        .add_edge("agent_3", "node_end")
        .add_edge(START, "node_start")
        .add_edge("node_end", END)
    )
    return graph.compile()


@ITERATIONS
def test_graph_with_parallel_nodes_cancel_result_says_cancelled(iterate_async: bool) -> None:
    """``graphWithParallelNodesCancelTest``: the branches run one after the other on a
    single-thread executor given for ``node_start`` (``addParallelNodeExecutor``); cancelled
    with interrupt while the second runs, two of the three complete (``taskExecuted == 2``)."""
    runs = Runs()
    executor = ThreadPoolExecutor(1, thread_name_prefix="parallel-node-executor")
    config = RunnableConfig(parallel_executors={"node_start": executor})
    try:
        seen, stream = drain(
            parallel_agents(runs), config, iterate_async, cancel_when_started(runs, "agent_2")
        )
    finally:
        executor.shutdown(wait=True)
    assert stream.is_cancelled()
    assert stream.result.is_cancelled()
    assert stream.result.is_empty()
    assert seen == [START, "node_start"]
    assert runs.completed == ["agent_1", "agent_2"]
    assert "agent_3" not in runs.started
