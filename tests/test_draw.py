"""SPEC §7: Mermaid and PlantUML diagrams of a compiled graph.

The diagrams are parsed back (declarations and edges) so the tests check *what* is drawn, not
how identifiers are spelled.
"""

from __future__ import annotations

import itertools
import re
from typing import Any

import pytest

from langgraph_celery import (
    END,
    START,
    CompileConfig,
    CompiledGraph,
    GraphRepresentation,
    StateGraph,
)

Edge = tuple[str, str, str | None, bool]  # (source, target, label, conditional)

_MERMAID_NODE = re.compile(r'^\s*(\S+?)(?:\["(.*)"\]|\(\("(.*)"\)\))\s*$')
_MERMAID_EDGE = re.compile(r'^\s*(\S+)\s+(-->|-\.->)(?:\|"(.*)"\|)?\s+(\S+)\s*$')
_PLANT_NODE = re.compile(
    r'^\s*(?:circle|usecase|rectangle|state|node|agent)\s+"(.*)"\s+as\s+(\S+)\s*$'
)
_PLANT_EDGE = re.compile(r'^\s*(\S+)\s+(-->|-\[dotted\]->)\s+(\S+)(?:\s+:\s+"?(.*?)"?)?\s*$')


def parse_mermaid(content: str) -> tuple[dict[str, str], set[Edge]]:
    """(ident -> label, edges by label) of a Mermaid flowchart."""
    nodes: dict[str, str] = {}
    raw_edges: list[tuple[str, str, str | None, bool]] = []
    for line in content.splitlines():
        edge = _MERMAID_EDGE.match(line)
        if edge:
            source, arrow, label, target = edge.groups()
            raw_edges.append((source, target, label, arrow == "-.->"))
            continue
        node = _MERMAID_NODE.match(line)
        if node and not line.strip().startswith(("flowchart", "graph", "title", "---")):
            ident, box, circle = node.groups()
            assert ident not in nodes, f"identifier {ident!r} declared twice"
            nodes[ident] = box if box is not None else circle
    edges = {(nodes[s], nodes[t], label, cond) for s, t, label, cond in raw_edges}
    assert len(edges) == len(raw_edges), "an edge is drawn twice"
    return nodes, edges


def parse_plantuml(content: str) -> tuple[dict[str, str], set[Edge]]:
    nodes: dict[str, str] = {}
    raw_edges: list[tuple[str, str, str | None, bool]] = []
    for line in content.splitlines():
        node = _PLANT_NODE.match(line)
        if node:
            label, ident = node.groups()
            assert ident not in nodes, f"identifier {ident!r} declared twice"
            nodes[ident] = label
            continue
        edge = _PLANT_EDGE.match(line)
        if edge:
            source, arrow, target, label = edge.groups()
            raw_edges.append((source, target, label or None, arrow != "-->"))
    edges = {(nodes[s], nodes[t], label, cond) for s, t, label, cond in raw_edges}
    assert len(edges) == len(raw_edges), "an edge is drawn twice"
    return nodes, edges


PARSERS: dict[str, Any] = {"mermaid": parse_mermaid, "plantuml": parse_plantuml}


def noop(state: Any) -> None:
    return None


def sample(**config: Any) -> CompiledGraph:
    """START -> agent; agent -(continue/stop/side)-> tools | END | side; tools -> agent;
    [side, tools]... side -> END."""
    graph = StateGraph()
    for node in ("agent", "tools", "side"):
        graph.add_node(node, noop)
    graph.add_edge(START, "agent")
    graph.add_conditional_edges(
        "agent", lambda s: "stop", {"continue": "tools", "stop": END, "detour": "side"}
    )
    graph.add_edge("tools", "agent")
    graph.add_edge("side", END)
    return graph.compile(CompileConfig(**config))


SAMPLE_EDGES: set[Edge] = {
    (START, "agent", None, False),
    ("agent", "tools", "continue", True),
    ("agent", END, "stop", True),
    ("agent", "side", "detour", True),
    ("tools", "agent", None, False),
    ("side", END, None, False),
}


@pytest.mark.parametrize("kind", ["mermaid", "plantuml"])
def test_every_node_and_edge_is_drawn(kind: str) -> None:
    representation = sample().get_graph(kind)
    assert isinstance(representation, GraphRepresentation)
    assert representation.kind == kind
    assert str(representation) == representation.content
    nodes, edges = PARSERS[kind](representation.content)
    assert sorted(nodes.values()) == sorted([START, END, "agent", "tools", "side"])
    assert edges == SAMPLE_EDGES


def test_mermaid_shape() -> None:
    content = sample().get_graph("mermaid").content
    lines = [line for line in content.splitlines() if line.strip()]
    assert lines[0].strip().startswith(("flowchart", "graph"))
    assert "title" not in content


def test_plantuml_shape() -> None:
    content = sample().get_graph("plantuml").content
    lines = [line.strip() for line in content.splitlines() if line.strip()]
    assert lines[0] == "@startuml"
    assert lines[-1] == "@enduml"
    assert lines.count("@startuml") == 1 and lines.count("@enduml") == 1
    assert not any(line.startswith("title") for line in lines)


