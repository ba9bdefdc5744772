"""Port of LangGraph4j's ``StateGraphRepresentationTest`` (``langgraph4j-core``), which
``LG4JRepresentationTest`` repeats method for method: the diagrams of ``getGraph``.

The same graphs, drawn by ``get_graph("plantuml" | "mermaid", title)`` on the compiled graph
or, where LangGraph4j draws the builder (``workflow.getGraph``), on the ``StateGraph``.
LangGraph4j's exact text differs from ours by design (SPEC §7 fixes what is drawn, not how:
no skin parameters, footer or class definitions; a conditional edge is drawn as one labelled
dotted edge per label, as LangGraph4j's Mermaid does with ``printConditionalEdges = false``,
with no ``check state`` node), so each port parses the diagram back and asserts what LangGraph4j's
shows: every node once, in the order added, ``START`` and ``END``, every plain edge, every
conditional edge with its label, the branches of a fan-out, and the title.  Without a title
LangGraph4j writes ``Graph Diagram``; ours writes none (``tests/test_draw.py``).

``issue216Test`` and ``issue300Test`` (subgraph blocks) are ported in
``tests/test_draw_subgraphs.py``.  Nothing is Java-only here; ``LG4JRepresentationTest``'s JSON
helpers (``firstNodeById``, ``firstEdgeByLabel``, ...) are used by none of its tests.
"""

from __future__ import annotations

import re
from typing import Any

import pytest
from lg4j_support import parallel_branch, parallel_branch_on_start

from langgraph_celery import END, START, CompiledGraph, StateGraph
from test_draw import Edge, parse_mermaid, parse_plantuml

KINDS = ["plantuml", "mermaid"]


def dummy_node_action(state: Any) -> dict[str, Any]:
    return {}


def dummy_condition(state: Any) -> str:
    return ""


def drawn(
    graph: StateGraph | CompiledGraph, kind: str, title: str | None = None
) -> tuple[str | None, list[str], set[Edge]]:
    """(the title, the nodes in the order declared, the edges) of ``graph``'s ``kind`` diagram."""
    representation = graph.get_graph(kind, title)
    assert representation.kind == kind  # assertEquals(Type.PLANTUML, result.type())
    content = representation.content
    lines = content.splitlines()
    if kind == "plantuml":
        assert lines[0] == "@startuml" and lines[-1] == "@enduml"
        assert lines.count("@startuml") == 1 and lines.count("@enduml") == 1
        titles = [line.removeprefix("title ") for line in lines if line.startswith("title ")]
        declared, edges = parse_plantuml(content)
    else:
        front = lines[: lines.index("flowchart TD")]
        titles = [m.group(1) for line in front if (m := re.fullmatch(r"title: (.*)", line))]
        declared, edges = parse_mermaid(content)
    assert len(titles) <= 1
    return (titles[0] if titles else None), list(declared.values()), edges


def assert_drawn(
    graph: StateGraph | CompiledGraph,
    kind: str,
    title: str | None,
    nodes: list[str],
    edges: set[Edge],
) -> None:
    shown_title, declared, drawn_edges = drawn(graph, kind, title)
    assert shown_title == title
    assert sorted(declared) == sorted([START, END, *nodes])  # each once
    assert [node for node in declared if node not in (START, END)] == nodes  # in the order added
    assert drawn_edges == edges


@pytest.mark.parametrize("kind", KINDS)
def test_simple_graph(kind: str) -> None:
    """``testSimpleGraph``: nodes added out of their run order, edges likewise."""
    app = (
        StateGraph()
        .add_node("agent_3", dummy_node_action)
        .add_node("agent_1", dummy_node_action)
        .add_node("agent_2", dummy_node_action)
        .add_edge(START, "agent_1")
        .add_edge("agent_2", END)
        .add_edge("agent_1", "agent_3")
        .add_edge("agent_3", "agent_2")
        .compile()
    )
    assert_drawn(
        app,
        kind,
        None,
        ["agent_3", "agent_1", "agent_2"],
        {
            (START, "agent_1", None, False),
            ("agent_2", END, None, False),
            ("agent_1", "agent_3", None, False),
            ("agent_3", "agent_2", None, False),
        },
    )


