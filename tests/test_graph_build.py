"""SPEC §3: building a graph and what ``compile()`` refuses."""

from __future__ import annotations

from types import MappingProxyType
from typing import Any

import pytest
from pydantic import BaseModel

from langgraph_celery import (
    END,
    START,
    AgentState,
    Channels,
    CompileConfig,
    CompiledGraph,
    GraphDefinitionError,
    GraphInput,
    RunnableConfig,
    StateGraph,
)
from langgraph_celery.checkpoint import MemorySaver


def noop(state: AgentState) -> None:
    return None


def chain(*nodes: str) -> StateGraph:
    """START -> nodes[0] -> ... -> nodes[-1] -> END."""
    graph = StateGraph()
    previous = START
    for node in nodes:
        graph.add_node(node, noop)
        graph.add_edge(previous, node)
        previous = node
    graph.add_edge(previous, END)
    return graph


def path(graph: CompiledGraph, graph_input: Any = None, config: Any = None) -> list[str]:
    """The nodes a run of ``graph`` streams (``START`` and, once it completes, ``END`` too)."""
    return [output.node for output in graph.stream(graph_input, config)]


def compile_error(graph: StateGraph, config: CompileConfig | None = None) -> str:
    with pytest.raises(GraphDefinitionError) as info:
        graph.compile(config)
    return str(info.value)


# -- fluent builder -----------------------------------------------------------------------------


def test_builder_methods_return_the_builder() -> None:
    graph = StateGraph()
    assert graph.add_node("a", noop) is graph
    assert graph.add_node("b", noop) is graph
    assert graph.add_edge(START, "a") is graph
    assert graph.add_conditional_edges("a", lambda s: "b", {"b": "b"}) is graph
    assert graph.add_edge("b", END) is graph
    assert isinstance(graph.compile(), CompiledGraph)


def test_valid_graphs_compile_and_run() -> None:
    assert path(chain("a").compile()) == [START, "a", END]
    assert path(chain("a", "b", "c").compile(CompileConfig())) == [START, "a", "b", "c", END]


def test_definition_error_is_value_error() -> None:
    with pytest.raises(ValueError):
        StateGraph().add_node("a", noop).compile()


# -- each refusal names its culprit -------------------------------------------------------------


def test_no_edge_from_start() -> None:
    graph = StateGraph().add_node("a", noop).add_edge("a", END)
    assert "START" in compile_error(graph)


def test_empty_graph_has_no_edge_from_start() -> None:
    assert "START" in compile_error(StateGraph())


def test_edge_from_unknown_node() -> None:
    graph = chain("a").add_edge("ghost", "a")
    assert "'ghost'" in compile_error(graph)


def test_edge_to_unknown_node() -> None:
    graph = StateGraph().add_node("a", noop).add_edge(START, "a").add_edge("a", "phantom")
    assert "'phantom'" in compile_error(graph)


@pytest.mark.parametrize(
    ("source", "target", "expected"),
    [
        (5, END, "the source must be a node id, or a list of node ids to wait for, got int"),
        (None, END, "the source must be a node id, or a list of node ids to wait for, got None"),
        (START, ["a", "b"], "the target must be one node id, got list; to fan out, add one"),
    ],
)
def test_edge_of_the_wrong_type_is_named_at_compile(
    source: Any, target: Any, expected: str
) -> None:
    assert expected in compile_error(chain("a", "b").add_edge(source, target))


def test_edge_from_start_to_unknown_node() -> None:
    graph = StateGraph().add_edge(START, "nowhere")
    assert "'nowhere'" in compile_error(graph)


def test_join_from_unknown_node() -> None:
    graph = chain("a", "c").add_edge(["a", "missing_src"], "c")
    assert "'missing_src'" in compile_error(graph)


def test_join_to_unknown_node() -> None:
    graph = chain("a", "b").add_edge(["a", "b"], "missing_dst")
    assert "'missing_dst'" in compile_error(graph)


def test_node_added_twice() -> None:
    graph = chain("dup").add_node("dup", noop)
    message = compile_error(graph)
    assert "'dup'" in message
    assert "twice" in message


