"""SPEC §9 merged subgraphs: ``add_node(id, StateGraph)`` merges the child's nodes as
``"<id>-<node>"``.

The first tests port LangGraph4j's ``StateSubGraphTest`` and the merged-subgraph tests of its
``SubGraphTest`` (their graphs and asserted values; names through SPEC's tables:
``SubGraphNode.formatId("B", "B1")`` is ``"B-B1"``, ``MessagesStateGraph<String>`` a graph with a
``messages`` appender, ``ProcessedNodesEdgesAndConfig``'s nodes and edge sources the compiled
spec's nodes and the sources of its edges).  Where the two files disagree (``SubGraphTest`` is
the older: no ``B-__END__`` bridge in ``testMergeSubgraph04``), ``StateSubGraphTest`` is followed.
``tests/test_subgraph_merged_rules.py`` pins what SPEC §9 and ``graph/_merge.py`` add.
"""

from __future__ import annotations

from typing import Any

import pytest

from langgraph_celery import (
    END,
    START,
    AgentState,
    Channels,
    Command,
    CompileConfig,
    CompiledGraph,
    GraphDefinitionError,
    GraphInput,
    RunnableConfig,
    Send,
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


def checkpoint_with_merge_subgraph() -> CompiledGraph:
    """``testCheckpointWithMergeSubgraph``'s graphs: ``step_1 -> step_2 -> subgraph(step_1 ->
    step_2 -> step_3) -> step_3``, the child merged."""
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
    return (
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


MERGED_RAN = ["step_1", "step_2", "subgraph-step_1", "subgraph-step_2", "subgraph-step_3", "step_3"]
MERGED_WROTE = ["step1", "step2", "child:step1", "child:step2", "child:step3", "step3"]


def test_checkpoint_with_merge_subgraph() -> None:
    parent = checkpoint_with_merge_subgraph()
    thread = RunnableConfig(thread_id="checkpoint-merge")
    outputs = list(parent.stream(GraphInput.no_args(), thread))
    assert outputs[-1].state.value("messages") == MERGED_WROTE
    # one thread, one state: the parent's checkpoints hold the child's steps
    history = parent.get_state_history(thread)
    assert history[0].state.value("messages") == MERGED_WROTE
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


def _sending_child(command: bool) -> StateGraph:
    """fan -> Send("w", {"i": 1}) and Send("w", {"i": 2}) -> w: from a route, or a command
    node's Command; the child's own node id, as when it runs alone."""
    sends = [Send("w", {"i": 1}), Send("w", {"i": 2})]
    child = StateGraph({"acc": Channels.appender()})
    child.add_node("w", lambda s: {"acc": [s["i"]]}).add_edge("w", END)
    if command:
        child.add_node("fan", lambda s: Command(goto=sends), destinations=["w"])
    else:
        child.add_node("fan", lambda s: {}).add_conditional_edges("fan", lambda s: sends)
    return child.add_edge(START, "fan")


@pytest.mark.parametrize("command", [False, True], ids=["route", "command"])
@pytest.mark.parametrize("nested", [False, True])
def test_a_merged_childs_sends_name_its_own_nodes(command: bool, nested: bool) -> None:
    alone = _sending_child(command).compile().invoke({})
    assert alone.value("acc") == [1, 2]
    child = _sending_child(command)
    if nested:
        child = StateGraph({"acc": Channels.appender()}).add_node("inner", child)
        child.add_edge(START, "inner").add_edge("inner", END)
    graph = StateGraph({"acc": Channels.appender()}).add_node("B", child)
    merged = graph.add_edge(START, "B").add_edge("B", END).compile()
    outputs = [output.node for output in merged.stream({})]
    assert merged.invoke({}).value("acc") == [1, 2]
    prefix = "B-inner-" if nested else "B-"
    assert outputs == ["__START__", f"{prefix}fan", f"{prefix}w", f"{prefix}w", "__END__"]


def test_checkpoint_with_merge_subgraph_stores_one_checkpoint_per_merged_step() -> None:
    app = checkpoint_with_merge_subgraph()
    thread = RunnableConfig(thread_id="audit-checkpoint-merge")
    outputs = list(app.stream(GraphInput.no_args(), thread))
    assert [output.node for output in outputs] == [START, *MERGED_RAN, END]
    assert outputs[-1].state.value("messages") == MERGED_WROTE

    history = list(reversed(app.get_state_history(thread)))  # oldest first
    assert len(history) == 1 + len(MERGED_RAN)
    assert [snapshot.node for snapshot in history] == [START, *MERGED_RAN]
    assert [snapshot.next for snapshot in history] == [
        *[(node,) for node in MERGED_RAN],
        (),
    ]
    for done, snapshot in enumerate(history):
        assert snapshot.state.value("messages", []) == MERGED_WROTE[:done]
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
    assert app.get_state(thread).state.value("messages") == MERGED_WROTE
