"""Port of LangGraph4j's ``CompiledSubGraphTest`` (``langgraph4j-core``): what
``tests/test_subgraph_compiled.py`` leaves out.

That file ports every method of the newest ``CompiledSubGraphTest``, but its interruptible child
node stops unless the state says ``LG4J_RESUME`` (``CustomNodeAction.Interruptable``'s rule),
and its ``testNestedCompiledSubgraphFormIssue216`` graphs have a ``messages`` appender.  Here
they are as in ``CompiledSubGraphTest`` itself:

- ``NodeActionBuilder.InterruptableNodeAction`` stops while the state's ``interrupt_subgraph`` is
  true; the run starts with ``GraphInput.args({"interrupt_subgraph": True})`` and the resume's
  update sets it back to false, so the parent's resume update must reach the parked child's
  state before the child asks its node again (choices.md: a resumed node's
  ``InterruptibleAction`` is asked again);
- ``testNestedCompiledSubgraphFormIssue216`` builds its three graphs with
  ``new StateGraph<>(MyState::new)``: no schema, so ``messages`` is a plain key, overwritten.

Java's ``FileSystemSaver`` and its JSON/binary serializers are a ``MemorySaver``; Java runs
without a thread id (its default thread), SPEC §4 asks for one with a saver.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from langgraph_celery import (
    END,
    START,
    AgentState,
    Channels,
    CompileConfig,
    CompiledGraph,
    GraphInput,
    InterruptionMetadata,
    NodeOutput,
    RunnableConfig,
    StateGraph,
    StreamMode,
)
from langgraph_celery.checkpoint import BaseCheckpointSaver, MemorySaver

#: ``MyState.SCHEMA`` (a ``MessagesState<String>``)
SCHEMA = {"messages": Channels.appender()}


def node(node_id: str, attribute: str | None = None) -> Callable[..., Any]:
    """``NodeActionBuilder.build()``: checks the runtime's node id, appends ``[id<attr>]``."""

    def action(state: AgentState, config: RunnableConfig) -> dict[str, Any]:
        assert config.node_id == node_id
        value = state.value(attribute, "") if attribute is not None else ""
        return {"messages": f"[{node_id}{value}]"}

    return action


class InterruptableNodeAction:
    """``NodeActionBuilder.buildInterruptable()``: stops before it runs while the state's
    ``interrupt_subgraph`` is true."""

    def __init__(self, node_id: str) -> None:
        self.node_id = node_id

    def interrupt(
        self, node_id: str, state: AgentState, config: RunnableConfig
    ) -> InterruptionMetadata | None:
        if state.value("interrupt_subgraph", False):
            return InterruptionMetadata(node_id, state)
        return None

    def __call__(self, state: AgentState, config: RunnableConfig) -> dict[str, Any]:
        assert config.node_id == self.node_id
        return {"messages": f"[{self.node_id}]"}


def chain(
    steps: list[tuple[str, Any]], config: CompileConfig | None = None, schema: Any = SCHEMA
) -> CompiledGraph:
    """``START -> steps... -> END``."""
    graph = StateGraph(schema)
    previous = START
    for name, action in steps:
        graph.add_node(name, action).add_edge(previous, name)
        previous = name
    return graph.add_edge(previous, END).compile(config)


def sub_graph_with_interruption(saver: BaseCheckpointSaver) -> CompiledGraph:
    """``subGraphWithInterruption(saver, serializer, asInterruptable=true)``."""
    return chain(
        [
            ("NODE3.1", node("NODE3.1")),
            ("NODE3.2", node("NODE3.2")),
            ("NODE3.3", InterruptableNodeAction("NODE3.3")),
            ("NODE3.4", node("NODE3.4", "newAttribute")),
        ],
        CompileConfig(checkpoint_saver=saver),
    )


def last(outputs: list[NodeOutput]) -> NodeOutput:
    assert outputs
    return outputs[-1]


def messages(output: NodeOutput) -> list[str]:
    return list(output.state.value("messages"))


INTERRUPTED = ["[NODE1]", "[NODE2]", "[NODE3.1]", "[NODE3.2]"]


