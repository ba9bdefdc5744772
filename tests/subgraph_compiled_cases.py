"""Reference cases that need ``add_node(id, CompiledGraph)`` (SPEC §9, issue 13 item 2), kept
here, not collected (no ``test_`` prefix), until that lands: then rename the functions
``test_...`` (or import them into a test module) to run them.

They are the compiled-subgraph forms of ``LG4JRepresentationTest.issue216Test`` and
``issue300Test``, whose graphs use ``.compile()`` subgraphs.  ``tests/test_draw_subgraphs.py``
runs the same graphs with merged subgraphs and with compiled ones given to the diagram through
``GraphSpec.subgraphs``; here the compiled subgraphs are added as a user adds them, and must
draw the same text.  (``StateSubGraphTest``, ``SubGraphTest`` and ``Issue336Test`` have no
compiled-subgraph case; ``CompiledSubGraphTest`` is ported with item 2.)
"""

from __future__ import annotations

from typing import Any

from langgraph_celery import END, START, StateGraph
from test_draw_subgraphs import ISSUE216_MERMAID, ISSUE216_PLANTUML, ISSUE300_MERMAID


def noop(state: Any) -> dict[str, Any]:
    return {}


def case_issue216_compiled_subgraphs_draw_as_nested_blocks() -> None:
    sub_sub = (
        StateGraph()
        .add_node("foo1", noop)
        .add_node("foo2", noop)
        .add_node("foo3", noop)
        .add_edge(START, "foo1")
        .add_edge("foo1", "foo2")
        .add_edge("foo2", "foo3")
        .add_edge("foo3", END)
        .compile()
    )
    sub = (
        StateGraph()
        .add_node("bar1", noop)
        .add_node("subGraph2", sub_sub)
        .add_node("bar2", noop)
        .add_edge(START, "bar1")
        .add_edge("bar1", "subGraph2")
        .add_edge("subGraph2", "bar2")
        .add_edge("bar2", END)
        .compile()
    )
    graph = (
        StateGraph()
        .add_node("main1", noop)
        .add_node("subgraph1", sub)
        .add_node("main2", noop)
        .add_edge(START, "main1")
        .add_edge("main1", "subgraph1")
        .add_edge("subgraph1", "main2")
        .add_edge("main2", END)
        .compile()
    )
    assert graph.get_graph("mermaid", "Example graph").content == ISSUE216_MERMAID
    assert graph.get_graph("plantuml", "Example graph").content == ISSUE216_PLANTUML


def case_issue300_four_levels_of_compiled_subgraphs() -> None:
    level4 = StateGraph().add_node("L4_node", noop)
    level4.add_edge(START, "L4_node").add_edge("L4_node", END)
    level3 = StateGraph().add_node("L3_node", noop).add_node("level4", level4.compile())
    level3.add_edge(START, "L3_node").add_edge("L3_node", "level4").add_edge("level4", END)
    level2 = StateGraph().add_node("level3", level3.compile())
    level2.add_edge(START, "level3").add_edge("level3", END)
    root = StateGraph().add_node("level2", level2.compile())
    root.add_edge(START, "level2").add_edge("level2", END)
    content = root.compile().get_graph("mermaid", "Minimal 4-Level Bug").content
    assert content == ISSUE300_MERMAID
