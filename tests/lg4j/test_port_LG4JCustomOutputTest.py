"""Port of LangGraph4j's ``LG4JCustomOutputTest``: what ``tests/test_streaming.py`` leaves out.

That file ports both methods with a ``messages`` channel of ``operator.add`` and a node that
awaits (or sleeps in a thread) after emitting.  Here they are as in LangGraph4j: the state is
``LG4JTestUtil.State`` (a ``messages`` appender) and the node writes the single value ``"A"``;
the node blocks after dispatching (``Thread.sleep(1000)``, 0.3 s here), as a plain node, and as
an ``async def`` node that blocks its thread as Java's ``AsyncNodeActionWithConfig`` does.
``dispatchAsync`` and ``dispatchSync`` are both ``config.emit``; ``forEachAsync`` is ``astream``.
"""

from __future__ import annotations

import asyncio
import time
from typing import Any

import pytest
from lg4j_support import MESSAGES_SCHEMA

from langgraph_celery import (
    END,
    START,
    AgentState,
    CompileConfig,
    CompiledGraph,
    GraphInput,
    NodeOutput,
    RunnableConfig,
    StateGraph,
)


class CustomOutput(NodeOutput):
    """``LG4JCustomOutputTest.CustomOutput``."""


def plain_node(state: AgentState, config: RunnableConfig) -> dict[str, Any]:
    config.emit(CustomOutput("A.START", state))
    time.sleep(0.3)
    return {"messages": "A"}


async def blocking_async_node(state: AgentState, config: RunnableConfig) -> dict[str, Any]:
    config.emit(CustomOutput("A.START", state))
    time.sleep(0.3)  # (blocking, as Java's node blocks its thread)
    return {"messages": "A"}


def graph(action: Any) -> CompiledGraph:
    return (
        StateGraph(MESSAGES_SCHEMA)
        .add_node("A", action)
        .add_edge(START, "A")
        .add_edge("A", END)
        .compile(CompileConfig())
    )


EXPECTED = [START, "A.START", "A", END]


@pytest.mark.parametrize(
    "action", [plain_node, blocking_async_node], ids=["plain", "async_blocking"]
)
def test_one_node_with_dispatch_custom_output(action: Any) -> None:
    """``testOneNodeWithDispatchAsyncCustomOutput`` and ``testOneNodeWithDispatchSyncCustomOutput``:
    async iteration (``forEachAsync``), then sync iteration."""
    app = graph(action)

    async def for_each_async() -> list[NodeOutput]:
        return [output async for output in app.astream(GraphInput.no_args(), RunnableConfig())]

    for outputs in (
        asyncio.run(for_each_async()),
        list(app.stream(GraphInput.no_args(), RunnableConfig())),
    ):
        assert [output.node for output in outputs] == EXPECTED
        assert isinstance(outputs[1], CustomOutput)
        assert outputs[1].state.value("messages") == []  # the state the node was given
        assert outputs[-1].state.value("messages") == ["A"]