@pytest.mark.parametrize("mode", [StreamMode.VALUES, StreamMode.SNAPSHOTS])
def test_interruption_sharing_saver_with_interrupt_subgraph_flag(mode: StreamMode) -> None:
    """``testCompiledSubGraphInterruptionSharingSaver``, its ``INTERRUPTABLE_ACTION_WITH_*``
    cases: the child asks ``interrupt_subgraph``, which the input sets and the resume clears."""
    saver = MemorySaver()
    parent = chain(
        [
            ("NODE1", node("NODE1")),
            ("NODE2", node("NODE2")),
            ("NODE3", sub_graph_with_interruption(saver)),
            ("NODE4", node("NODE4")),
            ("NODE5", node("NODE5", "newAttribute")),
        ],
        CompileConfig(checkpoint_saver=saver),
    )
    config = RunnableConfig(thread_id="thread01", stream_mode=mode)

    stream = parent.stream(GraphInput.args({"interrupt_subgraph": True}), config)
    output = last(list(stream))
    assert not output.is_end()
    assert messages(output) == INTERRUPTED
    assert not stream.result.is_empty()
    assert stream.result.is_interruption_metadata()
    assert stream.result.as_interruption_metadata().node_id == "NODE3.3"

    resume = {"newAttribute": "<myNewValue>", "interrupt_subgraph": False}
    stream = parent.stream(GraphInput.resume(resume), config)
    output = last(list(stream))
    assert output.is_end()
    assert messages(output) == [
        *INTERRUPTED,
        "[NODE3.3]",
        "[NODE3.4<myNewValue>]",
        "[NODE4]",
        "[NODE5<myNewValue>]",
    ]
    assert stream.result.is_state_data()


@pytest.mark.parametrize("mode", [StreamMode.VALUES, StreamMode.SNAPSHOTS])
def test_interruption_with_different_saver_with_interrupt_subgraph_flag(mode: StreamMode) -> None:
    """``testCompiledSubGraphInterruptionWithDifferentSaver``, its ``INTERRUPTABLE_ACTION_*``
    cases: the child has a ``MemorySaver`` of its own."""
    parent = chain(
        [
            ("NODE1", node("NODE1")),
            ("NODE2", node("NODE2")),
            ("NODE3", sub_graph_with_interruption(MemorySaver())),
            ("NODE4", node("NODE4", "newAttribute")),
            ("NODE5", node("NODE5")),
        ],
        CompileConfig(checkpoint_saver=MemorySaver()),
    )
    config = RunnableConfig(thread_id="thread02", stream_mode=mode)

    stream = parent.stream(GraphInput.args({"interrupt_subgraph": True}), config)
    output = last(list(stream))
    assert not output.is_end()
    assert messages(output) == INTERRUPTED
    assert stream.result.is_interruption_metadata()

    resume = {"newAttribute": "<myNewValue>", "interrupt_subgraph": False}
    output = last(list(parent.stream(GraphInput.resume(resume), config)))
    assert output.is_end()
    assert messages(output) == [
        *INTERRUPTED,
        "[NODE3.3]",
        "[NODE3.4<myNewValue>]",
        "[NODE4<myNewValue>]",
        "[NODE5]",
    ]


def test_the_interrupt_subgraph_flag_still_set_parks_the_child_again() -> None:
    """The same child, resumed without clearing ``interrupt_subgraph``: its node is asked again
    and stops again (as LangGraph4j's runner asks an ``InterruptableAction`` on every run)."""
    saver = MemorySaver()
    parent = chain(
        [("NODE2", node("NODE2")), ("NODE3", sub_graph_with_interruption(saver))],
        CompileConfig(checkpoint_saver=saver),
    )
    config = RunnableConfig(thread_id="again")
    stream = parent.stream(GraphInput.args({"interrupt_subgraph": True}), config)
    list(stream)
    assert stream.result.as_interruption_metadata().node_id == "NODE3.3"
    stream = parent.stream(GraphInput.resume({"newAttribute": "x"}), config)
    list(stream)
    assert stream.result.as_interruption_metadata().node_id == "NODE3.3"
    state = parent.invoke(GraphInput.resume({"interrupt_subgraph": False}), config)
    assert state.value("messages")[-2:] == ["[NODE3.3]", "[NODE3.4x]"]


@pytest.mark.parametrize("mode", list(StreamMode))
def test_nested_compiled_subgraph_issue216_without_schema(mode: StreamMode) -> None:
    """``testNestedCompiledSubgraphFormIssue216``: three levels built without a schema (Java's
    ``new StateGraph<>(MyState::new)``), streamed to the end in each mode; with no channel,
    ``messages`` holds what the last node wrote."""
    sub_sub_graph = chain(
        [("foo1", node("foo1")), ("foo2", node("foo2")), ("foo3", node("foo3"))], schema=None
    )
    sub_graph = chain(
        [("bar1", node("bar1")), ("subgraph2", sub_sub_graph), ("bar2", node("bar2"))],
        schema=None,
    )
    parent = chain(
        [("main1", node("main1")), ("subgraph1", sub_graph), ("main2", node("main2"))],
        schema=None,
    )
    stream = parent.stream(GraphInput.args({}), RunnableConfig(stream_mode=mode))
    outputs = list(stream)
    assert last(outputs).is_end()
    assert [o.node for o in outputs] == [
        START,
        "main1",
        "bar1",
        "foo1",
        "foo2",
        "foo3",
        "subgraph2",
        "bar2",
        "subgraph1",
        "main2",
        END,
    ]
    assert last(outputs).state.value("messages") == "[main2]"
