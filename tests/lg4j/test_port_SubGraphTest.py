"""Port of LangGraph4j's ``SubGraphTest`` (``langgraph4j-core``): what
``tests/test_subgraph_merged.py`` and ``tests/test_subgraph_compiled.py`` leave out.

Those files port every method of ``SubGraphTest`` (and of ``StateSubGraphTest``, its newer
twin), resuming with ``GraphInput.resume()``.  ``SubGraphTest`` itself resumes with a ``null``
input: its ``_execute(workflow, null)`` calls ``workflow.stream(null)``, and LangGraph4j's
``stream(Map inputs, ...)`` reads a ``null`` map as ``GraphResume`` (in LangGraph, likewise,
``invoke(None, config)`` continues from the thread's checkpoint).  Here that is
``stream(None, config)``, which continues the thread's pending run (docs/choices.md).  Java
runs without a thread id; SPEC §4 asks for one.
"""

from __future__ import annotations

from typing import Any

from langgraph_celery import (
    END,
    START,
    Channels,
    Command,
    CompileConfig,
    CompiledGraph,
    RunnableConfig,
    StateGraph,
)
from langgraph_celery.checkpoint import MemorySaver


def messages_graph() -> StateGraph:
    """``MessagesStateGraph<String>``."""
    return StateGraph({"messages": Channels.appender()})


def make_node(message: str) -> Any:
    """``_makeNode(id)``."""
    return lambda state: {"messages": message}


def execute(app: CompiledGraph, input: Any, config: RunnableConfig) -> list[str]:
    """``_execute(workflow, input)``: the nodes of the run's outputs."""
    return [output.node for output in app.stream(input, config)]


def merge_subgraph_05() -> StateGraph:
    return (
        messages_graph()
        .add_node("B1", make_node("B1"))
        .add_node("B2", make_node("B2"))
        .add_node(
            "command_node",
            lambda state, config: Command("B2", {"messages": "go_to_command"}),
            {"B2": "B2"},
        )
        .add_edge(START, "B1")
        .add_edge("B1", "command_node")
        .add_edge("B2", END)
    )


def test_merge_subgraph_05_resumed_with_a_null_input() -> None:
    """``testMergeSubgraph05``: interrupted after, then before, the command node; each resumed
    with ``_execute(compile, null)``."""
    graph = merge_subgraph_05()
    thread = RunnableConfig(thread_id="thread_2")
    after = graph.compile(
        CompileConfig(checkpoint_saver=MemorySaver(), interrupt_after=["command_node"])
    )
    assert execute(after, {}, thread) == [START, "B1", "command_node"]
    assert execute(after, None, thread) == ["B2", END]
    before = graph.compile(
        CompileConfig(checkpoint_saver=MemorySaver(), interrupt_before=["command_node"])
    )
    assert execute(before, {}, thread) == [START, "B1"]
    assert execute(before, None, thread) == ["command_node", "B2", END]


def test_merge_subgraph_03_with_interruption_resumed_with_a_null_input() -> None:
    """``testMergeSubgraph03WithInterruption``, its "INTERRUPT AFTER B1" and "INTERRUPT
    BEFORE SUBGRAPH B" parts, resumed with ``_execute(interruptAfterB1, null)``."""
    child = (
        messages_graph()
        .add_node("B1", make_node("B1"))
        .add_node("B2", make_node("B2"))
        .add_node("C", make_node("subgraph(C)"))
        .add_edge(START, "B1")
        .add_edge("B1", "B2")
        .add_conditional_edges("B2", lambda state: "c", {END: END, "c": "C"})
        .add_edge("C", END)
    )
    parent = (
        messages_graph()
        .add_node("A", make_node("A"))
        .add_node("B", child)
        .add_node("C", make_node("C"))
        .add_conditional_edges(START, lambda state: "a", {"a": "A", "b": "B"})
        .add_edge("A", "B")
        .add_edge("B", "C")
        .add_edge("C", END)
    )
    saver = MemorySaver()
    thread = RunnableConfig(thread_id="merge-03-null")
    after_b1 = parent.compile(CompileConfig(checkpoint_saver=saver, interrupt_after=["B-B1"]))
    assert execute(after_b1, {}, thread) == [START, "A", "B-B1"]
    assert execute(after_b1, None, thread) == ["B-B2", "B-C", "C", END]
    before_b = parent.compile(CompileConfig(checkpoint_saver=saver, interrupt_before=["B"]))
    assert execute(before_b, {}, thread) == [START, "A"]
    assert execute(before_b, None, thread) == ["B-B1", "B-B2", "B-C", "C", END]
