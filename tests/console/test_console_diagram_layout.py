"""What a user sees of a diagram's edges: an edge that skips layers goes around the nodes in
between (it used to cut through a wide node or block, its label hidden under it), and no edge
label covers a node or another label (a short label used to lie under a long one, between two
nodes, or under a node)."""

from __future__ import annotations

import re
import sys
from collections.abc import Iterator
from typing import Any

import pytest

from langgraph_celery import END, START, CompileConfig, StateGraph
from langgraph_celery.console import Catalog, ConsoleSettings, create_app
from langgraph_celery.console.diagram import Layout, layout
from langgraph_celery.console.server import Server
from langgraph_celery.graph._spec import GraphSpec

Point = tuple[float, float]
Rect = tuple[float, float, float, float]


def noop(state: Any) -> dict[str, Any]:
    return {}


def pick(state: Any) -> str:
    return "good"


def triage() -> StateGraph:
    """``classify`` goes to three nodes (one of them wide) with labels, or straight to END."""
    wide = "escalate to a human supervisor"
    graph = StateGraph().add_node("classify", noop).add_edge(START, "classify")
    for node in ("happy", "sad", wide):
        graph.add_node(node, noop).add_edge(node, END)
    mapping = {"good": "happy", "bad": "sad", "very bad, angry customer, urgent": wide}
    return graph.add_conditional_edges("classify", pick, {**mapping, "done": END})


def commands() -> StateGraph:
    """A command node whose labelled destinations are two nodes side by side and END."""
    graph = StateGraph().add_node("commander", noop, {"left": "alpha", "right": "beta", "x": END})
    graph.add_node("alpha", noop).add_node("beta", noop).add_edge(START, "commander")
    return graph.add_edge("alpha", END).add_edge("beta", END)


def skipping() -> StateGraph:
    """Edges that skip layers: around a compiled block, and inside a merged one."""
    inner = StateGraph().add_node("one", noop).add_node("two", noop).add_node("three", noop)
    inner.add_edge(START, "one").add_edge("two", "three").add_edge("three", END)
    inner.add_conditional_edges("one", pick, {"skip": END, "go": "two"})
    looped = StateGraph().add_node("try", noop).add_node("verify", noop)
    looped.add_edge(START, "try").add_edge("try", "verify")
    looped.add_conditional_edges("verify", pick, {"retry": "try", "ok": END})
    graph = StateGraph().add_node("first", noop).add_node("skippy", inner)
    graph.add_node("looped", looped.compile()).add_node("last", noop)
    graph.add_edge(START, "first").add_edge(["skippy", "looped"], "last").add_edge("last", END)
    routes = {"a": "skippy", "b": "looped", "shortcut": "last", "abort": END}
    return graph.add_conditional_edges("first", pick, routes)


def fanout() -> StateGraph:
    """Twelve nodes side by side: a diagram wider than a page's column."""
    graph = StateGraph().add_node("split", noop).add_node("join", noop).add_edge(START, "split")
    workers = [f"worker_{i:02d}" for i in range(12)]
    for worker in workers:
        graph.add_node(worker, noop).add_edge("split", worker)
    return graph.add_edge(workers, "join").add_edge("join", END)


def _points(path: str) -> list[Point]:
    """Points along an SVG path of absolute M, L and C commands (as the diagrams draw)."""
    points: list[Point] = []
    for command, numbers in re.findall(r"([MLC])([^MLC]*)", path):
        values = [float(v) for v in re.findall(r"-?[\d.]+", numbers)]
        pairs = list(zip(values[::2], values[1::2], strict=True))
        if command == "M":
            points.append(pairs[0])
        elif command == "L":
            start, end = points[-1], pairs[0]
            points += [_between(start, end, i / 20) for i in range(1, 21)]
        else:
            (x0, y0), ((x1, y1), (x2, y2), (x3, y3)) = points[-1], pairs
            for i in range(1, 41):
                t = i / 40
                a, b, c, d = (1 - t) ** 3, 3 * (1 - t) ** 2 * t, 3 * (1 - t) * t**2, t**3
                points.append(
                    (a * x0 + b * x1 + c * x2 + d * x3, a * y0 + b * y1 + c * y2 + d * y3)
                )
    return points


def _between(start: Point, end: Point, t: float) -> Point:
    return start[0] + (end[0] - start[0]) * t, start[1] + (end[1] - start[1]) * t


def _rect(box: Layout, node: str) -> Rect:
    x, y, w = box.nodes[node]
    h = box.height_of(node)
    return x - w / 2, y - h / 2, x + w / 2, y + h / 2


def _overlap(a: Rect, b: Rect) -> bool:
    return a[0] < b[2] and b[0] < a[2] and a[1] < b[3] and b[1] < a[3]


def _boxes(box: Layout) -> Iterator[Layout]:
    yield box
    for block in box.blocks.values():
        yield from _boxes(block)


def _spec(graph: StateGraph) -> GraphSpec:
    return graph.compile().spec


@pytest.mark.parametrize("graph", [triage, commands, skipping])
def test_edges_pass_beside_the_nodes_they_do_not_join_and_stay_in_their_drawing(
    graph: Any,
) -> None:
    for box in _boxes(layout(_spec(graph()))):
        for edge in box.edges:
            others = [_rect(box, n) for n in box.nodes if n not in (edge.source, edge.target)]
            for x, y in _points(edge.path):
                inside = [r for r in others if r[0] + 1 < x < r[2] - 1 and r[1] + 1 < y < r[3] - 1]
                assert not inside, f"{edge.source} -> {edge.target} crosses a node at {x}, {y}"
                assert box.left - 0.5 <= x <= box.left + box.width + 0.5
                assert 0 <= y <= box.height


