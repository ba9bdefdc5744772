"""SPEC §9 merged subgraphs: ``add_node(id, StateGraph)`` merges the child's nodes as
``"<id>-<node>"``.

The first tests port LangGraph4j's ``StateSubGraphTest`` and the merged-subgraph tests of its
``SubGraphTest`` (their graphs and asserted values; names through SPEC's tables:
``SubGraphNode.formatId("B", "B1")`` is ``"B-B1"``, ``MessagesStateGraph<String>`` a graph with a
``messages`` appender, ``ProcessedNodesEdgesAndConfig``'s nodes and edge sources the compiled
spec's nodes and the sources of its edges).  Where the two files disagree (``SubGraphTest`` is
the older: no ``B-__END__`` bridge in ``testMergeSubgraph04``), ``StateSubGraphTest`` is followed.
The rest pin what SPEC §9 and ``graph/_merge.py`` add: joins, hooks, timeouts, nesting,
schemas, errors.
"""

from __future__ import annotations

import operator
import re
from pathlib import Path
from typing import Any

import pytest

from langgraph_celery import (
    END,
    START,
    AgentState,
    Channel,
    Channels,
    Command,
    CompileConfig,
    CompiledGraph,
    GraphDefinitionError,
    GraphInput,
    NodeError,
    RunnableConfig,
    StateGraph,
)
from langgraph_celery.checkpoint import MemorySaver


def messages_graph() -> StateGraph:
    """LangGraph4j's ``MessagesStateGraph<String>``."""
    return StateGraph({"messages": Channels.appender()})


def make_node(message: str) -> Any:
    return lambda state: {"messages": message}


def execute(app: CompiledGraph, input: Any, config: RunnableConfig | None = None) -> list[str]:
    """The nodes of a run's outputs, in order (LangGraph4j's ``_execute``)."""
    return [output.node for output in app.stream(input, config or RunnableConfig())]


def sources(app: CompiledGraph) -> set[str]:
    """The sources of the compiled graph's edges (``processed.edges().elements``)."""
    spec = app.spec
    found = set(spec.edges) | set(spec.conditional) | set(spec.destinations)
    return found | {source for join in spec.joins for source in join.sources}


def child_b1_b2() -> StateGraph:
    return (
        messages_graph()
        .add_node("B1", make_node("B1"))
        .add_node("B2", make_node("B2"))
        .add_edge(START, "B1")
        .add_edge("B1", "B2")
        .add_edge("B2", END)
    )


def child_b1_b2_c() -> StateGraph:
    """B1 -> B2 -(c)-> C -> END, or B2 -(END)-> END."""
    return (
        messages_graph()
        .add_node("B1", make_node("B1"))
        .add_node("B2", make_node("B2"))
        .add_node("C", make_node("subgraph(C)"))
        .add_edge(START, "B1")
        .add_edge("B1", "B2")
        .add_conditional_edges("B2", lambda state: "c", {END: END, "c": "C"})
        .add_edge("C", END)
    )


# -- StateSubGraphTest ----------------------------------------------------------------------------


def test_state_subgraph_simple() -> None:
    def step(message: str) -> Any:
        return lambda state, config: {"messages": message}

    child = (
        messages_graph()
        .add_node("child:step_1", step("child:step1"))
        .add_node("child:step_2", step("child:step2"))
        .add_node("child:step_3", step("child:step3"))
        .add_edge(START, "child:step_1")
        .add_edge("child:step_1", "child:step_2")
        .add_edge("child:step_2", "child:step_3")
        .add_edge("child:step_3", END)
    )
    parent = (
        messages_graph()
        .add_node("step_1", step("step1"))
        .add_node("step_2", step("step2"))
        .add_node("step_3", step("step3"))
        .add_node("subgraph", child)
        .add_edge(START, "step_1")
        .add_edge("step_1", "step_2")
        .add_edge("step_2", "subgraph")
        .add_edge("subgraph", "step_3")
        .add_edge("step_3", END)
        .compile()
    )
    outputs = list(parent.stream(GraphInput.no_args(), RunnableConfig()))
    assert outputs[-1].state.value("messages") == [
        "step1",
        "step2",
        "child:step1",
        "child:step2",
        "child:step3",
        "step3",
    ]


