"""Audit port of LangGraph4j's ``StateSubGraphTest`` (newest version): what
``tests/test_subgraph_merged.py`` leaves out of ``testCheckpointWithMergeSubgraph``.

That file checks the final messages, the newest snapshot's and that a merged node's id shows in
the history.  Here the checkpoints themselves: a merged subgraph shares the parent's state and
checkpoints (SPEC §9), one per superstep (SPEC §4), so the run of
``step_1 -> step_2 -> subgraph(step_1 -> step_2 -> step_3) -> step_3`` stores its input and six
steps, each naming the node that ran (merged ids ``subgraph-<id>``), its ``next`` and its state.
Java runs with ``RunnableConfig.empty()`` (its default thread); SPEC §4 asks for a thread id.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from langgraph_celery import (
    END,
    START,
    AgentState,
    Channels,
    CompileConfig,
    CompiledGraph,
    GraphInput,
    RunnableConfig,
    StateGraph,
)
from langgraph_celery.checkpoint import MemorySaver


def make_node(message: str) -> Callable[[AgentState], dict[str, Any]]:
    """``_makeNode(id)``."""

    def action(state: AgentState) -> dict[str, Any]:
        return {"messages": message}

    return action


def checkpoint_with_merge_subgraph() -> CompiledGraph:
    """``testCheckpointWithMergeSubgraph``'s graphs, the child not compiled (merged)."""
    child = (
        StateGraph({"messages": Channels.appender()})
        .add_node("step_1", make_node("child:step1"))
        .add_node("step_2", make_node("child:step2"))
        .add_node("step_3", make_node("child:step3"))
        .add_edge(START, "step_1")
        .add_edge("step_1", "step_2")
        .add_edge("step_2", "step_3")
        .add_edge("step_3", END)
    )
    return (
        StateGraph({"messages": Channels.appender()})
        .add_node("step_1", make_node("step1"))
        .add_node("step_2", make_node("step2"))
        .add_node("step_3", make_node("step3"))
        .add_node("subgraph", child)
        .add_edge(START, "step_1")
        .add_edge("step_1", "step_2")
        .add_edge("step_2", "subgraph")
        .add_edge("subgraph", "step_3")
        .add_edge("step_3", END)
        .compile(CompileConfig(checkpoint_saver=MemorySaver()))
    )


RAN = ["step_1", "step_2", "subgraph-step_1", "subgraph-step_2", "subgraph-step_3", "step_3"]
WROTE = ["step1", "step2", "child:step1", "child:step2", "child:step3", "step3"]


def test_checkpoint_with_merge_subgraph_stores_one_checkpoint_per_merged_step() -> None:
    app = checkpoint_with_merge_subgraph()
    thread = RunnableConfig(thread_id="audit-checkpoint-merge")
    outputs = list(app.stream(GraphInput.no_args(), thread))
    assert [output.node for output in outputs] == [START, *RAN, END]
    assert outputs[-1].state.value("messages") == WROTE

    history = list(reversed(app.get_state_history(thread)))  # oldest first
    assert len(history) == 1 + len(RAN)
    assert [snapshot.node for snapshot in history] == [START, *RAN]
    assert [snapshot.next for snapshot in history] == [
        *[(node,) for node in RAN],
        (),
    ]
    for done, snapshot in enumerate(history):
        assert snapshot.state.value("messages", []) == WROTE[:done]
    steps = [snapshot.step for snapshot in history]
    assert steps == sorted(set(steps))  # one checkpoint a step, in order


def test_a_merged_step_checkpoint_can_be_resumed_from_as_a_fork() -> None:
    """(Beyond the Java test) the checkpoint after ``subgraph-step_1`` is an ordinary one of
    the parent: invoking from it (SPEC §4, a fork) runs the rest of the child, then step_3."""
    app = checkpoint_with_merge_subgraph()
    thread = RunnableConfig(thread_id="audit-checkpoint-merge-fork")
    app.invoke(GraphInput.no_args(), thread)
    after_child_step_1 = next(
        snapshot for snapshot in app.get_state_history(thread) if snapshot.node == "subgraph-step_1"
    )
    forked = [output.node for output in app.stream(None, after_child_step_1.config)]
    assert forked == ["subgraph-step_2", "subgraph-step_3", "step_3", END]
    assert app.get_state(thread).state.value("messages") == WROTE