@pytest.mark.parametrize("reserved", [START, END])
def test_node_named_start_or_end(reserved: str) -> None:
    graph = chain("a").add_node(reserved, noop)
    assert repr(reserved) in compile_error(graph)


def test_node_with_no_outgoing_edge() -> None:
    graph = StateGraph().add_node("a", noop).add_node("dead_end", noop)
    graph.add_edge(START, "a").add_edge("a", "dead_end")
    message = compile_error(graph)
    assert "'dead_end'" in message
    assert "outgoing" in message


def test_unreachable_node() -> None:
    graph = chain("a").add_node("island", noop).add_edge("island", END)
    message = compile_error(graph)
    assert "'island'" in message
    assert "unreachable" in message


def test_node_reachable_only_from_unreachable_node_is_unreachable() -> None:
    graph = chain("a").add_node("island", noop).add_node("beach", noop)
    graph.add_edge("island", "beach").add_edge("beach", END)
    message = compile_error(graph)
    assert "unreachable" in message
    assert "'island'" in message or "'beach'" in message


def test_plain_and_conditional_edge_on_same_node() -> None:
    graph = chain("both", "b").add_conditional_edges("both", lambda s: "b", {"b": "b"})
    message = compile_error(graph)
    assert "'both'" in message
    assert "conditional" in message


def test_conditional_edge_from_unknown_node() -> None:
    graph = chain("a").add_conditional_edges("ghost", lambda s: "a", {"a": "a"})
    assert "'ghost'" in compile_error(graph)


def test_unknown_mapping_target() -> None:
    graph = StateGraph().add_node("a", noop).add_edge(START, "a")
    graph.add_conditional_edges("a", lambda s: "go", {"go": "nowhere_node", "stop": END})
    message = compile_error(graph)
    assert "'nowhere_node'" in message


def test_unknown_mapping_target_from_conditional_entry_point() -> None:
    graph = StateGraph().add_node("a", noop).add_edge("a", END)
    graph.add_conditional_edges(START, lambda s: "x", {"x": "a", "y": "missing_entry"})
    assert "'missing_entry'" in compile_error(graph)


@pytest.mark.parametrize(
    "add",
    [
        lambda g: g.add_edge(END, "a"),
        lambda g: g.add_edge(["a", END], "a"),
        lambda g: g.add_conditional_edges(END, lambda s: "a", {"a": "a"}),
    ],
    ids=["edge", "join", "conditional"],
)
def test_an_edge_leaving_end_is_refused_when_added(add: Any) -> None:
    """As in LangGraph4j (``addEdge(END, ...)`` throws), and the builder is left as it was."""
    graph = chain("a")
    with pytest.raises(GraphDefinitionError, match="END"):
        add(graph)
    assert path(graph.compile()) == [START, "a", END]


@pytest.mark.parametrize("mapping", [{}, []], ids=["mapping", "list"])
def test_a_conditional_edge_with_an_empty_mapping_is_refused_when_added(mapping: Any) -> None:
    graph = StateGraph().add_node("a", noop).add_edge(START, "a")
    with pytest.raises(GraphDefinitionError, match="'a' has an empty mapping"):
        graph.add_conditional_edges("a", lambda s: END, mapping)


@pytest.mark.parametrize("field", ["interrupt_before", "interrupt_after"])
def test_interrupt_on_unknown_node(field: str) -> None:
    config = CompileConfig(checkpoint_saver=MemorySaver(), **{field: ["not_a_node"]})
    assert "'not_a_node'" in compile_error(chain("a"), config)


@pytest.mark.parametrize("field", ["interrupt_before", "interrupt_after"])
def test_interrupts_without_checkpoint_saver(field: str) -> None:
    config = CompileConfig(**{field: ["a"]})
    message = compile_error(chain("a"), config)
    assert "checkpoint saver" in message