def test_merge_subgraph_01() -> None:
    parent = (
        messages_graph()
        .add_node("A", make_node("A"))
        .add_node("B", child_b1_b2())
        .add_node("C", make_node("C"))
        .add_edge(START, "A")
        .add_edge("A", "B")
        .add_edge("B", "C")
        .add_edge("C", END)
    )
    assert execute(parent.compile(), GraphInput.args({})) == [START, "A", "B-B1", "B-B2", "C", END]


def test_merge_subgraph_02() -> None:
    parent = (
        messages_graph()
        .add_node("A", make_node("A"))
        .add_node("B", child_b1_b2())
        .add_node("C", make_node("C"))
        .add_conditional_edges(START, lambda state: "a", {"a": "A", "b": "B"})
        .add_edge("A", "B")
        .add_edge("B", "C")
        .add_edge("C", END)
    )
    app = parent.compile()
    assert len(app.spec.nodes) == 4
    assert len(sources(app)) == 5
    assert app.spec.conditional[START].mapping == {"a": "A", "b": "B-B1"}
    assert execute(app, GraphInput.args({})) == [START, "A", "B-B1", "B-B2", "C", END]


def parent_03() -> StateGraph:
    return (
        messages_graph()
        .add_node("A", make_node("A"))
        .add_node("B", child_b1_b2_c())
        .add_node("C", make_node("C"))
        .add_conditional_edges(START, lambda state: "a", {"a": "A", "b": "B"})
        .add_edge("A", "B")
        .add_edge("B", "C")
        .add_edge("C", END)
    )


def test_merge_subgraph_03() -> None:
    app = parent_03().compile()
    assert len(app.spec.nodes) == 5
    assert len(sources(app)) == 6
    # the child's conditional edge to END continues with B's edge to C
    assert app.spec.conditional["B-B2"].mapping == {END: "C", "c": "B-C"}
    assert execute(app, GraphInput.args({})) == [START, "A", "B-B1", "B-B2", "B-C", "C", END]


def test_merge_subgraph_03_with_interruption() -> None:
    parent = parent_03()
    saver = MemorySaver()
    thread = RunnableConfig(thread_id="merge-03")
    everything = [START, "A", "B-B1", "B-B2", "B-C", "C", END]

    with_saver = parent.compile(CompileConfig(checkpoint_saver=saver))
    assert execute(with_saver, GraphInput.args({}), thread) == everything

    after_b1 = parent.compile(CompileConfig(checkpoint_saver=saver, interrupt_after=["B-B1"]))
    assert execute(after_b1, GraphInput.args({}), thread) == [START, "A", "B-B1"]
    assert execute(after_b1, GraphInput.resume(), thread) == ["B-B2", "B-C", "C", END]

    after_b2 = parent.compile(CompileConfig(checkpoint_saver=saver, interrupt_after=["B-B2"]))
    assert execute(after_b2, GraphInput.args({}), thread) == [START, "A", "B-B1", "B-B2"]
    assert execute(after_b2, GraphInput.resume(), thread) == ["B-C", "C", END]

    before_c = parent.compile(CompileConfig(checkpoint_saver=saver, interrupt_before=["C"]))
    assert execute(before_c, GraphInput.args({}), thread) == [START, "A", "B-B1", "B-B2", "B-C"]
    assert execute(before_c, GraphInput.resume(), thread) == ["C", END]

    before_b = parent.compile(CompileConfig(checkpoint_saver=saver, interrupt_before=["B"]))
    assert execute(before_b, GraphInput.args({}), thread) == [START, "A"]
    assert before_b.get_state(thread).next == ("B-B1",)
    assert execute(before_b, GraphInput.resume(), thread) == ["B-B1", "B-B2", "B-C", "C", END]

    # interruption after a merged subgraph is refused, naming what to use instead
    with pytest.raises(GraphDefinitionError, match="merged subgraph 'B'") as refused:
        parent.compile(CompileConfig(checkpoint_saver=saver, interrupt_after=["B"]))
    assert "interrupt_before=['C']" in str(refused.value)


