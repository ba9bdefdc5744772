"""LangGraph4j's ``LG4JCustomOutputTest``, ``AsyncNodeTest`` and ``CancellationTest`` (its
graphCancelTest) on Celery workers, with the graphs and asserted values of their in-process ports
(``tests/test_streaming.py``, ``tests/test_command_nodes.py``, ``tests/test_cancellation.py``;
graphs in ``lgc_stream_graphs``).  A ``NodeOutput`` a node emits reaches the client as a plain
``NodeOutput`` of the node it names (its class does not travel)."""

from __future__ import annotations

import asyncio
import threading

import pytest

from celery_support import CeleryStack
from langgraph_celery import END, START, GraphInput, NodeOutput, RunnableConfig, StreamingOutput
from langgraph_celery.celery import RunHandle


@pytest.mark.parametrize("graph_id", ["custom-output", "custom-output-async"])
def test_lg4j_custom_output_sync_and_async_iteration(
    celery_stack: CeleryStack, thread: str, graph_id: str
) -> None:
    graph = celery_stack.graph(graph_id)
    expected = [START, "A.START", "A", END]

    outputs = list(graph.stream(GraphInput.no_args(), RunnableConfig(thread_id=thread)))
    assert [o.node for o in outputs] == expected
    assert not isinstance(outputs[1], StreamingOutput)  # emitted as a NodeOutput

    async def collect() -> list[NodeOutput]:
        config = RunnableConfig(thread_id=f"{thread}-async")
        return [o async for o in graph.astream(GraphInput.no_args(), config)]

    outputs = asyncio.run(collect())
    assert [o.node for o in outputs] == expected
    assert outputs[-1].state.data == {"messages": ["A"]}


def test_lg4j_async_command_node(celery_stack: CeleryStack, thread: str) -> None:
    """AsyncNodeTest.testAsyncNode."""
    graph = celery_stack.graph("async-command")
    steps = list(graph.stream(GraphInput.no_args(), RunnableConfig(thread_id=thread)))
    assert len(steps) == 5
    assert steps[2].node == "B"
    assert steps[2].state.value("next_node") == "C2"
    assert [s.node for s in steps] == [START, "A", "B", "C2", END]
    assert steps[-1].state.value("messages") == ["A", "B", "C2"]


def test_lg4j_graph_cancel_with_the_iterator(celery_stack: CeleryStack, thread: str) -> None:
    """CancellationTest.graphCancelTest, iterator case: cancelled while agent_1 runs; the run
    is cancelled where it stood and resumes to the end."""
    graph = celery_stack.graph("agents")
    config = RunnableConfig(thread_id=thread)
    stream = graph.stream({"delay": 0.5}, config)
    current = None
    timer = None
    for output in stream:
        current = output
        if output.node == START:
            timer = threading.Timer(0.05, stream.cancel, (True,))
            timer.start()
    assert timer is not None
    timer.join()
    assert current is not None and current.node != END
    assert stream.is_cancelled() and stream.result.is_empty()
    run_id = celery_stack.saver.get(thread).run_id
    assert RunHandle.from_run_id(graph, run_id).status() == "cancelled"
    state = graph.invoke(GraphInput.resume(), config, timeout=30)
    assert state.data["messages"] == ["agent_1", "agent_2", "agent_3"]
