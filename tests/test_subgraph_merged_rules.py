"""SPEC §9 merged subgraphs: what ``graph/_merge.py`` adds to LangGraph4j's reference cases
(``tests/test_subgraph_merged.py``): nesting, joins, fan-outs and their bridges, command nodes,
hooks, timeouts, schemas, ids and errors."""

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
    Command,
    CompileConfig,
    GraphDefinitionError,
    GraphInput,
    NodeError,
    RunnableConfig,
    StateGraph,
)
from langgraph_celery.checkpoint import MemorySaver
from test_subgraph_merged import child_b1_b2, child_b1_b2_c, execute, make_node, messages_graph


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
