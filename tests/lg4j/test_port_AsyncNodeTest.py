"""Port of LangGraph4j's ``AsyncNodeTest``: what ``tests/test_command_nodes.py`` leaves out.

That file ports ``testAsyncNode`` with the command node's destinations as a list of node ids.
LangGraph4j gives them as ``EdgeMappings.builder().toEND().to("C1").to("C2").build()``, a
label -> node mapping whose ``END`` label leads to ``END``: here that mapping (SPEC §9:
``destinations`` is node ids or a label -> node mapping).  ``command_async`` is an ``async def``
action returning a ``Command``; the other nodes run their action on an executor, as
``CompletableFuture.supplyAsync(..., ForkJoinPool.commonPool())`` does, from an async node or
(beyond the port) a plain one.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
from typing import Any

import pytest
from lg4j_support import MESSAGES_SCHEMA

from langgraph_celery import (
    END,
    START,
    AgentState,
    Command,
    GraphInput,
    RunnableConfig,
    StateGraph,
)


def make_node(node_id: str, executor: concurrent.futures.Executor, plain: bool) -> Any:
    """``makeNode(id, executor)``: the action ``{"messages": id}`` runs on ``executor``."""

    def action() -> dict[str, Any]:
        return {"messages": node_id}

    if plain:
        return lambda state, config: executor.submit(action).result()

    async def node(state: AgentState, config: RunnableConfig) -> dict[str, Any]:
        return await asyncio.get_running_loop().run_in_executor(executor, action)

    return node


async def command_action(state: AgentState, config: RunnableConfig) -> Command:
    """``command_async((state, config) -> new Command("C2", Map.of(...)))``."""
    return Command("C2", {"messages": "B", "next_node": "C2"})


@pytest.mark.parametrize("plain", [False, True], ids=["async_nodes", "plain_nodes"])
def test_async_node(plain: bool) -> None:
    """``testAsyncNode``."""
    with concurrent.futures.ThreadPoolExecutor(2) as executor:
        graph = (
            StateGraph(MESSAGES_SCHEMA)
            .add_node("A", make_node("A", executor, plain))
            .add_node("B", command_action, {END: END, "C1": "C1", "C2": "C2"})
            .add_node("C1", make_node("C1", executor, plain))
            .add_node("C2", make_node("C2", executor, plain))
            .add_edge(START, "A")
            .add_edge("A", "B")
            .add_edge("C1", END)
            .add_edge("C2", END)
            .compile()
        )
        steps = list(graph.stream(GraphInput.no_args(), RunnableConfig()))

    assert len(steps) == 5
    assert steps[2].node == "B"
    assert steps[2].state.value("next_node") == "C2"
    assert [step.node for step in steps] == [START, "A", "B", "C2", END]
    assert steps[-1].state.value("messages") == ["A", "B", "C2"]