def test_interrupts_with_checkpoint_saver_compile_and_stop_the_run() -> None:
    config = CompileConfig(
        checkpoint_saver=MemorySaver(), interrupt_before=["a"], interrupt_after=["b"]
    )
    graph = chain("a", "b").compile(config)
    thread = RunnableConfig(thread_id="t")
    assert path(graph, {}, thread) == [START]  # stopped before a
    assert graph.get_state(thread).next == ("a",)
    assert path(graph, GraphInput.resume(), thread) == ["a", "b"]  # stopped after b
    assert path(graph, GraphInput.resume(), thread) == [END]


# -- what is accepted ---------------------------------------------------------------------------


def test_conditional_mapping_none_makes_every_node_reachable() -> None:
    graph = StateGraph()
    graph.add_node("a", noop).add_node("b", noop).add_node("c", noop)
    graph.add_edge(START, "a")
    graph.add_conditional_edges("a", lambda s: s["to"])
    graph.add_edge("b", END).add_edge("c", END)
    compiled = graph.compile()
    assert path(compiled, {"to": "b"}) == [START, "a", "b", END]
    assert path(compiled, {"to": "c"}) == [START, "a", "c", END]


def test_conditional_entry_point_compiles_and_routes() -> None:
    graph = StateGraph().add_node("a", noop).add_node("b", noop)
    graph.add_conditional_edges(START, lambda s: s["to"], {"to_a": "a", "to_b": "b"})
    graph.add_edge("a", END).add_edge("b", END)
    compiled = graph.compile()
    assert path(compiled, {"to": "to_a"}) == [START, "a", END]
    assert path(compiled, {"to": "to_b"}) == [START, "b", END]


def test_join_sources_count_as_outgoing_edges() -> None:
    graph = StateGraph().add_node("a", noop).add_node("b", noop).add_node("c", noop)
    graph.add_edge(START, "a").add_edge(START, "b")
    graph.add_edge(["a", "b"], "c").add_edge("c", END)
    assert path(graph.compile()) == [START, "a", "b", "c", END]


def test_compile_rejects_non_compile_config() -> None:
    with pytest.raises(TypeError):
        chain("a").compile({"recursion_limit": 3})  # type: ignore[arg-type]


@pytest.mark.parametrize("limit", [0, -1])
def test_compile_config_recursion_limit_must_be_positive(limit: int) -> None:
    with pytest.raises(ValueError):
        CompileConfig(recursion_limit=limit)


def test_compile_config_defaults() -> None:
    config = CompileConfig()
    expected: dict[str, Any] = {
        "checkpoint_saver": None,
        "interrupt_before": (),
        "interrupt_after": (),
        "interrupt_before_edge": False,
        "recursion_limit": 25,
        "release_thread": False,
        "graph_id": None,
        "executor": None,
    }
    assert {name: getattr(config, name) for name in expected} == expected


def test_compiled_graph_id_comes_from_compile_config() -> None:
    assert chain("a").compile(CompileConfig(graph_id="my-graph")).graph_id == "my-graph"


# -- the schema --------------------------------------------------------------------------------


class Point(BaseModel):
    x: int


@pytest.mark.parametrize(
    ("schema", "named"),
    [
        (dict, "the class 'dict'"),
        (int, "the class 'int'"),
        (Point(x=1), "a Point"),
        (["messages"], "a list"),
    ],
)
def test_a_schema_that_is_not_a_mapping_of_channels_or_a_typed_class_is_refused_clearly(
    schema: Any, named: str
) -> None:
    with pytest.raises(GraphDefinitionError) as caught:
        StateGraph(schema)
    message = str(caught.value)
    assert "a mapping of state key -> Channel" in message
    assert "a TypedDict, dataclass or pydantic model class" in message
    assert named in message


def test_a_schema_value_that_is_not_a_channel_is_refused() -> None:
    with pytest.raises(GraphDefinitionError, match="schema key 'messages' maps to type"):
        StateGraph({"messages": list})


def test_a_mapping_schema_and_no_schema_are_accepted() -> None:
    assert StateGraph(MappingProxyType({"log": Channels.appender()})) is not None
    assert StateGraph(None) is not None
    assert StateGraph({}) is not None