def parent_04(with_c1: bool = False) -> StateGraph:
    graph = (
        messages_graph()
        .add_node("A", make_node("A"))
        .add_node("B", child_b1_b2_c())
        .add_node("C", make_node("C"))
    )
    if with_c1:
        graph.add_node("C1", make_node("C1")).add_edge("C1", "C")
    return (
        graph.add_conditional_edges(START, lambda state: "a", {"a": "A", "b": "B"})
        .add_edge("A", "B")
        .add_conditional_edges("B", lambda state: "c", {"c": "C1" if with_c1 else "C", "a": "A"})
        .add_edge("C", END)
    )


def test_merge_subgraph_04() -> None:
    app = parent_04().compile()
    assert len(app.spec.nodes) == 6
    assert len(sources(app)) == 7
    # B's conditional edge leaves from the END bridge, where the child's END edges lead
    assert app.spec.conditional["B-__END__"].mapping == {"c": "C", "a": "A"}
    assert app.spec.edges["B-C"] == ("B-__END__",)
    assert execute(app, GraphInput.args({})) == [
        START,
        "A",
        "B-B1",
        "B-B2",
        "B-C",
        "B-__END__",
        "C",
        END,
    ]


def test_merge_subgraph_04_with_interruption() -> None:
    parent = parent_04(with_c1=True)
    saver = MemorySaver()
    thread = RunnableConfig(thread_id="merge-04")
    tail = ["B-__END__", "C1", "C", END]

    with_saver = parent.compile(CompileConfig(checkpoint_saver=saver))
    assert execute(with_saver, GraphInput.args({}), thread) == [
        START,
        "A",
        "B-B1",
        "B-B2",
        "B-C",
        *tail,
    ]

    after_b1 = parent.compile(CompileConfig(checkpoint_saver=saver, interrupt_after=["B-B1"]))
    assert execute(after_b1, GraphInput.args({}), thread) == [START, "A", "B-B1"]
    assert execute(after_b1, GraphInput.resume(), thread) == ["B-B2", "B-C", *tail]

    after_b2 = parent.compile(CompileConfig(checkpoint_saver=saver, interrupt_after=["B-B2"]))
    assert execute(after_b2, GraphInput.args({}), thread) == [START, "A", "B-B1", "B-B2"]
    assert execute(after_b2, GraphInput.resume(), thread) == ["B-C", *tail]

    before_c = parent.compile(CompileConfig(checkpoint_saver=saver, interrupt_before=["C"]))
    assert execute(before_c, GraphInput.args({}), thread) == [
        START,
        "A",
        "B-B1",
        "B-B2",
        "B-C",
        "B-__END__",
        "C1",
    ]
    assert execute(before_c, GraphInput.resume(), thread) == ["C", END]

    before_b = parent.compile(CompileConfig(checkpoint_saver=saver, interrupt_before=["B"]))
    assert execute(before_b, GraphInput.args({}), thread) == [START, "A"]
    assert execute(before_b, GraphInput.resume(), thread) == ["B-B1", "B-B2", "B-C", *tail]

    with pytest.raises(GraphDefinitionError, match="interrupt_after names the merged subgraph"):
        parent.compile(CompileConfig(checkpoint_saver=saver, interrupt_after=["B"]))


def test_subgraph_with_conditional_start_edge() -> None:
    child = (
        messages_graph()
        .add_node("B1", make_node("B1"))
        .add_node("B2", make_node("B2"))
        .add_node("B3", make_node("B3"))
        .add_conditional_edges(START, lambda state: "route1", {"route1": "B1", "route2": "B2"})
        .add_edge("B1", "B3")
        .add_edge("B2", "B3")
        .add_edge("B3", END)
    )
    parent = (
        messages_graph()
        .add_node("A", make_node("A"))
        .add_node("B", child)
        .add_node("C", make_node("C"))
        .add_edge(START, "A")
        .add_edge("A", "B")
        .add_edge("B", "C")
        .add_edge("C", END)
    )
    app = parent.compile()
    assert len(app.spec.nodes) == 6
    assert {"B-__START__", "B-B1", "B-B2", "B-B3"} <= set(app.spec.nodes)
    assert execute(app, GraphInput.args({})) == [
        START,
        "A",
        "B-__START__",
        "B-B1",
        "B-B3",
        "C",
        END,
    ]


