"""Graphs of the Celery streaming tests whose streaming nodes run in the last step (see
``tests/celery/test_celery_streaming.py``), shared by the test process and the workers."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from langgraph_celery import END, START, AgentState, Channels, Done, StateGraph


def chunk_names(node: str, count: int) -> list[str]:
    """What node ``node`` of :func:`streaming_last` streams when the input's ``n`` is ``count``."""
    return [f"{node}-{index}" for index in range(count)]


def streaming_last() -> StateGraph:
    """START -> plan -> (left, right) -> END.  ``plan`` streams three chunks; ``left`` (a
    generator returning its update) and ``right`` (an async generator ending with ``Done``)
    run in parallel in the last step and stream ``n`` chunks each, with no pause: their last
    chunks are published just before the run completes."""
    graph = StateGraph({"log": Channels.appender()})

    def plan(state: AgentState) -> dict[str, Any]:
        def chunks() -> Any:
            yield from chunk_names("plan", 3)
            return {"log": ["plan"]}

        return {"out": chunks()}

    def left(state: AgentState) -> dict[str, Any]:
        def chunks() -> Any:
            yield from chunk_names("left", state.value("n"))
            return {"log": ["left"]}

        return {"out": chunks()}

    async def right(state: AgentState) -> dict[str, Any]:
        async def chunks() -> Any:
            for name in chunk_names("right", state.value("n")):
                yield name
            yield Done({"log": ["right"]})

        return {"out": chunks()}

    graph.add_node("plan", plan).add_node("left", left).add_node("right", right)
    graph.add_edge(START, "plan").add_edge("plan", "left").add_edge("plan", "right")
    return graph.add_edge("left", END).add_edge("right", END)


#: graph_id -> (builder, compile options)
STREAM_GRAPHS: dict[str, tuple[Callable[[], StateGraph], Mapping[str, Any]]] = {
    "streaming-last": (streaming_last, {}),
}
