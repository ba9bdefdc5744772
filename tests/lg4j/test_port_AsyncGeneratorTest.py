"""Port of LangGraph4j's ``AsyncGeneratorTest`` (``langgraph4j-core``).

It tests ``java-async-generator``'s ``AsyncGenerator``, the type of LangGraph4j's ``stream()``.
Its counterpart here is the stream ``stream()``/``astream()`` return, fed by a graph: a chain of
nodes ``e1``..``e5`` for ``AsyncGenerator.from(list)``, and a streaming node that yields
``e0``..``e9`` for ``AsyncGeneratorQueue`` (a producer pushing to a queue).  A cancelled
stream's iteration ends (SPEC §9), where Java's ``forEachAsync`` ends with a
``CancellationException``.
"""

from __future__ import annotations

import asyncio
import threading
import time
from typing import Any

import pytest
from lg4j_support import MESSAGES_SCHEMA

from langgraph_celery import (
    END,
    START,
    AgentState,
    CompiledGraph,
    GraphInput,
    NodeError,
    StateGraph,
    StreamingOutput,
)

ITEMS = ["e1", "e2", "e3", "e4", "e5"]


def chain_of(items: list[str]) -> CompiledGraph:
    """``AsyncGenerator.from(myArray.iterator())``: one node per item, in a chain."""
    graph = StateGraph(MESSAGES_SCHEMA)
    previous = START
    for item in items:
        graph.add_node(item, lambda state, item=item: {"messages": item}).add_edge(previous, item)
        previous = item
    return graph.add_edge(previous, END).compile()


def node_items(outputs: list[Any]) -> list[str]:
    return [output.node for output in outputs if output.node not in (START, END)]


def test_async_for_each_async() -> None:
    """``AsyncGeneratorTest.asyncForEachAsyncTest``: ``forEachAsync`` takes every item; a
    ``for`` over the same, exhausted, generator takes none."""
    result: list[str] = []

    async def main() -> None:
        stream = chain_of(ITEMS).astream(GraphInput.no_args())
        result.extend(node_items([output async for output in stream]))
        result.extend(node_items([output async for output in stream]))

    asyncio.run(main())
    stream = chain_of(ITEMS).stream(GraphInput.no_args())
    assert node_items(list(stream)) == ITEMS
    assert list(stream) == []
    assert result == ITEMS


def test_async_for_each_async_cancel() -> None:
    """``AsyncGeneratorTest.asyncForEachAsyncCancelTest``: the consumer takes 100 ms an item
    and the generator is cancelled (with interrupt) 250 ms in (400 ms in LangGraph4j); the
    iteration stops before the end, and iterating again takes nothing more."""
    stream = chain_of(ITEMS).stream(GraphInput.no_args())
    threading.Timer(0.25, stream.cancel, (True,)).start()
    result: list[str] = []
    for output in stream:
        time.sleep(0.1)
        result.append(output.node)
    size_after_interruption = len(result)
    assert stream.is_cancelled()
    assert result != [START, *ITEMS, END]
    assert END not in result
    result.extend(output.node for output in stream)
    assert len(result) == size_after_interruption


def queue_graph(fail_after: int | None = None) -> CompiledGraph:
    """``AsyncGeneratorQueue.of(queue, q -> for i in 0..9: q.add("e"+i))``: a streaming node
    yields ``e0``..``e9`` (raising ``RuntimeError("error test")`` after ``e<fail_after>``)."""

    def producer(state: AgentState) -> dict[str, Any]:
        def chunks() -> Any:
            for i in range(10):
                yield f"e{i}"
                if i == fail_after:
                    raise RuntimeError("error test")
            return {"messages": "done"}

        return {"queue": chunks()}

    return (
        StateGraph(MESSAGES_SCHEMA)
        .add_node("producer", producer)
        .add_edge(START, "producer")
        .add_edge("producer", END)
        .compile()
    )


def chunks_of(outputs: list[Any]) -> list[Any]:
    return [output.chunk for output in outputs if isinstance(output, StreamingOutput)]


def test_async_queue() -> None:
    """``AsyncGeneratorTest.asyncQueueTest``: ``forEachAsync`` takes the ten items in order."""

    async def main() -> list[Any]:
        return [output async for output in queue_graph().astream(GraphInput.no_args())]

    assert chunks_of(asyncio.run(main())) == [f"e{i}" for i in range(10)]


def test_async_queue_to_stream() -> None:
    """``AsyncGeneratorTest.asyncQueueToStreamTest``: the last item is ``e9``."""
    chunks = chunks_of(list(queue_graph().stream(GraphInput.no_args())))
    assert chunks and chunks[-1] == "e9"


def test_async_queue_iterator_exception() -> None:
    """``AsyncGeneratorTest.asyncQueueIteratorExceptionTest``: the producer's error (after
    ``e2``) is raised by the iteration."""
    seen: list[Any] = []
    with pytest.raises(NodeError, match="error test"):
        for output in queue_graph(fail_after=2).stream(GraphInput.no_args()):
            seen.append(output)
    assert chunks_of(seen) == ["e0", "e1", "e2"]


def test_async_queue_for_each_exception() -> None:
    """``AsyncGeneratorTest.asyncQueueForEachExceptionTest``: the same with ``forEachAsync``."""

    async def main() -> None:
        async for _ in queue_graph(fail_after=2).astream(GraphInput.no_args()):
            pass

    with pytest.raises(NodeError, match="error test"):
        asyncio.run(main())
