"""Port of LangGraph4j's ``LG4JRepresentationTest.issue216Test`` and ``issue300Test``: what
``tests/test_draw_subgraphs.py`` leaves out.

That file draws both graphs from the compiled parent.  LangGraph4j draws them from the builder:
``stateGraph.getGraph(MERMAID, "Example graph", false)`` on a ``StateGraph`` whose subgraph nodes
are compiled graphs (``issue216Test``), and ``root.getGraph(...)`` on the root ``StateGraph`` of
four levels (``issue300Test``, whose ``DiagramGenerator.Context.anySubGraphWithId("level3")``
and ``("level4")`` say that nested levels are found).  Here the same, with ``StateGraph.get_graph``
(choices.md: the builder draws what its ``compile()`` would).  The diagrams' text follows SPEC
§7 and this library's conventions, not LangGraph4j's (see ``tests/test_draw_subgraphs.py``).
"""

from __future__ import annotations

from typing import Any

import pytest

from langgraph_celery import END, START, StateGraph
from test_draw_subgraphs import ISSUE216_EDGES, ISSUE216_MERMAID, ISSUE216_PLANTUML, parse


def mocked_action(state: Any) -> dict[str, Any]:
    """``AsyncNodeAction.node_async((ignored) -> Map.of())``."""
    return {}


def issue216_state_graph() -> StateGraph:
    """``issue216Test``'s ``stateGraph``: not compiled; its subgraphs compiled."""
    sub_sub_graph = (
        StateGraph()
        .add_node("foo1", mocked_action)
        .add_node("foo2", mocked_action)
        .add_node("foo3", mocked_action)
        .add_edge(START, "foo1")
        .add_edge("foo1", "foo2")
        .add_edge("foo2", "foo3")
        .add_edge("foo3", END)
        .compile()
    )
    sub_graph = (
        StateGraph()
        .add_node("bar1", mocked_action)
        .add_node("subGraph2", sub_sub_graph)
        .add_node("bar2", mocked_action)
        .add_edge(START, "bar1")
        .add_edge("bar1", "subGraph2")
        .add_edge("subGraph2", "bar2")
        .add_edge("bar2", END)
        .compile()
    )
    return (
        StateGraph()
        .add_node("main1", mocked_action)
        .add_node("subgraph1", sub_graph)
        .add_node("main2", mocked_action)
        .add_edge(START, "main1")
        .add_edge("main1", "subgraph1")
        .add_edge("subgraph1", "main2")
        .add_edge("main2", END)
    )


def test_issue216_drawn_from_the_builder() -> None:
    """``issue216Test``: Mermaid and PlantUML of the builder, blocks nested two deep."""
    state_graph = issue216_state_graph()
    mermaid = state_graph.get_graph("mermaid", "Example graph")
    plantuml = state_graph.get_graph("plantuml", "Example graph")
    assert mermaid.kind == "mermaid" and plantuml.kind == "plantuml"
    assert mermaid.content == ISSUE216_MERMAID
    assert plantuml.content == ISSUE216_PLANTUML
    for kind, content in [("mermaid", mermaid.content), ("plantuml", plantuml.content)]:
        blocks, _, edges = parse(kind, content)
        assert blocks == {("subgraph1",), ("subgraph1", "subGraph2")}
        assert edges == ISSUE216_EDGES


def issue300_root() -> StateGraph:
    """``issue300Test``'s ``root``: level2 -> level3 -> level4, each compiled into the next."""
    level4 = StateGraph()
    level4.add_node("L4_node", mocked_action)
    level4.add_edge(START, "L4_node")
    level4.add_edge("L4_node", END)

    level3 = StateGraph()
    level3.add_node("L3_node", mocked_action)
    level3.add_node("level4", level4.compile())
    level3.add_edge(START, "L3_node")
    level3.add_edge("L3_node", "level4")
    level3.add_edge("level4", END)

    level2 = StateGraph()
    level2.add_node("level3", level3.compile())
    level2.add_edge(START, "level3")
    level2.add_edge("level3", END)

    root = StateGraph()
    root.add_node("level2", level2.compile())
    root.add_edge(START, "level2")
    root.add_edge("level2", END)
    return root


@pytest.mark.parametrize("kind", ["mermaid", "plantuml"])
def test_issue300_drawn_from_the_builder(kind: str) -> None:
    """``issue300Test``: every level a block in the one above, with its START, nodes and END
    (``anySubGraphWithId("level3")`` and ``("level4")``); the edge into level4 is drawn."""
    root = issue300_root()
    content = root.get_graph(kind, "Minimal 4-Level Bug").content
    assert content == root.compile().get_graph(kind, "Minimal 4-Level Bug").content
    blocks, nodes, edges = parse(kind, content)
    l2, l3, l4 = ("level2",), ("level2", "level3"), ("level2", "level3", "level4")
    assert blocks == {l2, l3, l4}
    assert {(*l4, START), (*l4, "L4_node"), (*l4, END), (*l3, "L3_node")} <= nodes
    assert ((*l3, "L3_node"), l4, None, False) in edges
    assert (l4, (*l3, END), None, False) in edges
    assert ((*l4, START), (*l4, "L4_node"), None, False) in edges