def test_checkpoint_with_merge_subgraph() -> None:
    child = (
        messages_graph()
        .add_node("step_1", make_node("child:step1"))
        .add_node("step_2", make_node("child:step2"))
        .add_node("step_3", make_node("child:step3"))
        .add_edge(START, "step_1")
        .add_edge("step_1", "step_2")
        .add_edge("step_2", "step_3")
        .add_edge("step_3", END)
    )
    parent = (
        messages_graph()
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
    thread = RunnableConfig(thread_id="checkpoint-merge")
    outputs = list(parent.stream(GraphInput.no_args(), thread))
    expected = ["step1", "step2", "child:step1", "child:step2", "child:step3", "step3"]
    assert outputs[-1].state.value("messages") == expected
    # one thread, one state: the parent's checkpoints hold the child's steps
    history = parent.get_state_history(thread)
    assert history[0].state.value("messages") == expected
    assert "subgraph-step_2" in [snapshot.node for snapshot in history]


class WrapCallLogHook:
    """StateSubGraphTest's ``WrapCallLogHook`` (a node and an edge wrap hook that log), whose
    log is asserted here."""

    def __init__(self) -> None:
        self.log: list[str] = []

    def node(self, node: str, state: AgentState, config: RunnableConfig, action: Any) -> Any:
        self.log.append(f"node start: {node}")
        result = action(state, config)
        self.log.append(f"node end: {node}")
        return result

    def edge(self, source: str, state: AgentState, config: RunnableConfig, action: Any) -> Any:
        self.log.append(f"edge start from: {source}")
        result = action(state, config)
        self.log.append(f"edge end: {result}")
        return result


def test_subgraph_with_conditional_start_and_end_edges() -> None:
    child_hook, parent_hook = WrapCallLogHook(), WrapCallLogHook()
    child = (
        messages_graph()
        .add_wrap_call_node_hook(child_hook.node)
        .add_wrap_call_edge_hook(child_hook.edge)
        .add_node("B1", make_node("B1"))
        .add_node("B2", make_node("B2"))
        .add_node("B3", make_node("B3"))
        .add_node("B4", make_node("B4"))
        .add_conditional_edges(START, lambda state: "B1", ["B1", "B2"])
        .add_edge("B1", "B3")
        .add_edge("B2", "B3")
        .add_edge("B3", "B4")
        .add_edge("B4", END)
    )
    parent = (
        messages_graph()
        .add_wrap_call_node_hook(parent_hook.node)
        .add_wrap_call_edge_hook(parent_hook.edge)
        .add_node("A", make_node("A"))
        .add_node("B", child)
        .add_node("C", make_node("C"))
        .add_node("D", make_node("D"))
        .add_node("E", make_node("E"))
        .add_edge(START, "A")
        .add_edge("A", "B")
        .add_conditional_edges("B", lambda state: "C", ["C", "D", "E"])
        .add_edge("C", END)
        .add_edge("D", END)
        .add_edge("E", END)
    )
    app = parent.compile()
    spec = app.spec
    assert len(spec.nodes) == 10
    assert {"B-__START__", "B-B1", "B-B2", "B-B3", "B-B4", "B-__END__"} <= set(spec.nodes)
    # the START bridge carries the child's conditional entry, the END bridge B's exit
    assert {"B-B1", "B-B2"} <= set(spec.conditional["B-__START__"].mapping.values())
    assert {"C", "D", "E"} <= set(spec.conditional["B-__END__"].mapping.values())
    assert execute(app, GraphInput.args({})) == [
        START,
        "A",
        "B-__START__",
        "B-B1",
        "B-B3",
        "B-B4",
        "B-__END__",
        "C",
        END,
    ]
    # the child's hooks wrap the child's nodes and routes only; the parent's wrap all
    merged = ["B-B1", "B-B3", "B-B4"]
    assert [e for e in child_hook.log if e.startswith("node start")] == [
        f"node start: {node}" for node in merged
    ]
    assert child_hook.log.count("edge start from: B-__START__") == 1
    assert [e for e in parent_hook.log if e.startswith("node start")] == [
        f"node start: {node}" for node in ["A", "B-__START__", *merged, "B-__END__", "C"]
    ]
    assert [e for e in parent_hook.log if e.startswith("edge start")] == [
        "edge start from: B-__START__",
        "edge start from: B-__END__",
    ]


# -- SubGraphTest (the parts StateSubGraphTest does not repeat) ----------------------------------


def test_merge_subgraph_05_command_node_interruptions() -> None:
    graph = (
        messages_graph()
        .add_node("B1", make_node("B1"))
        .add_node("B2", make_node("B2"))
        .add_node(
            "command_node",
            lambda state, config: Command(goto="B2", update={"messages": "go_to_command"}),
            {"B2": "B2"},
        )
        .add_edge(START, "B1")
        .add_edge("B1", "command_node")
        .add_edge("B2", END)
    )
    thread = RunnableConfig(thread_id="thread_2")
    after = graph.compile(
        CompileConfig(checkpoint_saver=MemorySaver(), interrupt_after=["command_node"])
    )
    assert execute(after, {}, thread) == [START, "B1", "command_node"]
    assert execute(after, GraphInput.resume(), thread) == ["B2", END]
    before = graph.compile(
        CompileConfig(checkpoint_saver=MemorySaver(), interrupt_before=["command_node"])
    )
    assert execute(before, {}, thread) == [START, "B1"]
    assert execute(before, GraphInput.resume(), thread) == ["command_node", "B2", END]


def test_checkpoint_with_command_subgraph() -> None:
    child = (
        messages_graph()
        .add_node("step_1", make_node("child:step1"))
        .add_node("step_2", make_node("child:step2"))
        .add_node("step_3", make_node("child:step3"))
        .add_node("step_4", make_node("child:step4"))
        .add_node(
            "command_node",
            lambda state, config: Command(goto="step_4", update={"messages": "go to command"}),
            {"step_4": "step_4", "step_3": "step_3"},
        )
        .add_edge(START, "step_1")
        .add_edge("step_1", "step_2")
        .add_edge("step_2", "command_node")
        .add_edge("step_3", END)
        .add_edge("step_4", END)
    )
    parent = (
        messages_graph()
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
    assert "package" in parent.get_graph("plantuml").content
    assert "subgraph" in parent.get_graph("mermaid").content
    assert parent.spec.destinations["subgraph-command_node"] == {
        "step_4": "subgraph-step_4",
        "step_3": "subgraph-step_3",
    }
    state = parent.invoke({}, RunnableConfig(thread_id="command-subgraph"))
    assert state.value("messages") == [
        "step1",
        "step2",
        "child:step1",
        "child:step2",
        "go to command",
        "child:step4",
        "step3",
    ]


# -- what SPEC §9 and graph/_merge.py add ----------------------------------------------------------


def test_nested_merged_subgraphs_three_levels() -> None:
    inner = messages_graph().add_node("x", make_node("x")).add_edge(START, "x").add_edge("x", END)
    middle = (
        messages_graph()
        .add_node("m", make_node("m"))
        .add_node("inner", inner)
        .add_edge(START, "m")
        .add_edge("m", "inner")
        .add_edge("inner", END)
    )
    outer = (
        messages_graph()
        .add_node("middle", middle)
        .add_node("z", make_node("z"))
        .add_edge(START, "middle")
        .add_edge("middle", "z")
        .add_edge("z", END)
    )
    saver = MemorySaver()
    app = outer.compile(CompileConfig(checkpoint_saver=saver))
    thread = RunnableConfig(thread_id="nested")
    assert execute(app, {}, thread) == [START, "middle-m", "middle-inner-x", "z", END]
    assert app.get_state(thread).state.value("messages") == ["m", "x", "z"]
    # interrupts name merged ids at any depth, and a nested subgraph's id
    for before in ["middle-inner-x", "middle-inner"]:
        stopping = outer.compile(CompileConfig(checkpoint_saver=saver, interrupt_before=[before]))
        other = RunnableConfig(thread_id=f"nested-{before}")
        assert execute(stopping, {}, other) == [START, "middle-m"]
        assert stopping.get_state(other).next == ("middle-inner-x",)
        assert execute(stopping, GraphInput.resume(), other) == ["middle-inner-x", "z", END]


def test_joins_fan_out_and_timeouts_carry_over() -> None:
    child = (
        messages_graph()
        .add_node("a", make_node("a"))
        .add_node("b", make_node("b"))
        .add_node("j", make_node("j"), timeout=5)
        .add_edge(START, "a")
        .add_edge(START, "b")
        .add_edge(["a", "b"], "j")
        .add_edge("j", END)
    )
    parent = (
        messages_graph()
        .add_node("sub", child)
        .add_node("after", make_node("after"))
        .add_edge(START, "sub")
        .add_edge("sub", "after")
        .add_edge("after", END)
    )
    app = parent.compile()
    assert app.spec.edges[START] == ("sub-a", "sub-b")
    assert [(j.sources, j.target) for j in app.spec.joins] == [(("sub-a", "sub-b"), "sub-j")]
    assert app.spec.timeouts == {"sub-j": 5.0}
    assert app.invoke({}).value("messages") == ["a", "b", "j", "after"]


def test_a_join_on_a_merged_subgraph_waits_for_its_end_bridge() -> None:
    parent = (
        messages_graph()
        .add_node("sub", child_b1_b2())
        .add_node("side", make_node("side"))
        .add_node("done", make_node("done"))
        .add_edge(START, "sub")
        .add_edge(START, "side")
        .add_edge(["sub", "side"], "done")
        .add_edge("done", END)
    )
    app = parent.compile()
    assert [(j.sources, j.target) for j in app.spec.joins] == [(("sub-__END__", "side"), "done")]
    assert app.invoke({}).value("messages") == ["B1", "side", "B2", "done"]


def test_a_conditional_edge_without_mapping_may_name_the_subgraph() -> None:
    parent = (
        messages_graph()
        .add_node("route", make_node("route"))
        .add_node("sub", child_b1_b2())
        .add_edge(START, "route")
        .add_conditional_edges("route", lambda state: "sub" if len(state["messages"]) < 2 else END)
        .add_edge("sub", "route")
    )
    messages = parent.compile().invoke({}).value("messages")
    assert messages == ["route", "B1", "B2", "route"]


def test_hooks_of_the_parent_that_name_the_subgraph_apply_to_its_nodes() -> None:
    seen: list[str] = []
    parent = (
        messages_graph()
        .add_node("sub", child_b1_b2())
        .add_edge(START, "sub")
        .add_edge("sub", END)
        .add_before_call_node_hook("sub", lambda node, state, config: seen.append(node))
    )
    parent.compile().invoke({})
    assert seen == ["sub-B1", "sub-B2"]


def test_the_childs_channels_join_the_parents_schema() -> None:
    child = (
        StateGraph({"log": Channel(operator.add, default=list)})
        .add_node("c", lambda state: {"log": ["c"], "messages": "from child"})
        .add_edge(START, "c")
        .add_edge("c", END)
    )
    parent = messages_graph().add_node("sub", child).add_edge(START, "sub").add_edge("sub", END)
    app = parent.compile()
    assert set(app.spec.schema) == {"messages", "log"}
    state = app.invoke({"log": ["in"]})
    assert state.value("log") == ["in", "c"]
    assert state.value("messages") == ["from child"]


def test_a_conflicting_reducer_names_the_key() -> None:
    child = (
        StateGraph({"messages": Channel(operator.add, default=list)})
        .add_node("c", make_node("c"))
        .add_edge(START, "c")
        .add_edge("c", END)
    )
    parent = messages_graph().add_node("sub", child).add_edge(START, "sub").add_edge("sub", END)
    with pytest.raises(GraphDefinitionError, match=r"state key 'messages'.*subgraph 'sub'"):
        parent.compile()


@pytest.mark.parametrize(
    ("build", "message"),
    [
        (
            lambda g, c: g.add_node("sub", c, ["x"]),
            "node 'sub' is a merged subgraph: its exits are its edges to END",
        ),
        (
            lambda g, c: g.add_node("sub", c, timeout=3),
            "node 'sub' is a merged subgraph: give its nodes their timeouts",
        ),
        (lambda g, c: g.add_node("sub", g), "cannot be merged into itself"),
    ],
)
def test_add_node_with_a_subgraph_refuses(build: Any, message: str) -> None:
    graph = messages_graph()
    build(graph, child_b1_b2())
    graph.add_edge(START, "sub").add_edge("sub", END)
    with pytest.raises(GraphDefinitionError, match=message):
        graph.compile()


def test_errors_inside_the_subgraph_name_it() -> None:
    broken = messages_graph().add_node("x", make_node("x")).add_edge(START, "x")
    parent = messages_graph().add_node("sub", broken).add_edge(START, "sub").add_edge("sub", END)
    with pytest.raises(GraphDefinitionError, match="subgraph 'sub': node 'x' has no outgoing"):
        parent.compile()


def test_a_merged_id_that_the_parent_has_already_is_refused() -> None:
    parent = (
        messages_graph()
        .add_node("B-B1", make_node("x"))
        .add_node("B", child_b1_b2())
        .add_edge(START, "B-B1")
        .add_edge("B-B1", "B")
        .add_edge("B", END)
    )
    with pytest.raises(GraphDefinitionError, match="subgraph 'B' adds node 'B-B1'"):
        parent.compile()


def test_a_merged_id_longer_than_ids_may_be_is_refused() -> None:
    long_name = "n" * 253  # a node id may have 255 characters: "sub-" makes it 257
    child = messages_graph().add_node(long_name, make_node("x"))
    child.add_edge(START, long_name).add_edge(long_name, END)
    parent = messages_graph().add_node("sub", child).add_edge(START, "sub").add_edge("sub", END)
    with pytest.raises(GraphDefinitionError, match="subgraph 'sub': merged node id is 257"):
        parent.compile()


def test_an_edge_to_the_subgraph_must_exist_as_built() -> None:
    parent = messages_graph().add_node("B", child_b1_b2()).add_edge(START, "B")
    with pytest.raises(GraphDefinitionError, match="node 'B' has no outgoing edge"):
        parent.compile()


def test_a_failing_merged_node_is_named_by_its_merged_id() -> None:
    def boom(state: AgentState) -> None:
        raise RuntimeError("no")

    child = messages_graph().add_node("x", boom).add_edge(START, "x").add_edge("x", END)
    parent = messages_graph().add_node("sub", child).add_edge(START, "sub").add_edge("sub", END)
    with pytest.raises(NodeError) as caught:
        parent.compile().invoke({})
    assert caught.value.node_id == "sub-x"


def test_a_command_node_of_the_child_going_to_end_continues_with_the_parent() -> None:
    child = (
        messages_graph()
        .add_node(
            "decide",
            lambda state: Command(goto=END, update={"messages": "decided"}),
            [END, "other"],
        )
        .add_node("other", make_node("other"))
        .add_edge(START, "decide")
        .add_edge("other", END)
    )
    parent = (
        messages_graph()
        .add_node("sub", child)
        .add_node("after", make_node("after"))
        .add_edge(START, "sub")
        .add_edge("sub", "after")
        .add_edge("after", END)
    )
    app = parent.compile()
    assert app.spec.destinations["sub-decide"] == {END: "after", "other": "sub-other"}
    assert execute(app, {}) == [START, "sub-decide", "after", END]
    assert app.invoke({}).value("messages") == ["decided", "after"]


def test_a_parent_that_fans_out_after_a_child_ending_by_label_gets_an_end_bridge() -> None:
    parent = (
        messages_graph()
        .add_node("sub", child_b1_b2_c())
        .add_node("x", make_node("x"))
        .add_node("y", make_node("y"))
        .add_edge(START, "sub")
        .add_edge("sub", "x")
        .add_edge("sub", "y")
        .add_edge("x", END)
        .add_edge("y", END)
    )
    app = parent.compile()
    # B2's label END names one node: the bridge, which fans out to x and y
    assert app.spec.conditional["sub-B2"].mapping == {END: "sub-__END__", "c": "sub-C"}
    assert app.spec.edges["sub-__END__"] == ("x", "y")
    assert app.spec.edges["sub-C"] == ("sub-__END__",)
    assert execute(app, {}) == [START, "sub-B1", "sub-B2", "sub-C", "sub-__END__", "x", "y", END]


def test_a_label_into_a_child_that_fans_out_gets_a_start_bridge() -> None:
    child = (
        messages_graph()
        .add_node("a", make_node("a"))
        .add_node("b", make_node("b"))
        .add_edge(START, "a")
        .add_edge(START, "b")
        .add_edge("a", END)
        .add_edge("b", END)
    )
    parent = (
        messages_graph()
        .add_node("go", lambda state: Command(goto="sub"), ["sub", END])
        .add_node("sub", child)
        .add_edge(START, "go")
        .add_edge("sub", END)
    )
    app = parent.compile()
    assert app.spec.destinations["go"] == {"sub": "sub-__START__", END: END}
    assert app.spec.edges["sub-__START__"] == ("sub-a", "sub-b")
    assert execute(app, {}) == [START, "go", "sub-__START__", "sub-a", "sub-b", END]
    # the plain edge from START needs no bridge: it fans out itself
    plain = messages_graph().add_node("sub", child).add_edge(START, "sub").add_edge("sub", END)
    assert plain.compile().spec.edges[START] == ("sub-a", "sub-b")


def test_the_parents_wrap_hooks_are_outermost_and_its_before_hooks_run_after_the_childs() -> None:
    log: list[str] = []

    def wrap(name: str) -> Any:
        def hook(node: str, state: AgentState, config: RunnableConfig, action: Any) -> Any:
            log.append(f"{name} enters {node}")
            result = action(state, config)
            log.append(f"{name} leaves {node}")
            return result

        return hook

    def before(name: str) -> Any:
        return lambda node, state, config: log.append(f"{name} before {node}")

    child = messages_graph().add_node("x", lambda state: log.append("x runs"))
    child.add_edge(START, "x").add_edge("x", END)
    child.add_wrap_call_node_hook(wrap("child")).add_before_call_node_hook(before("child"))
    parent = messages_graph().add_node("sub", child).add_edge(START, "sub").add_edge("sub", END)
    parent.add_wrap_call_node_hook(wrap("parent")).add_before_call_node_hook(before("parent"))
    parent.compile().invoke({})
    # before hooks run last-added first (the child's were added to the parent after its own),
    # wrap hooks nest first-added outermost (SPEC §6)
    assert log == [
        "child before sub-x",
        "parent before sub-x",
        "parent enters sub-x",
        "child enters sub-x",
        "x runs",
        "child leaves sub-x",
        "parent leaves sub-x",
    ]


def test_the_example_of_docs_subgraphs_md_runs_as_its_comments_say() -> None:
    text = (Path(__file__).resolve().parent.parent / "docs" / "subgraphs.md").read_text()
    code = re.search(r"```python\n(.*?)```", text, re.DOTALL)
    assert code is not None
    namespace: dict[str, Any] = {}
    exec(compile(code.group(1), "docs/subgraphs.md", "exec"), namespace)
    app, config = namespace["app"], namespace["config"]
    assert app.get_state(config).state["log"] == ["plan", "draft", "approved by ana", "send"]
    nodes = [snapshot.node for snapshot in reversed(app.get_state_history(config))]
    wanted = ("plan", "review-__START__", "review-draft", "review-approve", "send")
    assert list(dict.fromkeys(node for node in nodes if node in wanted)) == list(wanted)
    assert "# ['__START__', 'plan', 'review-__START__', 'review-draft']" in code.group(1)
