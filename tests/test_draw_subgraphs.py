"""SPEC §7 and §9: subgraphs in diagrams, as nested blocks (Mermaid ``subgraph ... end``,
PlantUML ``package ... { }``).

``test_issue216_*`` and ``test_issue300_*`` port LangGraph4j's
``LG4JRepresentationTest.issue216Test`` and ``issue300Test``: the same graphs, and the same
blocks, nodes and edges, in our diagrams' conventions (SPEC §7, ``tests/test_draw.py``: ``START``
and ``END`` are drawn as circles named ``__START__`` and ``__END__``, each graph's START first and
END after its nodes, then its edges; no skin parameters, footer or class definitions).  Those
tests use compiled subgraphs; here they run with merged subgraphs (``add_node(id, StateGraph)``)
and with compiled ones (``add_node(id, CompiledGraph)``, recorded in
:attr:`GraphSpec.subgraphs`); both draw the same text.
"""

from __future__ import annotations

import re
from typing import Any

import pytest

from langgraph_celery import END, START, CompiledGraph, StateGraph

Path = tuple[str, ...]  # the labels of the enclosing blocks, then the node's own label
Edge = tuple[Path, Path, str | None, bool]

_M_BLOCK = re.compile(r'^\s*subgraph\s+(\S+)\s+\["(.*)"\]\s*$')
_M_NODE = re.compile(r'^\s*(\S+?)(?:\["(.*)"\]|\(\("(.*)"\)\))\s*$')
_M_EDGE = re.compile(r'^\s*(\S+)\s+(-->|-\.->)(?:\|"(.*)"\|)?\s+(\S+)\s*$')
_P_BLOCK = re.compile(r'^\s*package\s+"(.*)"\s+as\s+(\S+)\s+\{\s*$')
_P_NODE = re.compile(r'^\s*(?:circle|usecase)\s+"(.*)"\s+as\s+(\S+)\s*$')
_P_EDGE = re.compile(r'^\s*(\S+)\s+(-->|-\[dotted\]->)\s+(\S+)(?:\s+:\s+"(.*)")?\s*$')


def parse(kind: str, content: str) -> tuple[set[Path], set[Path], set[Edge]]:
    """(blocks, nodes, edges) of a diagram, each node and block by its path of labels."""
    stack: list[Path] = [()]
    idents: dict[str, Path] = {}
    blocks: set[Path] = set()
    raw: list[tuple[str, str, str | None, bool]] = []
    for line in content.splitlines():
        if kind == "mermaid":
            block = _M_BLOCK.match(line)
            opened = (block.group(1), block.group(2)) if block else None
            closed = line.strip() == "end"
            edge = _M_EDGE.match(line)
            found = (
                (edge.group(1), edge.group(4), edge.group(3), edge.group(2) == "-.->")
                if edge
                else None
            )
            node = _M_NODE.match(line) if not (block or edge or closed) else None
            declared = (node.group(1), node.group(2) or node.group(3)) if node else None
        else:
            block = _P_BLOCK.match(line)
            opened = (block.group(2), block.group(1)) if block else None
            closed = line.strip() == "}"
            edge = _P_EDGE.match(line)
            found = (
                (edge.group(1), edge.group(3), edge.group(4), edge.group(2) != "-->")
                if edge
                else None
            )
            node = _P_NODE.match(line)
            declared = (node.group(2), node.group(1)) if node else None
        if opened:
            path = (*stack[-1], opened[1])
            assert opened[0] not in idents, f"identifier {opened[0]!r} declared twice"
            idents[opened[0]] = path
            blocks.add(path)
            stack.append(path)
        elif closed:
            stack.pop()
        elif found:
            raw.append(found)
        elif declared and not line.strip().startswith(("flowchart", "title", "---", "@")):
            assert declared[0] not in idents, f"identifier {declared[0]!r} declared twice"
            idents[declared[0]] = (*stack[-1], declared[1])
    assert stack == [()], "a block is not closed"
    edges = {(idents[s], idents[t], label, conditional) for s, t, label, conditional in raw}
    assert len(edges) == len(raw), "an edge is drawn twice"
    nodes = {path for path in idents.values() if path not in blocks}
    return blocks, nodes, edges