def test_titles() -> None:
    graph = sample()
    mermaid = graph.get_graph("mermaid", title="My Agent").content
    assert re.search(r"^title:\s*My Agent\s*$", mermaid, re.MULTILINE)
    plantuml = graph.get_graph("plantuml", title="My Agent").content
    lines = [line.strip() for line in plantuml.splitlines() if line.strip()]
    assert lines[0] == "@startuml"
    assert "title My Agent" in lines
    # the title does not change what is drawn
    assert parse_plantuml(plantuml)[1] == SAMPLE_EDGES
    assert parse_mermaid(mermaid)[1] == SAMPLE_EDGES


def test_graph_id_is_the_default_title() -> None:
    graph = sample(graph_id="support-bot")
    assert "title: support-bot" in graph.get_graph("mermaid").content
    assert "title support-bot" in graph.get_graph("plantuml").content
    assert "title: other" in graph.get_graph("mermaid", title="other").content


@pytest.mark.parametrize("kind", ["svg", "dot", "", "mermaid2"])
def test_unknown_kind_is_value_error(kind: str) -> None:
    with pytest.raises(ValueError, match="mermaid"):
        sample().get_graph(kind)


@pytest.mark.parametrize("kind", ["mermaid", "plantuml"])
def test_joins_fan_out_and_conditional_entry(kind: str) -> None:
    graph = StateGraph()
    for node in ("router", "a", "b", "merge"):
        graph.add_node(node, noop)
    graph.add_conditional_edges(START, lambda s: "go", {"go": "router", "skip": END})
    graph.add_edge("router", "a").add_edge("router", "b")
    graph.add_edge(["a", "b"], "merge").add_edge("merge", END)
    _, edges = PARSERS[kind](graph.compile().get_graph(kind).content)
    assert edges == {
        (START, "router", "go", True),
        (START, END, "skip", True),
        ("router", "a", None, False),
        ("router", "b", None, False),
        ("a", "merge", None, False),
        ("b", "merge", None, False),
        ("merge", END, None, False),
    }


@pytest.mark.parametrize("kind", ["mermaid", "plantuml"])
def test_conditional_edge_without_mapping_may_reach_every_node(kind: str) -> None:
    graph = StateGraph()
    graph.add_node("x", noop).add_node("y", noop)
    graph.add_edge(START, "x")
    graph.add_conditional_edges("x", lambda s: END)
    graph.add_edge("y", END)
    _, edges = PARSERS[kind](graph.compile().get_graph(kind).content)
    assert edges == {
        (START, "x", None, False),
        ("x", "x", "x", True),
        ("x", "y", "y", True),
        ("x", END, END, True),
        ("y", END, None, False),
    }


@pytest.mark.parametrize("kind", ["mermaid", "plantuml"])
def test_node_names_that_look_alike_stay_distinct(kind: str) -> None:
    names = ["step 1", "step_1", "step-1", "step.1"]
    graph = StateGraph()
    for name in names:
        graph.add_node(name, noop)
    graph.add_edge(START, names[0])
    for source, target in itertools.pairwise(names):
        graph.add_edge(source, target)
    graph.add_edge(names[-1], END)
    nodes, edges = PARSERS[kind](graph.compile().get_graph(kind).content)
    assert sorted(nodes.values()) == sorted([START, END, *names])
    assert edges == {
        (START, "step 1", None, False),
        ("step 1", "step_1", None, False),
        ("step_1", "step-1", None, False),
        ("step-1", "step.1", None, False),
        ("step.1", END, None, False),
    }


@pytest.mark.parametrize("kind", ["mermaid", "plantuml"])
def test_node_named_like_start_identifier(kind: str) -> None:
    graph = StateGraph()
    graph.add_node("__start__", noop).add_node("start", noop)
    graph.add_edge(START, "__start__").add_edge("__start__", "start").add_edge("start", END)
    nodes, edges = PARSERS[kind](graph.compile().get_graph(kind).content)
    assert sorted(nodes.values()) == sorted([START, END, "__start__", "start"])
    assert edges == {
        (START, "__start__", None, False),
        ("__start__", "start", None, False),
        ("start", END, None, False),
    }


# -- command nodes (SPEC §9) ----------------------------------------------------------------------


@pytest.mark.parametrize("kind", ["mermaid", "plantuml"])
def test_a_command_nodes_destinations_are_drawn_as_labelled_conditional_edges(kind: str) -> None:
    graph = StateGraph()
    graph.add_node("ask", noop, [END, "tool"])
    graph.add_node("route", noop, {"yes": "ask", "no": END})
    graph.add_node("tool", noop)
    graph.add_edge(START, "route").add_edge("tool", END)
    nodes, edges = PARSERS[kind](graph.compile().get_graph(kind).content)
    assert sorted(nodes.values()) == sorted([START, END, "ask", "route", "tool"])
    assert edges == {
        (START, "route", None, False),
        ("route", "ask", "yes", True),
        ("route", END, "no", True),
        ("ask", END, END, True),
        ("ask", "tool", "tool", True),
        ("tool", END, None, False),
    }
