"""Port of LangGraph4j's ``LG4JCancellationTest`` (``langgraph4j-core``; ``@Disabled`` there for
its timing), in process.

Its three methods are those of ``CancellationTest`` (ported in ``test_cancellation_lg4j.py``
and ``test_port_CancellationTest.py`` with blocking nodes).  Here its nodes wait with
``asyncio.sleep``: ``cancel(True)`` cancels the async nodes of the running step, as Java's
``cancel(true)`` interrupts ``Thread.sleep`` (a Python thread cannot be interrupted), so the
node running at the cancel never completes, as in LangGraph4j.  Cancels come at a known point
(a node's start, or the completion of others) instead of after a fixed delay.  Java's
``forEachAsync`` ends exceptionally with the ``InterruptedException``; SPEC §9 ends the
iteration, the stream ``is_cancelled()`` and its result ``is_cancelled()``.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Callable
from typing import Any

import pytest
from lg4j_support import MESSAGES_SCHEMA, nodes

from langgraph_celery import END, START, CompiledGraph, GraphInput, RunnableConfig, StateGraph

Events = dict[str, threading.Event]


def waiting_node(name: str, delay: float, started: Events) -> Any:
    """``_makeWaitingNode(id, delay)``: waits, then counts itself in the ``node_completed``
    metadata and appends its id to ``messages`` (its start is recorded in ``started``)."""

    async def node(state: Any, config: RunnableConfig) -> dict[str, Any]:
        started.setdefault(name, threading.Event()).set()
        await asyncio.sleep(delay)
        config.metadata["node_completed"].append(name)
        return {"messages": name}

    return node


def chain(names: list[str], started: Events, delay: float, sub: Any = None) -> StateGraph:
    graph = StateGraph(MESSAGES_SCHEMA)
    previous = START
    for name in names:
        action = (
            sub if (sub is not None and name == "NODE3") else waiting_node(name, delay, started)
        )
        graph.add_node(name, action).add_edge(previous, name)
        previous = name
    return graph.add_edge(previous, END)


def run_cancelled(
    graph: CompiledGraph,
    config: RunnableConfig,
    cancel_when: Callable[[], bool],
    iterate_async: bool,
) -> tuple[list[str], Any]:
    """Stream ``graph``; ``requestCancelGenerator(generator, true, ...)`` once ``cancel_when``."""

    def cancel(stream: Any) -> None:
        while not cancel_when():
            threading.Event().wait(0.005)
        stream.cancel(True)

    if iterate_async:  # "CANCEL TEST USING FOR EACH ASYNC"

        async def main() -> tuple[list[str], Any]:
            stream = graph.astream(GraphInput.no_args(), config)
            canceller = asyncio.ensure_future(asyncio.to_thread(cancel, stream))
            seen = nodes([output async for output in stream])
            await asyncio.wait_for(canceller, 10)
            return seen, stream

        return asyncio.run(main())
    stream = graph.stream(GraphInput.no_args(), config)  # "CANCEL TEST USING ITERATOR"
    canceller = threading.Thread(target=cancel, args=(stream,))
    canceller.start()
    seen = nodes(stream)
    canceller.join(10)
    return seen, stream


@pytest.mark.parametrize("iterate_async", [False, True], ids=["iterator", "for_each_async"])
def test_graph_cancel(iterate_async: bool) -> None:
    """``LG4JCancellationTest.graphCancelTest``: three one-second agents, cancelled with
    interrupt while agent_1 waits."""
    started: Events = {"agent_1": threading.Event()}
    completed: list[str] = []
    graph = chain(["agent_1", "agent_2", "agent_3"], started, 10.0).compile()
    config = RunnableConfig(metadata={"node_completed": completed})

    seen, stream = run_cancelled(graph, config, started["agent_1"].is_set, iterate_async)

    assert seen and seen[-1] != END  # currentOutput is not null, not END
    assert stream.is_cancelled()
    assert stream.result.is_cancelled()
    assert completed == []  # (agent_1 was interrupted)


def compiled_sub_graph_parent(started: Events) -> CompiledGraph:
    """``compiledSubGraphCancelTest``'s graphs: NODE1 -> NODE2 -> NODE3 (the compiled
    NODE3.1 -> ... -> NODE3.4) -> NODE4 -> NODE5."""
    child = chain(["NODE3.1", "NODE3.2", "NODE3.3", "NODE3.4"], started, 0.05).compile()
    return chain(["NODE1", "NODE2", "NODE3", "NODE4", "NODE5"], started, 0.05, child).compile()


def test_compiled_sub_graph_not_cancelled() -> None:
    """``LG4JCancellationTest.compiledSubGraphCancelTest``, "NO CANCEL TEST"."""
    completed: list[str] = []
    stream = compiled_sub_graph_parent({}).stream(
        GraphInput.no_args(), RunnableConfig(metadata={"node_completed": completed})
    )
    outputs = list(stream)
    assert not stream.is_cancelled()
    assert outputs and outputs[-1].is_end()
    assert len(completed) == 8


@pytest.mark.parametrize("iterate_async", [False, True], ids=["iterator", "for_each_async"])
def test_compiled_sub_graph_cancel(iterate_async: bool) -> None:
    """``LG4JCancellationTest.compiledSubGraphCancelTest``, both cancel cases: the cancel
    (three nodes in, in LangGraph4j) comes while the subgraph's NODE3.2 runs."""
    started: Events = {"NODE3.2": threading.Event()}
    completed: list[str] = []
    parent = compiled_sub_graph_parent(started)
    config = RunnableConfig(metadata={"node_completed": completed})

    seen, stream = run_cancelled(parent, config, started["NODE3.2"].is_set, iterate_async)

    assert seen and seen[-1] != END
    assert stream.is_cancelled()
    assert stream.result.is_cancelled()
    assert completed == ["NODE1", "NODE2", "NODE3.1"]
    assert "NODE3.3" not in started


@pytest.mark.parametrize("iterate_async", [False, True], ids=["iterator", "for_each_async"])
def test_graph_with_parallel_nodes_cancel(iterate_async: bool) -> None:
    """``LG4JCancellationTest.graphWithParallelNodesCancelTest``: node_start fans out to three
    agents; the cancel comes once two have completed while the third still runs: it is
    interrupted, so ``taskExecuted == 2``, and node_end never runs."""
    started: Events = {}
    completed: list[str] = []
    graph = (
        StateGraph(MESSAGES_SCHEMA)
        .add_node("node_start", lambda state, config: {})
        .add_node("node_end", lambda state, config: {})
        .add_node("agent_1", waiting_node("agent_1", 0.05, started))
        .add_node("agent_2", waiting_node("agent_2", 0.1, started))
        .add_node("agent_3", waiting_node("agent_3", 10.0, started))
        .add_edge("node_start", "agent_1")
        .add_edge("node_start", "agent_2")
        .add_edge("node_start", "agent_3")
        .add_edge("agent_1", "node_end")
        .add_edge("agent_2", "node_end")
        .add_edge("agent_3", "node_end")
        .add_edge(START, "node_start")
        .add_edge("node_end", END)
        .compile()
    )
    config = RunnableConfig(metadata={"node_completed": completed})

    seen, stream = run_cancelled(graph, config, lambda: len(completed) == 2, iterate_async)

    assert stream.is_cancelled()
    assert stream.result.is_cancelled()
    assert len(completed) == 2  # taskExecuted
    assert sorted(completed) == ["agent_1", "agent_2"]
    assert "node_end" not in seen and END not in seen
