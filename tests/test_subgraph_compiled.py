"""Compiled subgraphs (SPEC §9), in process: ``add_node(id, CompiledGraph)``.

Ported from LangGraph4j's ``CompiledSubGraphTest`` (its graphs and asserted values, names
through SPEC §1 and docs/names.md), the compiled-subgraph cases of ``SubGraphTest``
(``testCheckpointWithSubgraph``, ``testCheckpointWithCommandSubgraph``, with the child compiled)
and ``GraphExecutorTest.compiledSubgraphsInheritTheExecutor``; then what SPEC §9 adds.
Every test method of the newest ``CompiledSubGraphTest`` is ported; its Java-only dimensions
are not: the JSON/BINARY ``StateSerializer`` variants of ``InterruptionTypeEnum`` (one
``JsonSerializer`` here) and ``FileSystemSaver`` (the ``saver`` fixture's savers instead).
"""

from __future__ import annotations

import asyncio
import contextvars
import operator
import threading
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Annotated, Any, TypedDict

import pytest

from langgraph_celery import (
    END,
    MARK_FOR_REMOVAL,
    START,
    AgentState,
    Channels,
    Command,
    CompileConfig,
    CompiledGraph,
    GraphInput,
    GraphInterrupt,
    GraphRecursionError,
    InterruptionMetadata,
    NodeError,
    NodeOutput,
    RemoveByHash,
    ReplaceAllWith,
    RunnableConfig,
    Send,
    StateGraph,
    StreamMode,
)
from langgraph_celery.checkpoint import BaseCheckpointSaver, MemorySaver, RunIndex, RunStatus
from langgraph_celery.graph._subgraph_state import changes

SCHEMA = {"messages": Channels.appender()}


def messages(state: Any) -> list[str]:
    return list(state.value("messages") if isinstance(state, AgentState) else state["messages"])


def node(
    node_id: str, attribute: str | None = None, graph_id: str | None = None
) -> Callable[..., Any]:
    """LangGraph4j's ``NodeActionBuilder``: checks the runtime ids, appends ``[id<attr>]``."""

    def action(state: AgentState, config: RunnableConfig) -> dict[str, Any]:
        assert config.node_id == node_id
        if graph_id is not None:
            assert config.graph_id == graph_id
        value = state.value(attribute, "") if attribute is not None else ""
        return {"messages": f"[{node_id}{value}]"}

    return action


RESUME = "LG4J_RESUME"  # (LangGraph4j's ``State.RESUME``)


class InterruptibleNode:
    """``CustomNodeAction.Interruptable``: asks to stop unless the state says ``LG4J_RESUME``."""

    def __init__(self, node_id: str) -> None:
        self.node_id = node_id

    def interrupt(
        self, node_id: str, state: AgentState, config: RunnableConfig
    ) -> InterruptionMetadata | None:
        if not state.value(RESUME, False):
            return InterruptionMetadata(node_id, state)
        return None

    def __call__(self, state: AgentState, config: RunnableConfig) -> dict[str, Any]:
        assert config.node_id == self.node_id
        return {"messages": f"[{self.node_id}]"}


def sub_graph_with_interruption(
    saver: BaseCheckpointSaver, as_interruptible: bool
) -> CompiledGraph:
    return (
        StateGraph(SCHEMA)
        .add_edge(START, "NODE3.1")
        .add_node("NODE3.1", node("NODE3.1"))
        .add_node("NODE3.2", node("NODE3.2"))
        .add_node("NODE3.3", InterruptibleNode("NODE3.3") if as_interruptible else node("NODE3.3"))
        .add_node("NODE3.4", node("NODE3.4", "newAttribute"))
        .add_edge("NODE3.1", "NODE3.2")
        .add_edge("NODE3.2", "NODE3.3")
        .add_edge("NODE3.3", "NODE3.4")
        .add_edge("NODE3.4", END)
        .compile(
            CompileConfig(
                checkpoint_saver=saver, interrupt_after=() if as_interruptible else ("NODE3.2",)
            )
        )
    )


def chain(
    names: list[tuple[str, Any]], config: CompileConfig | None = None, schema: Any = SCHEMA
) -> CompiledGraph:
    graph = StateGraph(schema)
    for name, action in names:
        graph.add_node(name, action)
    previous = START
    for name, _ in names:
        graph.add_edge(previous, name)
        previous = name
    graph.add_edge(previous, END)
    return graph.compile(config)


def last(stream: Any) -> NodeOutput:
    outputs = list(stream)
    return outputs[-1]


# -- CompiledSubGraphTest ---------------------------------------------------------------------