def noop(state: Any) -> dict[str, Any]:
    return {}


def chain(*nodes: str | tuple[str, Any]) -> StateGraph:
    """START -> each node in turn -> END; a (name, subgraph) pair adds a subgraph node."""
    graph = StateGraph()
    names = []
    for node in nodes:
        name, action = node if isinstance(node, tuple) else (node, noop)
        graph.add_node(name, action)
        names.append(name)
    for source, target in zip([START, *names], [*names, END], strict=True):
        graph.add_edge(source, target)
    return graph


# -- LG4JRepresentationTest.issue216Test ---------------------------------------------------------


def issue216_merged() -> CompiledGraph:
    sub_sub = chain("foo1", "foo2", "foo3")
    sub = chain("bar1", ("subGraph2", sub_sub), "bar2")
    return chain("main1", ("subgraph1", sub), "main2").compile()


def issue216_compiled() -> CompiledGraph:
    sub_sub = chain("foo1", "foo2", "foo3").compile()
    sub = chain("bar1", ("subGraph2", sub_sub), "bar2").compile()
    return chain("main1", ("subgraph1", sub), "main2").compile()


ISSUE216_MERMAID = """\
---
title: Example graph
---
flowchart TD
    __start__(("__START__"))
    n_main1["main1"]
    subgraph n_subgraph1 ["subgraph1"]
        s_9_subgraph1_start(("__START__"))
        s_9_subgraph1_4_bar1["bar1"]
        subgraph s_9_subgraph1_9_subGraph2 ["subGraph2"]
            s_9_subgraph1_9_subGraph2_start(("__START__"))
            s_9_subgraph1_9_subGraph2_4_foo1["foo1"]
            s_9_subgraph1_9_subGraph2_4_foo2["foo2"]
            s_9_subgraph1_9_subGraph2_4_foo3["foo3"]
            s_9_subgraph1_9_subGraph2_end(("__END__"))
            s_9_subgraph1_9_subGraph2_start --> s_9_subgraph1_9_subGraph2_4_foo1
            s_9_subgraph1_9_subGraph2_4_foo1 --> s_9_subgraph1_9_subGraph2_4_foo2
            s_9_subgraph1_9_subGraph2_4_foo2 --> s_9_subgraph1_9_subGraph2_4_foo3
            s_9_subgraph1_9_subGraph2_4_foo3 --> s_9_subgraph1_9_subGraph2_end
        end
        s_9_subgraph1_4_bar2["bar2"]
        s_9_subgraph1_end(("__END__"))
        s_9_subgraph1_start --> s_9_subgraph1_4_bar1
        s_9_subgraph1_4_bar1 --> s_9_subgraph1_9_subGraph2
        s_9_subgraph1_9_subGraph2 --> s_9_subgraph1_4_bar2
        s_9_subgraph1_4_bar2 --> s_9_subgraph1_end
    end
    n_main2["main2"]
    __end__(("__END__"))
    __start__ --> n_main1
    n_main1 --> n_subgraph1
    n_subgraph1 --> n_main2
    n_main2 --> __end__
"""

ISSUE216_PLANTUML = """\
@startuml
title Example graph
circle "__START__" as __start__
usecase "main1" as n_main1
package "subgraph1" as n_subgraph1 {
  circle "__START__" as s_9_subgraph1_start
  usecase "bar1" as s_9_subgraph1_4_bar1
  package "subGraph2" as s_9_subgraph1_9_subGraph2 {
    circle "__START__" as s_9_subgraph1_9_subGraph2_start
    usecase "foo1" as s_9_subgraph1_9_subGraph2_4_foo1
    usecase "foo2" as s_9_subgraph1_9_subGraph2_4_foo2
    usecase "foo3" as s_9_subgraph1_9_subGraph2_4_foo3
    circle "__END__" as s_9_subgraph1_9_subGraph2_end
    s_9_subgraph1_9_subGraph2_start --> s_9_subgraph1_9_subGraph2_4_foo1
    s_9_subgraph1_9_subGraph2_4_foo1 --> s_9_subgraph1_9_subGraph2_4_foo2
    s_9_subgraph1_9_subGraph2_4_foo2 --> s_9_subgraph1_9_subGraph2_4_foo3
    s_9_subgraph1_9_subGraph2_4_foo3 --> s_9_subgraph1_9_subGraph2_end
  }
  usecase "bar2" as s_9_subgraph1_4_bar2
  circle "__END__" as s_9_subgraph1_end
  s_9_subgraph1_start --> s_9_subgraph1_4_bar1
  s_9_subgraph1_4_bar1 --> s_9_subgraph1_9_subGraph2
  s_9_subgraph1_9_subGraph2 --> s_9_subgraph1_4_bar2
  s_9_subgraph1_4_bar2 --> s_9_subgraph1_end
}
usecase "main2" as n_main2
circle "__END__" as __end__
__start__ --> n_main1
n_main1 --> n_subgraph1
n_subgraph1 --> n_main2
n_main2 --> __end__
@enduml
"""