@pytest.mark.parametrize("graph", [triage, commands, skipping])
def test_edge_labels_cover_no_node_and_no_other_label(graph: Any) -> None:
    for box in _boxes(layout(_spec(graph()))):
        nodes = [_rect(box, node) for node in box.nodes]
        labels: list[Rect] = []
        for edge in box.edges:
            if edge.label is None:
                continue
            x, y, width = edge.label
            label = (x - width / 2, y - 9, x + width / 2, y + 9)
            assert not any(_overlap(label, node) for node in nodes), edge.labels
            assert not any(_overlap(label, other) for other in labels), edge.labels
            assert box.left <= label[0] and label[2] <= box.left + box.width
            labels.append(label)


# -- in a browser -----------------------------------------------------------------------------

#: for each edge label of the page's diagrams, whether what the browser shows at its centre is
#: the label (not a node drawn over it); and the edges whose course crosses a node they do not
#: join
SEEN = r"""
() => {
  const hidden = [], crossing = [];
  for (const label of document.querySelectorAll('svg.graph g.edge-label')) {
    label.scrollIntoView({block: 'center', inline: 'center'});
    const r = label.querySelector('rect').getBoundingClientRect();
    const top = document.elementFromPoint(r.left + r.width / 2, r.top + r.height / 2);
    if (!top || !label.contains(top)) hidden.push(label.textContent);
  }
  for (const path of document.querySelectorAll('svg.graph path.edge')) {
    const [source, target] = path.querySelector('title').textContent.split(' \u2192 ');
    const name = e => e.querySelector('title').textContent;
    const others = [...path.parentElement.children].filter(
      e => e.matches('g.node, g.block') && ![source, target].includes(name(e)));
    const length = path.getTotalLength(), m = path.getScreenCTM();
    for (let i = 1; i < 80; i++) {
      const p = path.getPointAtLength(length * i / 80);
      const x = m.a * p.x + m.c * p.y + m.e, y = m.b * p.x + m.d * p.y + m.f;
      for (const node of others) {
        const r = node.querySelector(':scope > rect').getBoundingClientRect();
        if (x > r.left + 1 && x < r.right - 1 && y > r.top + 1 && y < r.bottom - 1)
          crossing.push(`${source} -> ${target} over ${name(node)}`);
      }
    }
  }
  return {hidden, crossing: [...new Set(crossing)]};
}
"""


@pytest.fixture(scope="module")
def served() -> Iterator[Server]:
    module = sys.modules[__name__]
    graphs = [
        (module, f"{__name__}:{name}", build().compile(CompileConfig(graph_id=name)))
        for name, build in (
            ("triage", triage),
            ("commands", commands),
            ("skipping", skipping),
            ("fanout", fanout),
        )
    ]
    with Server(create_app(Catalog.of(graphs), ConsoleSettings())) as server:
        yield server


def _graphs_page(browser: Any, served: Server, width: int, script: str) -> tuple[Any, list[str]]:
    """What ``script`` finds on the graphs page in a window ``width`` pixels wide, and the
    page's script errors."""
    context = browser.new_context(viewport={"width": width, "height": 900})
    page = context.new_page()
    errors: list[str] = []
    page.on("pageerror", lambda error: errors.append(str(error)))
    page.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
    try:
        page.goto(served.url + "/graphs")
        assert page.locator("svg.graph").count() == 4
        return page.evaluate(script), errors
    finally:
        context.close()


@pytest.mark.parametrize("width", [400, 1920])
def test_the_graphs_page_shows_every_edge_label_and_no_edge_over_a_node(
    browser: Any, served: Server, width: int
) -> None:
    seen, errors = _graphs_page(browser, served, width, SEEN)
    assert seen == {"hidden": [], "crossing": []}
    assert errors == []


#: how much of its size the fan-out's diagram is shown at, the height of its nodes' names,
#: whether its box shows its START (scrolled to it), and whether the page (not the diagram's
#: box) scrolls sideways
SCALE = r"""
() => {
  const svg = document.querySelector('section.graph-card:has(svg[aria-label="fanout"]) svg');
  const text = svg.querySelector('g.node[data-node="worker_00"] text');
  const page = document.documentElement;
  const box = svg.parentElement.getBoundingClientRect();
  const start = svg.querySelector('g.node[data-node="__START__"]').getBoundingClientRect();
  return {
    start: box.left <= start.left && start.right <= box.right,
    scale: svg.getBoundingClientRect().width / svg.width.baseVal.value,
    text: text.getBoundingClientRect().height,
    sideways: page.scrollWidth > page.clientWidth,
  };
}
"""


@pytest.mark.parametrize("width", [400, 1280])
def test_a_wide_diagram_is_not_shrunk_past_reading_but_scrolls_in_its_box(
    browser: Any, served: Server, width: int
) -> None:
    """A diagram wider than its column used to be shrunk to fit it, however small its text
    became (a fan-out of twelve nodes, at a quarter of its size on a phone, was unreadable):
    it is shrunk to 70 % at most, and scrolls sideways in its own box, which shows the current
    node (here START) at first."""
    shown, errors = _graphs_page(browser, served, width, SCALE)
    assert shown["scale"] >= 0.7 - 1e-3, shown
    assert shown["text"] >= 9, shown
    assert shown["sideways"] is False
    assert shown["start"] is True, shown
    assert errors == []