def test_compiled_subgraph_simple() -> None:
    """testCompiledSubGraphSimple; the child's outputs stream with its node ids, and the
    before/after hooks of both graphs run (the parent's around the subgraph node)."""
    hooked: list[str] = []

    def logging(graph: StateGraph, who: str) -> StateGraph:
        graph.add_before_call_node_hook(lambda n, s, c: hooked.append(f"{who}:before:{n}"))
        graph.add_after_call_node_hook(lambda n, s, c, r: hooked.append(f"{who}:after:{n}") or r)
        return graph

    def step(value: str) -> Callable[..., Any]:
        return lambda state, config: {"messages": value}

    child = (
        logging(StateGraph(SCHEMA), "child")
        .add_node("child:step_1", step("child:step1"))
        .add_node("child:step_2", step("child:step2"))
        .add_node("child:step_3", step("child:step3"))
        .add_edge(START, "child:step_1")
        .add_edge("child:step_1", "child:step_2")
        .add_edge("child:step_2", "child:step_3")
        .add_edge("child:step_3", END)
        .compile()
    )
    parent = (
        logging(StateGraph(SCHEMA), "parent")
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
    assert messages(outputs[-1].state) == [
        "step1",
        "step2",
        "child:step1",
        "child:step2",
        "child:step3",
        "step3",
    ]
    assert [o.node for o in outputs] == [
        START,
        "step_1",
        "step_2",
        "child:step_1",
        "child:step_2",
        "child:step_3",
        "subgraph",
        "step_3",
        END,
    ]
    assert "parent:before:subgraph" in hooked and "parent:after:subgraph" in hooked
    assert hooked.index("parent:before:subgraph") < hooked.index("child:before:child:step_1")
    assert hooked.index("child:after:child:step_3") < hooked.index("parent:after:subgraph")


FINAL_SHARED = [
    "[NODE1]",
    "[NODE2]",
    "[NODE3.1]",
    "[NODE3.2]",
    "[NODE3.3]",
    "[NODE3.4<myNewValue>]",
    "[NODE4]",
    "[NODE5<myNewValue>]",
]


@pytest.mark.parametrize("as_interruptible", [False, True], ids=["declared", "interruptible"])
@pytest.mark.parametrize("mode", [StreamMode.VALUES, StreamMode.SNAPSHOTS])
def test_compiled_subgraph_interruption_sharing_saver(
    saver: BaseCheckpointSaver, as_interruptible: bool, mode: StreamMode
) -> None:
    """testCompiledSubGraphInterruptionSharingSaver."""
    sub_graph = sub_graph_with_interruption(saver, as_interruptible)
    parent = chain(
        [
            ("NODE1", node("NODE1")),
            ("NODE2", node("NODE2")),
            ("NODE3", sub_graph),
            ("NODE4", node("NODE4")),
            ("NODE5", node("NODE5", "newAttribute")),
        ],
        CompileConfig(checkpoint_saver=saver),
    )
    config = RunnableConfig(thread_id="thread01", stream_mode=mode)
    stream = parent.stream(GraphInput.no_args(), config)
    output = last(stream)
    assert not output.is_end()
    assert output.node == "NODE3.2"  # the subgraph's output, with its node id
    assert messages(output.state) == ["[NODE1]", "[NODE2]", "[NODE3.1]", "[NODE3.2]"]
    assert stream.result.is_interruption_metadata()
    interruption = stream.result.as_interruption_metadata()
    inner = "NODE3.3" if as_interruptible else "NODE3.2"
    assert interruption.node_id == inner
    assert interruption.metadata["subgraph_path"] == ["NODE3", inner]
    assert messages(interruption.state) == messages(output.state)  # the subgraph's

    update: dict[str, Any] = {"newAttribute": "<myNewValue>"}
    if as_interruptible:
        update[RESUME] = True
    stream = parent.stream(GraphInput.resume(update), config)
    output = last(stream)
    assert output.is_end()
    assert messages(output.state) == FINAL_SHARED
    assert messages(parent.get_state(config).state) == FINAL_SHARED


@pytest.mark.parametrize("as_interruptible", [False, True], ids=["declared", "interruptible"])
@pytest.mark.parametrize("mode", [StreamMode.VALUES, StreamMode.SNAPSHOTS])
def test_compiled_subgraph_interruption_with_different_saver(
    saver: BaseCheckpointSaver, as_interruptible: bool, mode: StreamMode
) -> None:
    """testCompiledSubGraphInterruptionWithDifferentSaver: the child has a MemorySaver of its
    own; its checkpoints live on the child thread ``<thread>/<node>``."""
    child_saver = MemorySaver()
    sub_graph = sub_graph_with_interruption(child_saver, as_interruptible)
    parent = chain(
        [
            ("NODE1", node("NODE1")),
            ("NODE2", node("NODE2")),
            ("NODE3", sub_graph),
            ("NODE4", node("NODE4", "newAttribute")),
            ("NODE5", node("NODE5")),
        ],
        CompileConfig(checkpoint_saver=saver),
    )
    config = RunnableConfig(thread_id="thread02", stream_mode=mode)
    stream = parent.stream(GraphInput.no_args(), config)
    output = last(stream)
    assert not output.is_end()
    assert messages(output.state) == ["[NODE1]", "[NODE2]", "[NODE3.1]", "[NODE3.2]"]
    assert stream.result.is_interruption_metadata()
    parked = child_saver.get("thread02/NODE3")
    assert parked is not None and parked.next == ("NODE3.3",)
    assert saver.get("thread02/NODE3") is None  # the child's checkpoints are its saver's

    update: dict[str, Any] = {"newAttribute": "<myNewValue>"}
    if as_interruptible:
        update[RESUME] = True
    output = last(parent.stream(GraphInput.resume(update), config))
    assert output.is_end()
    assert messages(output.state) == [
        "[NODE1]",
        "[NODE2]",
        "[NODE3.1]",
        "[NODE3.2]",
        "[NODE3.3]",
        "[NODE3.4<myNewValue>]",
        "[NODE4<myNewValue>]",
        "[NODE5]",
    ]


@pytest.mark.parametrize("update_as_node2", [False, True], ids=["resume", "update_state"])
@pytest.mark.parametrize("mode", list(StreamMode))
def test_compiled_subgraph_interruption_using_graph_interrupt(
    saver: BaseCheckpointSaver, mode: StreamMode, update_as_node2: bool
) -> None:
    """testCompiledSubGraphInterruptionUsingException: NODE3.2 raises (here GraphInterrupt,
    its reason naming the subgraph and the node from ``node_path``) until the subgraph is
    resumed; the interruption carries the subgraph's state.  The parent is resumed at once
    (the older version of the test), or first updated as NODE2 with the interruption's state,
    the newest version's "METHOD 2".  (LangGraph4j's node asks ``config.isResumeSubgraph()``;
    here the resume's update sets ``resume_subgraph``, as the older version's state did.)"""

    def node_with_exception(state: AgentState, config: RunnableConfig) -> dict[str, Any]:
        if state.value("resume_subgraph", False):
            return {"messages": f"[{config.node_id}]"}
        root, last = config.node_path[0], config.node_path[-1]
        raise GraphInterrupt(
            f"interruption in subgraph: {root} on node: {last}", {"path": list(config.node_path)}
        )

    sub_graph = chain(
        [
            ("NODE3.1", node("NODE3.1")),
            ("NODE3.2", node_with_exception),
            ("NODE3.3", node("NODE3.3")),
            ("NODE3.4", node("NODE3.4", "newAttribute")),
        ],
        CompileConfig(checkpoint_saver=saver),
    )
    parent = chain(
        [
            ("NODE1", node("NODE1")),
            ("NODE2", node("NODE2")),
            ("NODE3", sub_graph),
            ("NODE4", node("NODE4")),
            ("NODE5", node("NODE5", "newAttribute")),
        ],
        CompileConfig(checkpoint_saver=saver),
    )
    config = RunnableConfig(thread_id="thread03", stream_mode=mode)
    stream = parent.stream({}, config)
    list(stream)
    interruption = stream.result.as_interruption_metadata()
    assert interruption.node_id == "NODE3.2"
    assert interruption.reason == "interruption in subgraph: NODE3 on node: NODE3.2"
    assert interruption.metadata["path"] == ["NODE3", "NODE3.2"]
    assert interruption.metadata["subgraph_path"] == ["NODE3", "NODE3.2"]
    # the subgraph's state where it stopped, as in LangGraph4j (the parent's has no NODE3.1)
    assert messages(interruption.state) == ["[NODE1]", "[NODE2]", "[NODE3.1]"]
    assert messages(parent.get_state(config).state) == ["[NODE1]", "[NODE2]"]
    assert parent.get_state(config).next == ("NODE3",)

    update = {"resume_subgraph": True, "newAttribute": "<myNewValue>"}
    if not update_as_node2:
        assert messages(parent.invoke(GraphInput.resume(update), config)) == FINAL_SHARED
        return
    config = parent.update_state(config, interruption.state.data, as_node="NODE2")
    assert parent.get_state(config).next == ("NODE3",)
    resumed = parent.invoke(GraphInput.resume(update), config)
    # SPEC §2: the appender keeps duplicates (LangGraph4j's drops them), so the merged-back
    # messages stay; the child resumes with them added and its list becomes the parent's
    assert messages(resumed) == [
        "[NODE1]",
        "[NODE2]",
        "[NODE3.1]",
        "[NODE1]",
        "[NODE2]",
        "[NODE3.1]",
        *FINAL_SHARED[3:],
    ]


@pytest.mark.parametrize("mode", list(StreamMode))
def test_nested_compiled_subgraph_issue216(mode: StreamMode) -> None:
    """testNestedCompiledSubgraphFormIssue216: three levels, no saver."""
    sub_sub_graph = chain([("foo1", node("foo1")), ("foo2", node("foo2")), ("foo3", node("foo3"))])
    sub_graph = chain(
        [("bar1", node("bar1")), ("subgraph2", sub_sub_graph), ("bar2", node("bar2"))]
    )
    parent = chain([("main1", node("main1")), ("subgraph1", sub_graph), ("main2", node("main2"))])
    output = last(parent.stream({}, RunnableConfig(stream_mode=mode)))
    assert output.is_end()
    assert messages(output.state) == [
        "[main1]",
        "[bar1]",
        "[foo1]",
        "[foo2]",
        "[foo3]",
        "[bar2]",
        "[main2]",
    ]


@pytest.mark.parametrize("graph_id", [None, "graph01"], ids=["without_id", "with_id"])
def test_compiled_subgraph_tracking(saver: BaseCheckpointSaver, graph_id: str | None) -> None:
    """testCompiledSubGraphTracking: each node sees its graph's id; ``node_path`` is the root
    graph's id (when it has one), the enclosing subgraph nodes, then the node."""
    paths: dict[str, tuple[str, ...]] = {}

    def tracked(node_id: str, owner: str | None) -> Callable[..., Any]:
        inner = node(node_id, graph_id=owner)

        def action(state: AgentState, config: RunnableConfig) -> dict[str, Any]:
            paths[node_id] = config.node_path
            return inner(state, config)

        return action

    sub_sub_graph = chain(
        [(f"foo{i}", tracked(f"foo{i}", "subSubGraph")) for i in (1, 2, 3)],
        CompileConfig(checkpoint_saver=saver, graph_id="subSubGraph"),
    )
    sub_graph = chain(
        [
            ("bar1", tracked("bar1", "subGraph")),
            ("subgraph2", sub_sub_graph),
            ("bar2", tracked("bar2", "subGraph")),
        ],
        CompileConfig(checkpoint_saver=saver, graph_id="subGraph"),
    )
    parent = chain(
        [
            ("main1", tracked("main1", graph_id)),
            ("subgraph1", sub_graph),
            ("main2", tracked("main2", graph_id)),
        ],
        CompileConfig(checkpoint_saver=saver, graph_id=graph_id),
    )
    output = last(parent.stream(None, RunnableConfig(thread_id="tracking")))
    assert output.is_end()
    assert messages(output.state) == [
        "[main1]",
        "[bar1]",
        "[foo1]",
        "[foo2]",
        "[foo3]",
        "[bar2]",
        "[main2]",
    ]
    root = (graph_id,) if graph_id else ()
    assert paths["main1"] == (*root, "main1")
    assert paths["bar1"] == (*root, "subgraph1", "bar1")
    assert paths["foo2"] == (*root, "subgraph1", "subgraph2", "foo2")
    # (a child compiled without a graph_id is "<parent graph_id>/<node>", as on Celery)
    anonymous = chain([("leaf", lambda s, c: {"messages": c.graph_id})])
    named = chain([("sub", anonymous)], CompileConfig(graph_id="named"))
    assert messages(named.invoke({})) == ["named/sub"]
    # the child threads, derived from the parent's thread and the subgraph node ids
    assert saver.get("tracking/subgraph1") is not None
    assert messages(saver.get("tracking/subgraph1/subgraph2").values)[-1] == "[foo3]"


def test_compiled_subgraph_hooks(saver: BaseCheckpointSaver) -> None:
    """testCompiledSubGraphHookTest: a wrap hook on each of three levels."""
    seen: list[str] = []

    def wrap(node_id: str, state: Any, config: RunnableConfig, action: Any) -> Any:
        seen.append(f"[{node_id}] start")
        result = action(state, config)
        seen.append(f"[{node_id}] end")
        return result

    def hooked(names: list[tuple[str, Any]], graph_id: str | None = None) -> CompiledGraph:
        graph = StateGraph(SCHEMA).add_wrap_call_node_hook(wrap)
        previous = START
        for name, action in names:
            graph.add_node(name, action).add_edge(previous, name)
            previous = name
        graph.add_edge(previous, END)
        return graph.compile(CompileConfig(checkpoint_saver=saver, graph_id=graph_id))

    sub_sub_graph = hooked([(f"foo{i}", node(f"foo{i}")) for i in (1, 2, 3)])
    sub_graph = hooked(
        [("bar1", node("bar1")), ("subgraph2", sub_sub_graph), ("bar2", node("bar2"))]
    )
    parent = hooked(
        [("main1", node("main1")), ("subgraph1", sub_graph), ("main2", node("main2"))], "graph01"
    )
    state = parent.invoke(None, RunnableConfig(thread_id="hooks"))
    assert messages(state) == [
        "[main1]",
        "[bar1]",
        "[foo1]",
        "[foo2]",
        "[foo3]",
        "[bar2]",
        "[main2]",
    ]
    assert seen.index("[subgraph1] start") < seen.index("[bar1] start")
    assert seen.index("[subgraph2] start") < seen.index("[foo1] start")
    assert seen.index("[foo3] end") < seen.index("[subgraph2] end") < seen.index("[bar2] start")
    assert seen.index("[bar2] end") < seen.index("[subgraph1] end") < seen.index("[main2] start")


@pytest.mark.parametrize(
    "clear",
    [MARK_FOR_REMOVAL, ReplaceAllWith([]), RemoveByHash("Log from nodeA")],
    ids=["mark_for_removal", "replace_all_with", "remove_by_hash"],
)
@pytest.mark.parametrize("resume_option", ["update_state", "graph_resume"])
def test_issue326(saver: BaseCheckpointSaver, resume_option: str, clear: Any) -> None:
    """testIssue326: the resume's update (clearing the logs) reaches the parked subgraph: the
    update itself, merged into the child's state (which holds what nodeA appended, where the
    parent's does not), whichever way it clears the list (LangGraph4j's MARK_FOR_RESET)."""
    schema = {"logs": Channels.appender()}
    sub_graph = (
        StateGraph(schema)
        .add_node("nodeA", lambda state, config: {"logs": ["Log from nodeA"]})
        .add_node("nodeB", lambda state, config: {"logs": ["Log from nodeB"]})
        .add_edge("nodeA", "nodeB")
        .add_edge(START, "nodeA")
        .add_edge("nodeB", END)
        .compile(CompileConfig(interrupt_after=("nodeA",), checkpoint_saver=saver))
    )
    parent = (
        StateGraph(schema)
        .add_node("subgraph", sub_graph)
        .add_edge(START, "subgraph")
        .add_edge("subgraph", END)
        .compile(CompileConfig(checkpoint_saver=saver))
    )
    config = RunnableConfig(thread_id="test-thread")
    list(parent.stream(GraphInput.no_args(), config))
    updates = {"logs": clear}
    if resume_option == "graph_resume":
        result = parent.invoke(GraphInput.resume(updates), config)
    else:
        new_config = parent.update_state(config, updates)
        result = parent.invoke(GraphInput.resume(), new_config)
    assert result.value("logs") == ["Log from nodeB"]


def test_each_update_of_the_parent_reaches_the_parked_child_once(
    saver: BaseCheckpointSaver,
) -> None:
    """A child parked twice: each resume's update, and an update_state's between, reach the
    child's state once, in order."""
    schema = {"logs": Channels.appender()}
    child = (
        StateGraph(schema)
        .add_node("A", lambda s: {"logs": ["A"]})
        .add_node("B", lambda s: {"logs": ["B"]})
        .add_node("C", lambda s: {"logs": ["C"]})
        .add_edge(START, "A")
        .add_edge("A", "B")
        .add_edge("B", "C")
        .add_edge("C", END)
        .compile(CompileConfig(interrupt_after=("A", "B"), checkpoint_saver=saver))
    )
    parent = (
        StateGraph(schema)
        .add_node("p", lambda s: {"logs": ["p"]})
        .add_node("sub", child)
        .add_edge(START, "p")
        .add_edge("p", "sub")
        .add_edge("sub", END)
        .compile(CompileConfig(checkpoint_saver=saver))
    )
    config = RunnableConfig(thread_id="twice")
    assert parent.invoke({"logs": ["in"]}, config).value("logs") == ["in", "p", "A"]
    resumed = parent.invoke(GraphInput.resume({"logs": "u1"}), config)
    assert resumed.value("logs") == ["in", "p", "A", "u1", "B"]
    parent.update_state(config, {"logs": "u2"})
    final = parent.invoke(GraphInput.resume({"logs": RemoveByHash("A")}), config)
    assert final.value("logs") == ["in", "p", "u1", "B", "u2", "C"]
    assert parent.get_state(config).state.value("logs") == final.value("logs")


def test_a_childs_removal_keeps_a_siblings_append_of_the_same_step(
    saver: BaseCheckpointSaver,
) -> None:
    """The child's changes reach the parent as a node's update would (SPEC §9): a removal as
    ``RemoveByHash``, not the child's whole list, so a sibling's append merged before it in the
    same step stays (as with a plain node doing the removal)."""
    schema = {"logs": Channels.appender()}

    def parent(remover: Any) -> CompiledGraph:
        return (
            StateGraph(schema)
            .add_node("start", lambda s: {})
            .add_node("sib", lambda s: {"logs": ["sib"]})
            .add_node("sub", remover)
            .add_edge(START, "start")
            .add_edge("start", "sub")
            .add_edge("start", "sib")
            .add_edge(["sub", "sib"], END)
            .compile(CompileConfig(checkpoint_saver=saver))
        )

    def remove(state: Any) -> dict[str, Any]:
        return {"logs": [RemoveByHash("seed"), "y"]}

    child = (
        StateGraph(schema)
        .add_node("rm", remove)
        .add_edge(START, "rm")
        .add_edge("rm", END)
        .compile()
    )
    expected = parent(remove).invoke({"logs": ["seed", "x"]}, RunnableConfig(thread_id="plain"))
    assert expected.value("logs") == ["x", "sib", "y"]
    got = parent(child).invoke({"logs": ["seed", "x"]}, RunnableConfig(thread_id="child"))
    assert got.value("logs") == expected.value("logs")


@pytest.mark.parametrize(
    ("before", "after", "update"),
    [
        (["a", "b"], ["a", "b", "c"], ["c"]),
        (["a", "b", "c"], ["a", "c", "d"], [RemoveByHash("b"), "d"]),
        (["a", "b", "a"], ["b", "a"], [RemoveByHash("a")]),
        (["a", "b", "a"], ["a", "b"], ReplaceAllWith(["a", "b"])),  # (not by first occurrences)
        (["a", "b"], ["b", "a"], [RemoveByHash("a"), "a"]),
    ],
)
def test_an_appenders_changes_are_removals_then_appends_when_they_can_be(
    before: list[str], after: list[str], update: Any
) -> None:
    schema = {"logs": Channels.appender()}
    assert changes(schema, {"logs": before}, {"logs": after}) == {"logs": update}


# -- SubGraphTest and GraphExecutorTest, with the child compiled ------------------------------


def make_node(value: str) -> Callable[..., Any]:
    return lambda state: {"messages": value}


def test_checkpoint_with_subgraph() -> None:
    """SubGraphTest.testCheckpointWithSubgraph, the child compiled with its own saver."""
    child = chain(
        [(f"step_{i}", make_node(f"child:step{i}")) for i in (1, 2, 3)],
        CompileConfig(checkpoint_saver=MemorySaver()),
    )
    parent = chain(
        [
            ("step_1", make_node("step1")),
            ("step_2", make_node("step2")),
            ("subgraph", child),
            ("step_3", make_node("step3")),
        ],
        CompileConfig(checkpoint_saver=MemorySaver()),
    )
    state = last(parent.stream({}, RunnableConfig(thread_id="t"))).state
    assert messages(state) == [
        "step1",
        "step2",
        "child:step1",
        "child:step2",
        "child:step3",
        "step3",
    ]


def test_checkpoint_with_command_subgraph() -> None:
    """SubGraphTest.testCheckpointWithCommandSubgraph, the child compiled."""
    child = (
        StateGraph(SCHEMA)
        .add_node("step_1", make_node("child:step1"))
        .add_node("step_2", make_node("child:step2"))
        .add_node("step_3", make_node("child:step3"))
        .add_node("step_4", make_node("child:step4"))
        .add_node(
            "command_node",
            lambda state: Command(goto="step_4", update={"messages": "go to command"}),
            destinations={"step_4": "step_4", "step_3": "step_3"},
        )
        .add_edge(START, "step_1")
        .add_edge("step_1", "step_2")
        .add_edge("step_2", "command_node")
        .add_edge("step_3", END)
        .add_edge("step_4", END)
        .compile()
    )
    parent = chain(
        [
            ("step_1", make_node("step1")),
            ("step_2", make_node("step2")),
            ("subgraph", child),
            ("step_3", make_node("step3")),
        ],
        CompileConfig(checkpoint_saver=MemorySaver()),
    )
    state = parent.invoke({}, RunnableConfig(thread_id="t"))
    assert messages(state) == [
        "step1",
        "step2",
        "child:step1",
        "child:step2",
        "go to command",
        "child:step4",
        "step3",
    ]


CONTEXT: contextvars.ContextVar[str] = contextvars.ContextVar("CONTEXT", default="")


def test_compiled_subgraphs_inherit_the_executor() -> None:
    """GraphExecutorTest.compiledSubgraphsInheritTheExecutor: the caller's executor for a node
    (``parallel_executors``) and its context (contextvars) reach the child's node."""
    seen: list[str] = []
    pool = ThreadPoolExecutor(1, thread_name_prefix="lg4j-test-executor")

    def recording(state: AgentState) -> dict[str, Any]:
        seen.append(f"n1@{threading.current_thread().name}|{CONTEXT.get()}")
        return {}

    recording_graph = chain([("n1", recording)])
    parent = (
        StateGraph()
        .add_node("sub", recording_graph)
        .add_edge(START, "sub")
        .add_edge("sub", END)
        .compile()
    )
    token = CONTEXT.set("caller-context")
    try:
        parent.invoke(GraphInput.no_args(), RunnableConfig(parallel_executors={"n1": pool}))
        asyncio.run(parent.ainvoke(None, RunnableConfig(parallel_executors={"n1": pool})))
    finally:
        CONTEXT.reset(token)
        pool.shutdown()
    assert len(seen) == 2
    for entry in seen:
        assert entry.startswith("n1@lg4j-test-executor") and entry.endswith("|caller-context")


# -- beyond LangGraph4j's tests ---------------------------------------------------------------


def test_updates_reach_the_parent_once() -> None:
    """What the child changed is the node's update: an appender is not doubled, beside a
    sibling writing the same key in the same step; plain keys and removals come through."""
    child = chain(
        [
            ("c1", lambda s: {"messages": "c1", "plain": "set", "gone": MARK_FOR_REMOVAL}),
            ("c2", lambda s: {"messages": ["c2", "c3"]}),
        ]
    )
    parent = (
        StateGraph(SCHEMA)
        .add_node("a", lambda s: {"messages": "a"})
        .add_node("sub", child)
        .add_node("sibling", lambda s: {"messages": "sibling"})
        .add_node("z", lambda s: {"messages": "z"})
        .add_edge(START, "a")
        .add_edge("a", "sub")
        .add_edge("a", "sibling")
        .add_edge(["sub", "sibling"], "z")
        .add_edge("z", END)
        .compile()
    )
    state = parent.invoke(
        {"gone": 1, "plain": "old"}, RunnableConfig(stream_mode=StreamMode.UPDATES)
    )
    assert messages(state) == ["a", "c1", "c2", "c3", "sibling", "z"]
    assert state.value("plain") == "set" and "gone" not in state
    updates = {
        o.node: o.update for o in parent.stream({}, RunnableConfig(stream_mode=StreamMode.UPDATES))
    }
    assert updates["sub"]["messages"] == ["c1", "c2", "c3"]


def test_config_is_inherited() -> None:
    """The caller's recursion limit and metadata apply inside the child."""
    seen: list[Any] = []

    def loop(state: AgentState, config: RunnableConfig) -> dict[str, Any]:
        seen.append((config.metadata.get("user"), config.graph_id))
        return {"n": state.value("n", 0) + 1}

    child = (
        StateGraph()
        .add_node("loop", loop)
        .add_edge(START, "loop")
        .add_conditional_edges("loop", lambda s: END if s.value("n") >= 5 else "loop")
        .compile(CompileConfig(graph_id="child"))
    )
    parent = StateGraph().add_node("sub", child).add_edge(START, "sub").add_edge("sub", END)
    compiled = parent.compile()
    assert compiled.invoke({}, RunnableConfig(metadata={"user": "ada"})).value("n") == 5
    assert seen[0] == ("ada", "child")
    with pytest.raises(GraphRecursionError):
        compiled.invoke({}, RunnableConfig(recursion_limit=3))


def deep(saver: BaseCheckpointSaver | None, approve: bool) -> CompiledGraph:
    """Four levels: ``l1 -> l2 -> l3 -> l4``, the innermost node asking for approval."""

    def ask(state: AgentState, config: RunnableConfig) -> dict[str, Any]:
        if approve and not state.value("approved"):
            raise GraphInterrupt("approve?", {"path": list(config.node_path)})
        return {"messages": "leaf"}

    graph: CompiledGraph = chain([("leaf", ask)], CompileConfig(checkpoint_saver=saver))
    for level in (4, 3, 2):
        graph = chain(
            [(f"in{level}", make_node(f"in{level}")), (f"l{level}", graph)],
            CompileConfig(checkpoint_saver=saver),
        )
    return chain(
        [("in1", make_node("in1")), ("l1", graph), ("out", make_node("out"))],
        CompileConfig(checkpoint_saver=saver, graph_id="deep"),
    )


def test_four_levels_deep_park_and_resume(saver: BaseCheckpointSaver) -> None:
    graph = deep(saver, approve=True)
    config = RunnableConfig(thread_id="deep")
    stream = graph.stream({}, config)
    list(stream)
    interruption = stream.result.as_interruption_metadata()
    assert interruption.node_id == "leaf"
    assert interruption.metadata["subgraph_path"] == ["l1", "l2", "l3", "l4", "leaf"]
    assert interruption.metadata["path"] == ["deep", "l1", "l2", "l3", "l4", "leaf"]
    assert messages(interruption.state) == ["in1", "in2", "in3", "in4"]  # the innermost's
    assert graph.get_state(config).next == ("l1",)
    assert saver.get("deep/l1/l2/l3/l4") is not None
    state = graph.invoke(GraphInput.resume({"approved": True}), config)
    assert messages(state) == ["in1", "in2", "in3", "in4", "leaf", "out"]
    # a new run on the thread runs fresh child runs (the children's state is not merged twice)
    again = graph.invoke({"approved": True}, config)
    assert messages(again) == [*messages(state), "in1", "in2", "in3", "in4", "leaf", "out"]


def test_a_child_failure_fails_the_parent_and_resume_retries_it(
    saver: BaseCheckpointSaver,
) -> None:
    calls: list[str] = []

    def flaky(state: AgentState) -> dict[str, Any]:
        calls.append("flaky")
        if len(calls) == 1:
            raise RuntimeError("boom")
        return {"messages": "flaky"}

    child = chain(
        [("ok", make_node("ok")), ("flaky", flaky)], CompileConfig(checkpoint_saver=saver)
    )
    parent = chain([("sub", child)], CompileConfig(checkpoint_saver=saver))
    config = RunnableConfig(thread_id="flaky")
    with pytest.raises(NodeError, match="boom"):
        parent.invoke({}, config)
    assert messages(parent.invoke(GraphInput.resume(), config)) == ["ok", "flaky"]


def test_sends_to_a_subgraph_run_on_threads_of_their_own(saver: BaseCheckpointSaver) -> None:
    child = chain([("double", lambda s: {"messages": s.value("item") * 2})])
    parent = (
        StateGraph(SCHEMA)
        .add_node("sub", child)
        .add_conditional_edges(START, lambda s: [Send("sub", {"item": i}) for i in ("a", "b")])
        .add_edge("sub", END)
        .compile(CompileConfig(checkpoint_saver=saver))
    )
    state = parent.invoke({}, RunnableConfig(thread_id="sends"))
    assert sorted(messages(state)) == ["aa", "bb"]
    assert saver.get("sends/sub#send0") is not None and saver.get("sends/sub#send1") is not None


@pytest.mark.parametrize("interrupt", [False, True])
def test_cancelling_the_parent_cancels_the_subgraph(
    saver: BaseCheckpointSaver, interrupt: bool
) -> None:
    started = threading.Event()
    done: list[str] = []

    def waiting(name: str) -> Callable[..., Any]:
        async def action(state: Any) -> dict[str, Any]:
            started.set()
            await asyncio.sleep(0.3)
            done.append(name)
            return {"messages": name}

        return action

    child = chain(
        [("c1", waiting("c1")), ("c2", waiting("c2")), ("c3", waiting("c3"))],
        CompileConfig(checkpoint_saver=saver),
    )
    parent = chain(
        [("sub", child), ("after", make_node("after"))], CompileConfig(checkpoint_saver=saver)
    )
    config = RunnableConfig(thread_id="cancel")
    stream = parent.stream({}, config)
    canceller = threading.Thread(target=lambda: (started.wait(10), stream.cancel(interrupt)))
    canceller.start()
    outputs = list(stream)
    canceller.join()
    assert stream.is_cancelled() and stream.result.is_empty()
    assert "after" not in [o.node for o in outputs]
    assert len(done) <= 1 if not interrupt else done == []
    assert parent.get_state(config).next == ("sub",)
    # resumable: the child continues where it stopped
    state = parent.invoke(GraphInput.resume(), config)
    assert messages(state) == ["c1", "c2", "c3", "after"]
    # the parent's run and the child's (on the child thread) both ended completed
    assert isinstance(saver, RunIndex)
    runs = {run.thread_id: run.status for run in saver.list_runs()}
    assert runs == {"cancel": RunStatus.COMPLETED, "cancel/sub": RunStatus.COMPLETED}


class Typed(TypedDict):
    messages: Annotated[list[str], operator.add]
    total: Annotated[int, operator.add]
    seen: Annotated[dict[str, int], lambda old, new: {**old, **new}]
    tags: Annotated[list[str], lambda old, new: sorted(set(old) - {"drop"} | set(new))]


def test_keys_with_reducers_of_their_own_see_the_change_once() -> None:
    """LangGraph's ``Annotated[list, operator.add]`` and other reducers: the node's update is
    what the reducer turns the parent's value into the child's with (checked by calling it)."""

    def work(state: AgentState) -> dict[str, Any]:
        return {"messages": ["x"], "total": 5, "seen": {"child": 1}, "tags": ["drop", "new"]}

    child = StateGraph(Typed).add_node("work", work).add_edge(START, "work")
    parent = (
        StateGraph(Typed)
        .add_node("a", lambda s: {"messages": ["a"], "total": 2, "seen": {"a": 1}})
        .add_node("sub", child.add_edge("work", END).compile())
        .add_edge(START, "a")
        .add_edge("a", "sub")
        .add_edge("sub", END)
        .compile()
    )
    state = parent.invoke({"messages": [], "total": 0, "seen": {}, "tags": ["drop", "old"]})
    assert state.value("messages") == ["a", "x"]
    assert state.value("total") == 7
    assert state.value("seen") == {"a": 1, "child": 1}
    # (the child's value itself is the update this reducer turns the parent's into it with)
    assert state.value("tags") == ["drop", "new", "old"]


def test_a_child_without_a_saver_parks_and_resumes_on_the_parents(
    saver: BaseCheckpointSaver,
) -> None:
    """The child has no saver: its checkpoints go to the parent's, on the child thread."""

    def review(state: AgentState) -> dict[str, Any]:
        if not state.value("approved"):
            raise GraphInterrupt("approve?")
        return {"messages": "reviewed"}

    child = chain([("draft", make_node("draft")), ("review", review)])  # no saver
    parent = chain(
        [("plan", make_node("plan")), ("approval", child), ("act", make_node("act"))],
        CompileConfig(checkpoint_saver=saver, graph_id="agent"),
    )
    config = RunnableConfig(thread_id="nosaver")
    stream = parent.stream({}, config)
    list(stream)
    assert stream.result.as_interruption_metadata().node_id == "review"
    parked = saver.get("nosaver/approval")
    assert parked is not None and parked.next == ("review",)
    assert parked.values["messages"] == ["plan", "draft"]
    state = parent.invoke(GraphInput.resume({"approved": True}), config)
    assert messages(state) == ["plan", "draft", "reviewed", "act"]
    assert child.checkpoint_saver is None  # (the child graph itself still has none)


def test_a_new_child_run_on_a_used_child_thread_is_stored_as_it_ran(
    saver_factory: Callable[[], BaseCheckpointSaver],
) -> None:
    """A second run of the parent starts a fresh child run on the child thread the first one
    used; the child's first checkpoint starts from the child's initial state, not from the
    earlier child run's: what is stored (read through a new handle on the store) is what ran."""
    saver = saver_factory()
    child = chain([("c1", lambda s: {"messages": "c1"}), ("c2", lambda s: {"messages": "c2"})])
    parent = (
        StateGraph(SCHEMA)
        .add_node("a", lambda s: {"messages": "a"})
        .add_node("sub", child)
        .add_edge(START, "a")
        .add_edge("a", "sub")
        .add_edge("sub", END)
        .compile(CompileConfig(checkpoint_saver=saver))
    )
    config = RunnableConfig(thread_id="twice")
    first = parent.invoke({}, config)
    second = parent.invoke({}, config)
    assert messages(first) == ["a", "c1", "c2"]
    assert messages(second) == ["a", "c1", "c2"] * 2
    cold = saver_factory()
    stored = cold.get("twice")
    assert stored is not None and stored.values == second.data
    for checkpoint in cold.list("twice/sub"):  # every child checkpoint read back as it ran
        assert len(checkpoint.values.get("messages", [])) <= len(messages(second))
    child_latest = cold.get("twice/sub")
    assert child_latest is not None and child_latest.values["messages"] == messages(second)