S1, S2 = ("subgraph1",), ("subgraph1", "subGraph2")
ISSUE216_EDGES: set[Edge] = {
    ((START,), ("main1",), None, False),
    (("main1",), S1, None, False),
    (S1, ("main2",), None, False),
    (("main2",), (END,), None, False),
    ((*S1, START), (*S1, "bar1"), None, False),
    ((*S1, "bar1"), S2, None, False),
    (S2, (*S1, "bar2"), None, False),
    ((*S1, "bar2"), (*S1, END), None, False),
    ((*S2, START), (*S2, "foo1"), None, False),
    ((*S2, "foo1"), (*S2, "foo2"), None, False),
    ((*S2, "foo2"), (*S2, "foo3"), None, False),
    ((*S2, "foo3"), (*S2, END), None, False),
}


@pytest.mark.parametrize("build", [issue216_merged, issue216_compiled])
def test_issue216_nested_blocks(build: Any) -> None:
    app = build()
    mermaid = app.get_graph("mermaid", "Example graph").content
    plantuml = app.get_graph("plantuml", "Example graph").content
    assert mermaid == ISSUE216_MERMAID
    assert plantuml == ISSUE216_PLANTUML
    for kind, content in [("mermaid", mermaid), ("plantuml", plantuml)]:
        blocks, nodes, edges = parse(kind, content)
        assert blocks == {S1, S2}
        assert {(*S2, n) for n in (START, "foo1", "foo2", "foo3", END)} <= nodes
        assert edges == ISSUE216_EDGES


def test_issue216_the_merged_graph_runs_the_merged_nodes() -> None:
    spec = issue216_merged().spec
    assert list(spec.nodes) == [
        "main1",
        "subgraph1-bar1",
        "subgraph1-subGraph2-foo1",
        "subgraph1-subGraph2-foo2",
        "subgraph1-subGraph2-foo3",
        "subgraph1-bar2",
        "main2",
    ]


# -- LG4JRepresentationTest.issue300Test ---------------------------------------------------------


def issue300_merged() -> CompiledGraph:
    level4 = chain("L4_node")
    level3 = chain("L3_node", ("level4", level4))
    level2 = chain(("level3", level3))
    return chain(("level2", level2)).compile()


def issue300_compiled() -> CompiledGraph:
    level4 = chain("L4_node").compile()
    level3 = chain("L3_node", ("level4", level4)).compile()
    level2 = chain(("level3", level3)).compile()
    return chain(("level2", level2)).compile()


ISSUE300_MERMAID = """\
---
title: Minimal 4-Level Bug
---
flowchart TD
    __start__(("__START__"))
    subgraph n_level2 ["level2"]
        s_6_level2_start(("__START__"))
        subgraph s_6_level2_6_level3 ["level3"]
            s_6_level2_6_level3_start(("__START__"))
            s_6_level2_6_level3_10_L3_5f_node["L3_node"]
            subgraph s_6_level2_6_level3_6_level4 ["level4"]
                s_6_level2_6_level3_6_level4_start(("__START__"))
                s_6_level2_6_level3_6_level4_10_L4_5f_node["L4_node"]
                s_6_level2_6_level3_6_level4_end(("__END__"))
                s_6_level2_6_level3_6_level4_start --> s_6_level2_6_level3_6_level4_10_L4_5f_node
                s_6_level2_6_level3_6_level4_10_L4_5f_node --> s_6_level2_6_level3_6_level4_end
            end
            s_6_level2_6_level3_end(("__END__"))
            s_6_level2_6_level3_start --> s_6_level2_6_level3_10_L3_5f_node
            s_6_level2_6_level3_10_L3_5f_node --> s_6_level2_6_level3_6_level4
            s_6_level2_6_level3_6_level4 --> s_6_level2_6_level3_end
        end
        s_6_level2_end(("__END__"))
        s_6_level2_start --> s_6_level2_6_level3
        s_6_level2_6_level3 --> s_6_level2_end
    end
    __end__(("__END__"))
    __start__ --> n_level2
    n_level2 --> __end__
"""


