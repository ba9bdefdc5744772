"""Port of LangGraph4j's ``GraphRunnerExceptionTest`` (``langgraph4j-core``, issue #90).

LangGraph4j's ``GraphRunnerException`` is SPEC's ``NodeError``: it names the failing node
(``node_id``, always set: LangGraph4j's reads it from the config it carries) and the original
exception's class (``error_type``), with the original as ``__cause__``.  Not ported:
``nodeIdIsEmptyWhenContextIsAbsent``, a ``GraphRunnerException`` built from a config without a
node id, which a ``NodeError`` cannot be.
"""

from __future__ import annotations

from typing import Any

import pytest

from langgraph_celery import (
    END,
    START,
    AgentState,
    GraphInput,
    NodeError,
    RunnableConfig,
    StateGraph,
)


def test_node_id_is_resolved_from_the_error() -> None:
    """``GraphRunnerExceptionTest.nodeIdIsResolvedFromConfigMetadata``: the error built for a
    node names it."""
    error = NodeError("agent", "RuntimeError", "boom")
    assert error.node_id == "agent"
    assert error.error_type == "RuntimeError"
    assert error.error_message == "boom"
    assert "'agent'" in str(error)
    assert "boom" in str(error)


def test_failing_node_is_reported_on_graph_execution() -> None:
    """``GraphRunnerExceptionTest.failingNodeIsReportedOnGraphExecution``."""

    def b(state: AgentState) -> dict[str, Any]:
        raise RuntimeError("boom")

    workflow = (
        StateGraph()
        .add_node("A", lambda state: {})
        .add_node("B", b)
        .add_edge(START, "A")
        .add_edge("A", "B")
        .add_edge("B", END)
        .compile()
    )
    with pytest.raises(NodeError) as caught:
        workflow.invoke(GraphInput.no_args(), RunnableConfig())
    assert caught.value.node_id == "B"
    root: BaseException = caught.value
    while root.__cause__ is not None:
        root = root.__cause__
    assert type(root) is RuntimeError
    assert str(root) == "boom"