@pytest.mark.parametrize("kind", KINDS)
def test_correction_process_graph(kind: str) -> None:
    """``testCorrectionProcessGraph``: drawn from the builder, with a title; two labels of one
    conditional edge lead to ``END``."""
    workflow = (
        StateGraph()
        .add_node("evaluate_result", dummy_node_action)
        .add_node("agent_review", dummy_node_action)
        .add_edge("agent_review", "evaluate_result")
        .add_conditional_edges(
            "evaluate_result",
            dummy_condition,
            {"OK": END, "UNKNOWN": END, "ERROR": "agent_review"},
        )
        .add_edge(START, "evaluate_result")
    )
    assert_drawn(
        workflow,
        kind,
        "Correction process",
        ["evaluate_result", "agent_review"],
        {
            (START, "evaluate_result", None, False),
            ("agent_review", "evaluate_result", None, False),
            ("evaluate_result", END, "OK", True),
            ("evaluate_result", END, "UNKNOWN", True),
            ("evaluate_result", "agent_review", "ERROR", True),
        },
    )
    # the builder draws what its compiled graph draws
    compiled = workflow.compile().get_graph(kind, "Correction process")
    assert workflow.get_graph(kind, "Correction process") == compiled


@pytest.mark.parametrize("kind", KINDS)
def test_generate_agent_executor_graph(kind: str) -> None:
    """``GenerateAgentExecutorGraph``: the agent loop, ``continue`` to the tools, ``end`` out."""
    app = (
        StateGraph()
        .add_node("agent", dummy_node_action)
        .add_node("action", dummy_node_action)
        .add_edge(START, "agent")
        .add_conditional_edges("agent", dummy_condition, {"continue": "action", "end": END})
        .add_edge("action", "agent")
        .compile()
    )
    assert_drawn(
        app,
        kind,
        None,
        ["agent", "action"],
        {
            (START, "agent", None, False),
            ("agent", "action", "continue", True),
            ("agent", END, "end", True),
            ("action", "agent", None, False),
        },
    )


@pytest.mark.parametrize(("kind", "title"), [("plantuml", None), ("mermaid", "Graph Diagram")])
def test_generate_image_to_diagram_graph(kind: str, title: str | None) -> None:
    """``GenerateImageToDiagramGraph``: a node added after the conditional edge that leads to
    its predecessors; PlantUML without a title, Mermaid with LangGraph4j's default one."""
    app = (
        StateGraph()
        .add_node("agent_describer", dummy_node_action)
        .add_node("agent_sequence_plantuml", dummy_node_action)
        .add_node("agent_generic_plantuml", dummy_node_action)
        .add_conditional_edges(
            "agent_describer",
            dummy_condition,
            {"generic": "agent_generic_plantuml", "sequence": "agent_sequence_plantuml"},
        )
        .add_node("evaluate_result", dummy_node_action)
        .add_edge("agent_sequence_plantuml", "evaluate_result")
        .add_edge("agent_generic_plantuml", "evaluate_result")
        .add_edge(START, "agent_describer")
        .add_edge("evaluate_result", END)
        .compile()
    )
    assert_drawn(
        app,
        kind,
        title,
        ["agent_describer", "agent_sequence_plantuml", "agent_generic_plantuml", "evaluate_result"],
        {
            (START, "agent_describer", None, False),
            ("agent_describer", "agent_generic_plantuml", "generic", True),
            ("agent_describer", "agent_sequence_plantuml", "sequence", True),
            ("agent_sequence_plantuml", "evaluate_result", None, False),
            ("agent_generic_plantuml", "evaluate_result", None, False),
            ("evaluate_result", END, None, False),
        },
    )


PARALLEL_EDGES: set[Edge] = {
    ("A1", "B", None, False),
    ("A2", "B", None, False),
    ("A3", "B", None, False),
    ("B", "C", None, False),
    ("C", END, None, False),
}


@pytest.mark.parametrize("kind", KINDS)
def test_with_parallel_branch(kind: str) -> None:
    """``testWithParallelBranch``: ``A`` fans out to ``A1``..``A3``, which all lead to ``B``;
    drawn from the builder (a ``MessagesStateGraph``)."""
    assert_drawn(
        parallel_branch(),
        kind,
        "testWithParallelBranch",
        ["A", "A1", "A2", "A3", "B", "C"],
        {
            (START, "A", None, False),
            ("A", "A1", None, False),
            ("A", "A2", None, False),
            ("A", "A3", None, False),
            *PARALLEL_EDGES,
        },
    )


@pytest.mark.parametrize("kind", KINDS)
def test_with_parallel_branch_on_start(kind: str) -> None:
    """``testWithParallelBranchOnStart``: the fan-out is from ``START``; PlantUML from the
    compiled graph, Mermaid from the builder."""
    workflow = parallel_branch_on_start()
    graph: StateGraph | CompiledGraph = workflow.compile() if kind == "plantuml" else workflow
    assert_drawn(
        graph,
        kind,
        "testWithParallelBranchOnStart",
        ["A1", "A2", "A3", "B", "C"],
        {
            (START, "A1", None, False),
            (START, "A2", None, False),
            (START, "A3", None, False),
            *PARALLEL_EDGES,
        },
    )