@pytest.mark.parametrize("build", [issue300_merged, issue300_compiled])
def test_issue300_four_levels(build: Any) -> None:
    app = build()
    mermaid = app.get_graph("mermaid", "Minimal 4-Level Bug").content
    assert mermaid == ISSUE300_MERMAID
    l2, l3, l4 = ("level2",), ("level2", "level3"), ("level2", "level3", "level4")
    expected: set[Edge] = {
        ((START,), l2, None, False),
        (l2, (END,), None, False),
        ((*l2, START), l3, None, False),
        (l3, (*l2, END), None, False),
        ((*l3, START), (*l3, "L3_node"), None, False),
        ((*l3, "L3_node"), l4, None, False),
        (l4, (*l3, END), None, False),
        ((*l4, START), (*l4, "L4_node"), None, False),
        ((*l4, "L4_node"), (*l4, END), None, False),
    }
    for kind in ("mermaid", "plantuml"):
        blocks, _, edges = parse(kind, app.get_graph(kind).content)
        # "anySubGraphWithId": every level is a block, nested in the one above
        assert blocks == {l2, l3, l4}
        assert edges == expected


# -- what the merge adds ---------------------------------------------------------------------------


@pytest.mark.parametrize("kind", ["mermaid", "plantuml"])
def test_a_merged_graph_is_drawn_as_built_with_its_conditional_edges(kind: str) -> None:
    child = (
        StateGraph()
        .add_node("B1", noop)
        .add_node("C", noop)
        .add_conditional_edges(START, lambda s: "go", {"go": "B1", "skip": END})
        .add_conditional_edges("B1", lambda s: "c", {"c": "C", "done": END})
        .add_edge("C", END)
    )
    parent = (
        StateGraph()
        .add_node("A", noop)
        .add_node("B", child)
        .add_edge(START, "A")
        .add_edge("A", "B")
        .add_conditional_edges("B", lambda s: "again", {"again": "A", "stop": END})
    )
    app = parent.compile()
    # what runs has bridges; what is drawn is the graph as built
    assert {"B-__START__", "B-__END__"} <= set(app.spec.nodes)
    blocks, nodes, edges = parse(kind, app.get_graph(kind).content)
    assert blocks == {("B",)}
    assert nodes == {(START,), ("A",), (END,), *(("B", n) for n in (START, "B1", "C", END))}
    assert edges == {
        ((START,), ("A",), None, False),
        (("A",), ("B",), None, False),
        (("B",), ("A",), "again", True),
        (("B",), (END,), "stop", True),
        (("B", START), ("B", "B1"), "go", True),
        (("B", START), ("B", END), "skip", True),
        (("B", "B1"), ("B", "C"), "c", True),
        (("B", "B1"), ("B", END), "done", True),
        (("B", "C"), ("B", END), None, False),
    }


@pytest.mark.parametrize("kind", ["mermaid", "plantuml"])
def test_block_identifiers_stay_distinct_from_look_alike_node_names(kind: str) -> None:
    # a compiled subgraph "sub" beside a node named like its merged node ("sub-x", which a
    # merged one would refuse), and nodes named like inner identifiers
    parent = chain("sub-x", ("sub", chain("x").compile()), "s_3_sub_1_x", "s_3_sub_start").compile()
    blocks, nodes, _ = parse(kind, parent.get_graph(kind).content)
    assert blocks == {("sub",)}
    assert nodes == {
        (START,),
        (END,),
        ("sub-x",),
        ("s_3_sub_1_x",),
        ("s_3_sub_start",),
        ("sub", START),
        ("sub", "x"),
        ("sub", END),
    }
