"""Port of LangGraph4j's ``Issue304Test`` (``langgraph4j-core``, issue #304): a node action that
also implements ``InterruptibleAction`` keeps it whatever its form.  In LangGraph4j the forms
are the ``NodeAction``, ``NodeActionWithConfig`` and ``AsyncNodeAction`` interfaces and the
``node_async``/``AsyncNodeActionWithConfig.of`` adapters that wrap them; here they are a callable
taking ``(state)``, one taking ``(state, config)`` and an async one, each given to ``add_node``
as it is: the tests check the action is an ``InterruptibleAction`` and that the run asks it
(on resume too: LangGraph4j's runner asks before every run of the node).
Not ported: ``nodeActionProxy``, about Java's dynamic proxies.
"""

from __future__ import annotations

from typing import Any

import pytest

from langgraph_celery import (
    END,
    START,
    AgentState,
    CompileConfig,
    GraphInput,
    InterruptibleAction,
    InterruptionMetadata,
    RunnableConfig,
    StateGraph,
)
from langgraph_celery.checkpoint import MemorySaver


class Interrupting:
    def interrupt(
        self, node_id: str, state: AgentState, config: RunnableConfig
    ) -> InterruptionMetadata | None:
        return InterruptionMetadata(node_id, state)


class NodeActionTest(Interrupting):
    """``Issue304Test.NodeActionTest``: ``apply(state)``."""

    def __call__(self, state: AgentState) -> dict[str, Any]:
        return {"k1": "v1"}


class NodeActionWithConfigTest(Interrupting):
    """``Issue304Test.NodeActionWithConfigTest``: ``apply(state, config)``."""

    def __call__(self, state: AgentState, config: RunnableConfig) -> dict[str, Any]:
        return {"k1": "v1"}


class AsyncNodeActionTest(Interrupting):
    """``Issue304Test.AsyncNodeActionTest``: an async ``apply(state)``."""

    async def __call__(self, state: AgentState) -> dict[str, Any]:
        return {"k1": "v1"}


@pytest.mark.parametrize(
    "action",
    [NodeActionTest(), NodeActionWithConfigTest(), AsyncNodeActionTest()],
    ids=["nodeActionWrapper", "nodeActionWithConfigWrapper", "asyncNodeActionConversion"],
)
def test_interruptible_action_keeps_its_interrupt(action: Any) -> None:
    """``Issue304Test.nodeActionWrapper``, ``nodeActionWithConfigWrapper`` and
    ``asyncNodeActionConversionToAsyncNodeActionWithConfig``."""
    assert isinstance(action, InterruptibleAction)
    state = AgentState({})
    metadata = action.interrupt("node1", state, RunnableConfig())
    assert isinstance(metadata, InterruptionMetadata)
    assert metadata.node_id == "node1"
    assert metadata.state == state

    graph = (
        StateGraph()
        .add_node("node1", action)
        .add_edge(START, "node1")
        .add_edge("node1", END)
        .compile(CompileConfig(checkpoint_saver=MemorySaver()))
    )
    config = RunnableConfig(thread_id="issue304")
    stream = graph.stream({"input": "x"}, config)
    assert [output.node for output in stream] == [START]
    interruption = stream.result.as_interruption_metadata()
    assert interruption.node_id == "node1"
    assert dict(interruption.state.data) == {"input": "x"}

    # asked again before the resumed node runs: an action that always interrupts stops again
    resumed = graph.stream(GraphInput.resume(), config)
    assert [output.node for output in resumed] == []
    assert resumed.result.as_interruption_metadata().node_id == "node1"
    assert graph.get_state(config).next == ("node1",)
