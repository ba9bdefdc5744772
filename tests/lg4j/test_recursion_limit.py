"""Port of LangGraph4j's ``RecursionLimitTest`` (``langgraph4j-core``), in process.

LangGraph4j's message is ``"Maximum number of iterations (N) reached!"``; SPEC §3 fixes the
error class (``GraphRecursionError``, also a ``RecursionError``), not the text, so the tests
check that the message names the limit.  Not ported: ``runnableConfigRecursionLimitOverrides
LegacyMaxIterations``, about the deprecated ``CompiledGraph.setMaxIterations``, which SPEC has
no equivalent of.
"""

from __future__ import annotations

import re
from typing import Any

import pytest

from langgraph_celery import (
    END,
    START,
    AgentState,
    CompileConfig,
    CompiledGraph,
    GraphRecursionError,
    RunnableConfig,
    StateGraph,
)


def looping_graph(recursion_limit: int, calls: list[int]) -> CompiledGraph:
    def loop(state: AgentState) -> dict[str, Any]:
        calls.append(1)
        return {}

    return (
        StateGraph()
        .add_node("loop", loop)
        .add_edge(START, "loop")
        .add_edge("loop", "loop")
        .compile(CompileConfig(recursion_limit=recursion_limit))
    )


def assert_recursion_limit(error: GraphRecursionError, recursion_limit: int) -> None:
    assert isinstance(error, RecursionError)
    assert re.search(rf"recursion limit of {recursion_limit}\b", str(error)), str(error)


def test_compile_config_recursion_limit_is_used_without_an_override() -> None:
    """``RecursionLimitTest.compileConfigRecursionLimitIsUsedWithoutAnOverride``."""
    calls: list[int] = []
    graph = looping_graph(3, calls)
    with pytest.raises(GraphRecursionError) as caught:
        graph.invoke({})
    assert_recursion_limit(caught.value, 3)
    assert len(calls) == 3  # (SPEC §3: the limit caps the supersteps)


def test_runnable_config_recursion_limit_overrides_the_graph_default() -> None:
    """``RecursionLimitTest.runnableConfigRecursionLimitOverridesTheGraphDefault``."""
    calls: list[int] = []
    graph = looping_graph(2, calls)
    with pytest.raises(GraphRecursionError) as caught:
        graph.invoke({}, RunnableConfig(recursion_limit=4))
    assert_recursion_limit(caught.value, 4)
    assert len(calls) == 4


def test_recursion_limit_is_propagated_to_compiled_subgraphs() -> None:
    """``RecursionLimitTest.recursionLimitIsPropagatedToCompiledSubgraphs``: a compiled
    subgraph's nodes see the caller's ``recursion_limit``."""
    seen: list[int | None] = []

    def node(state: AgentState, config: RunnableConfig) -> dict[str, Any]:
        seen.append(config.recursion_limit)
        return {}

    subgraph = (
        StateGraph().add_node("node", node).add_edge(START, "node").add_edge("node", END).compile()
    )
    graph = (
        StateGraph()
        .add_node("subgraph", subgraph)
        .add_edge(START, "subgraph")
        .add_edge("subgraph", END)
        .compile()
    )
    result = graph.invoke({}, RunnableConfig(recursion_limit=7))
    assert result is not None
    assert seen == [7]
