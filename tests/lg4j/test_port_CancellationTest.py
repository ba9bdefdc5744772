"""Port of LangGraph4j's ``CancellationTest`` (``langgraph4j-core``): what
``tests/test_cancellation.py`` and ``tests/lg4j/test_cancellation_lg4j.py`` leave out.

- ``compiledSubGraphCancelTest`` with LangGraph4j's blocking waiting nodes (``Thread.sleep``):
  those files run it with async nodes only.  Python cannot interrupt a thread, so the child
  node running when ``cancel(True)`` comes finishes; nothing after it starts.
- The newest ``CancellationTest`` (its three methods) ends each case with
  ``GraphResult.from(generator).isCancelled()``: LangGraph4j's ``GraphResult`` has a
  ``CANCELLED`` kind.  SPEC §9 has the cancelled stream's result be ``is_empty()``, and
  ``GraphResult`` has no ``is_cancelled()``: that part is an expected failure.
"""

from __future__ import annotations

import asyncio
import threading
import time
from typing import Any

import pytest
from lg4j_support import MESSAGES_SCHEMA, nodes

from langgraph_celery import END, START, CompiledGraph, GraphInput, RunnableConfig, StateGraph


def waiting_node(name: str, delay: float, started: dict[str, threading.Event]) -> Any:
    """``_makeWaitingNode(id, delay)``: sleeps (blocking), then counts itself in the
    ``node_completed`` metadata and appends its id to ``messages``; its start is recorded in
    ``started`` (beyond the port, to cancel at a known point)."""

    def node(state: Any, config: RunnableConfig) -> dict[str, Any]:
        started.setdefault(name, threading.Event()).set()
        time.sleep(delay)
        config.metadata["node_completed"].append(name)
        return {"messages": name}

    return node


def chain(names: list[str], started: dict[str, threading.Event], sub: Any = None) -> StateGraph:
    graph = StateGraph(MESSAGES_SCHEMA)
    previous = START
    for name in names:
        action = sub if name == "NODE3" else waiting_node(name, 0.1, started)
        graph.add_node(name, action).add_edge(previous, name)
        previous = name
    return graph.add_edge(previous, END)


def compiled_sub_graph_parent(started: dict[str, threading.Event]) -> CompiledGraph:
    """``compiledSubGraphCancelTest``'s graphs: NODE1 -> NODE2 -> NODE3 (the compiled
    NODE3.1 -> ... -> NODE3.4) -> NODE4 -> NODE5, every node a blocking waiting node."""
    child = chain(["NODE3.1", "NODE3.2", "NODE3.3", "NODE3.4"], started).compile()
    return chain(["NODE1", "NODE2", "NODE3", "NODE4", "NODE5"], started, child).compile()


def test_compiled_sub_graph_not_cancelled_with_blocking_nodes() -> None:
    """``compiledSubGraphCancelTest``, "NO CANCEL TEST"."""
    completed: list[str] = []
    parent = compiled_sub_graph_parent({})
    stream = parent.stream(
        GraphInput.no_args(), RunnableConfig(metadata={"node_completed": completed})
    )
    outputs = list(stream)
    assert not stream.is_cancelled()
    assert outputs and outputs[-1].is_end()
    assert completed == [
        "NODE1",
        "NODE2",
        "NODE3.1",
        "NODE3.2",
        "NODE3.3",
        "NODE3.4",
        "NODE4",
        "NODE5",
    ]


@pytest.mark.parametrize("iterate_async", [False, True], ids=["iterator", "for_each_async"])
def test_compiled_sub_graph_cancel_with_blocking_nodes(iterate_async: bool) -> None:
    """``compiledSubGraphCancelTest``, "CANCEL TEST USING FOR EACH ASYNC" and "TEST USING
    ITERATOR": ``cancel(true)`` while a node of the subgraph sleeps (NODE3.2 here; three
    seconds in, past three of its one-second nodes, in LangGraph4j)."""
    completed: list[str] = []
    started = {"NODE3.2": threading.Event()}
    parent = compiled_sub_graph_parent(started)
    config = RunnableConfig(metadata={"node_completed": completed})

    def cancel(stream: Any) -> None:
        assert started["NODE3.2"].wait(10)
        assert stream.cancel(True) is True

    if iterate_async:

        async def main() -> tuple[list[str], Any]:
            stream = parent.astream(GraphInput.no_args(), config)
            canceller = asyncio.ensure_future(asyncio.to_thread(cancel, stream))
            seen = nodes([output async for output in stream])
            await asyncio.wait_for(canceller, 10)
            return seen, stream

        seen, stream = asyncio.run(main())
    else:
        stream = parent.stream(GraphInput.no_args(), config)
        canceller = threading.Thread(target=cancel, args=(stream,))
        canceller.start()
        seen = nodes(stream)
        canceller.join(10)

    assert seen and seen[-1] != END  # currentOutput is not null, not END
    assert seen == [START, "NODE1", "NODE2", "NODE3.1"]
    assert stream.is_cancelled()
    assert stream.result.is_empty()
    deadline = time.monotonic() + 5  # NODE3.2's thread finishes its sleep ...
    while "NODE3.2" not in completed and time.monotonic() < deadline:
        time.sleep(0.01)
    time.sleep(0.2)  # ... and nothing after it starts
    assert completed == ["NODE1", "NODE2", "NODE3.1", "NODE3.2"]
    assert "NODE3.3" not in started


def test_graph_cancel_result_is_cancelled() -> None:
    """``graphCancelTest`` (newest version), "CANCEL TEST USING ITERATOR": three blocking
    one-second agents (0.3 s here) cancelled with interrupt 50 ms in; the stream's result
    says it was cancelled."""
    started: dict[str, threading.Event] = {}
    graph = (
        StateGraph(MESSAGES_SCHEMA)
        .add_node("agent_1", waiting_node("agent_1", 0.3, started))
        .add_node("agent_2", waiting_node("agent_2", 0.3, started))
        .add_node("agent_3", waiting_node("agent_3", 0.3, started))
        .add_edge("agent_1", "agent_2")
        .add_edge("agent_2", "agent_3")
        .add_edge(START, "agent_1")
        .add_edge("agent_3", END)
        .compile()
    )
    stream = graph.stream(GraphInput.no_args(), RunnableConfig(metadata={"node_completed": []}))
    threading.Timer(0.05, stream.cancel, (True,)).start()
    seen = nodes(stream)
    assert seen and seen[-1] != END
    assert stream.is_cancelled()
    result = stream.result
    assert result.is_cancelled()
    assert result.is_empty()  # (SPEC §9: a cancelled stream's result is empty too)
