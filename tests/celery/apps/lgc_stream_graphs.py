"""Graphs of the Celery streaming tests and of the LangGraph4j ports run on workers (see
``tests/celery/test_celery_streaming.py``), shared by the test process and the workers."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Mapping
from typing import Any

from langgraph_celery import (
    END,
    START,
    AgentState,
    Channels,
    Command,
    Done,
    GraphInterrupt,
    NodeOutput,
    RunnableConfig,
    StateGraph,
)


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


def custom_output(is_async: bool) -> Callable[[], StateGraph]:
    """LangGraph4j's ``LG4JCustomOutputTest``: START -> A -> END, ``A`` emits its own
    ``NodeOutput("A.START", state)`` (plain or async node), sleeps, then adds ``"A"``."""

    def build() -> StateGraph:
        def plain(state: AgentState, config: RunnableConfig) -> dict[str, Any]:
            config.emit(NodeOutput("A.START", state))
            time.sleep(0.2)
            return {"messages": ["A"]}

        async def asynchronous(state: AgentState, config: RunnableConfig) -> dict[str, Any]:
            config.emit(NodeOutput("A.START", state))
            await asyncio.sleep(0.2)
            return {"messages": ["A"]}

        graph = StateGraph({"messages": Channels.appender()})
        graph.add_node("A", asynchronous if is_async else plain)
        return graph.add_edge(START, "A").add_edge("A", END)

    return build


def async_command() -> StateGraph:
    """LangGraph4j's ``AsyncNodeTest.testAsyncNode``: A -> B (an async command node going to
    C2 with an update) -> C1 | C2 | END."""

    def node(name: str) -> Callable[..., Any]:
        async def action(state: AgentState) -> dict[str, Any]:
            return {"messages": [name]}

        return action

    async def command_action(state: AgentState, config: RunnableConfig) -> Command:
        return Command("C2", {"messages": ["B"], "next_node": "C2"})

    graph = StateGraph({"messages": Channels.appender()})
    graph.add_node("A", node("A")).add_node("B", command_action, [END, "C1", "C2"])
    graph.add_node("C1", node("C1")).add_node("C2", node("C2"))
    graph.add_edge(START, "A").add_edge("A", "B")
    return graph.add_edge("C1", END).add_edge("C2", END)


def agents() -> StateGraph:
    """LangGraph4j's ``CancellationTest.graphCancelTest``: agent_1 -> agent_2 -> agent_3, each
    sleeping ``delay`` seconds then adding its name to ``messages``."""

    def agent(name: str) -> Callable[..., Any]:
        async def action(state: AgentState) -> dict[str, Any]:
            await asyncio.sleep(state.value("delay", 0.3))
            return {"messages": [name]}

        return action

    graph = StateGraph({"messages": Channels.appender()})
    for name in ("agent_1", "agent_2", "agent_3"):
        graph.add_node(name, agent(name))
    graph.add_edge(START, "agent_1").add_edge("agent_1", "agent_2")
    return graph.add_edge("agent_2", "agent_3").add_edge("agent_3", END)


def streams_then_stops() -> StateGraph:
    """START -> talk -> END: ``talk`` emits ``"e1"`` and ``"e2"``, then parks (``GraphInterrupt``)
    unless ``approved``, or fails (``ValueError``) when ``fail``."""

    def talk(state: AgentState, config: RunnableConfig) -> dict[str, Any]:
        config.emit("e1")
        config.emit("e2")
        if state.value("fail"):
            raise ValueError("talk fails after streaming")
        if not state.value("approved"):
            raise GraphInterrupt("approve the talk")
        return {"log": ["talk"]}

    graph = StateGraph({"log": Channels.appender()})
    return graph.add_node("talk", talk).add_edge(START, "talk").add_edge("talk", END)


#: graph_id -> (builder, compile options)
STREAM_GRAPHS: dict[str, tuple[Callable[[], StateGraph], Mapping[str, Any]]] = {
    "streaming-last": (streaming_last, {}),
    "custom-output": (custom_output(False), {}),
    "custom-output-async": (custom_output(True), {}),
    "async-command": (async_command, {}),
    "agents": (agents, {}),
    "streams-then-stops": (streams_then_stops, {}),
}
