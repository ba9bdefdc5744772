"""A graph drawn as SVG on the server, so that pages show diagrams without any JavaScript library.

Mermaid's renderer is JavaScript that no PyPI package we trust ships on its own, and the console
must work with no internet; the console therefore lays the graph out itself, simply:

* nodes go in layers by their longest path from ``START`` (edges that close a loop are left out
  of the layering), ``END`` in the last layer;
* within a layer, nodes are ordered by the mean position of their neighbours (a few sweeps down
  and up), which untangles most agent graphs;
* edges into the next layers are curves downwards, loops are drawn on the right-hand side;
  conditional edges are dashed and carry their labels.

The edges are the ones the Mermaid text of ``get_graph("mermaid")`` draws.  Every text is
escaped; a node can be highlighted (``current``, with the run's status as a class) and nodes a
thread went through marked ``visited``.
"""

from __future__ import annotations

import html
from collections.abc import Collection, Iterable
from dataclasses import dataclass, field

from langgraph_celery.graph._spec import GraphSpec
from langgraph_celery.graph.draw import _edges
from langgraph_celery.graph.types import END, START

__all__ = ["Layout", "layout", "render_svg"]

NODE_HEIGHT = 36
LAYER_GAP = 64
NODE_GAP = 36
MARGIN = 32
CHAR_WIDTH = 7.6
MAX_LABEL = 32
LOOP_GAP = 18


@dataclass
class _Edge:
    source: str
    target: str
    labels: list[str] = field(default_factory=list)
    conditional: bool = False
    back: bool = False


@dataclass
class Layout:
    """Positions (centre x, centre y, width) of nodes and the edges between them."""

    nodes: dict[str, tuple[float, float, float]]
    edges: list[_Edge]
    width: float
    height: float
    ranks: dict[str, int]


def _label(node: str) -> str:
    if node == START:
        return "START"
    if node == END:
        return "END"
    return node if len(node) <= MAX_LABEL else node[: MAX_LABEL - 1] + "\u2026"


def _merged_edges(spec: GraphSpec) -> list[_Edge]:
    merged: dict[tuple[str, str], _Edge] = {}
    for source, target, label, conditional in _edges(spec):
        edge = merged.setdefault((source, target), _Edge(source, target))
        edge.conditional = edge.conditional or conditional
        if label is not None and label != target and label not in edge.labels:
            edge.labels.append(label)
    return list(merged.values())


def _mark_back_edges(nodes: list[str], edges: list[_Edge]) -> None:
    """Mark the edges that close a loop (to a node on the depth-first path), iteratively."""
    out: dict[str, list[_Edge]] = {node: [] for node in nodes}
    for edge in edges:
        out.setdefault(edge.source, []).append(edge)
    state: dict[str, int] = {}  # 1 on the path, 2 done
    for root in nodes:
        if root in state:
            continue
        stack: list[tuple[str, int]] = [(root, 0)]
        state[root] = 1
        while stack:
            node, i = stack.pop()
            if i < len(out[node]):
                stack.append((node, i + 1))
                edge = out[node][i]
                seen = state.get(edge.target)
                if seen == 1:
                    edge.back = True
                elif seen is None:
                    state[edge.target] = 1
                    stack.append((edge.target, 0))
            else:
                state[node] = 2


def _ranks(nodes: list[str], edges: list[_Edge]) -> dict[str, int]:
    forward = [e for e in edges if not e.back and e.source != e.target]
    indegree = {node: 0 for node in nodes}
    for edge in forward:
        indegree[edge.target] += 1
    rank = {node: 0 for node in nodes}
    ready = [node for node in nodes if indegree[node] == 0]
    while ready:
        node = ready.pop(0)
        for edge in forward:
            if edge.source == node:
                rank[edge.target] = max(rank[edge.target], rank[node] + 1)
                indegree[edge.target] -= 1
                if indegree[edge.target] == 0:
                    ready.append(edge.target)
    last = max((r for n, r in rank.items() if n != END), default=0)
    rank[END] = last + 1
    return rank


def _order(layers: list[list[str]], edges: list[_Edge]) -> None:
    """Reorder each layer by the mean position of its neighbours in the layer above (then
    below), a few times."""
    up: dict[str, list[str]] = {}
    down: dict[str, list[str]] = {}
    for edge in edges:
        if not edge.back:
            up.setdefault(edge.target, []).append(edge.source)
            down.setdefault(edge.source, []).append(edge.target)
    for sweep in range(4):
        neighbours = up if sweep % 2 == 0 else down
        indices = range(1, len(layers)) if sweep % 2 == 0 else range(len(layers) - 2, -1, -1)
        for i in indices:
            other = layers[i - 1] if sweep % 2 == 0 else layers[i + 1]
            position = {node: p for p, node in enumerate(other)}
            weights: dict[str, float] = {}
            for here, node in enumerate(layers[i]):
                linked = [position[n] for n in neighbours.get(node, []) if n in position]
                weights[node] = sum(linked) / len(linked) if linked else float(here)
            layers[i].sort(key=weights.__getitem__)


def layout(spec: GraphSpec) -> Layout:
    nodes = [START, *spec.nodes, END]
    edges = _merged_edges(spec)
    _mark_back_edges(nodes, edges)
    ranks = _ranks(nodes, edges)
    layers: list[list[str]] = [[] for _ in range(max(ranks.values()) + 1)]
    for node in nodes:
        layers[ranks[node]].append(node)
    _order(layers, edges)
    widths = {n: max(72.0, len(_label(n)) * CHAR_WIDTH + 28) for n in nodes}
    spans = [sum(widths[n] for n in layer) + NODE_GAP * (len(layer) - 1) for layer in layers]
    inner = max(spans, default=0.0)
    loops = sum(1 for e in edges if e.back or e.source == e.target)
    width = inner + 2 * MARGIN + 40 + LOOP_GAP * loops
    placed: dict[str, tuple[float, float, float]] = {}
    for i, layer in enumerate(layers):
        x = MARGIN + (inner - spans[i]) / 2
        y = MARGIN + NODE_HEIGHT / 2 + i * (NODE_HEIGHT + LAYER_GAP)
        for node in layer:
            placed[node] = (x + widths[node] / 2, y, widths[node])
            x += widths[node] + NODE_GAP
    height = 2 * MARGIN + len(layers) * NODE_HEIGHT + (len(layers) - 1) * LAYER_GAP
    return Layout(placed, edges, width, height, ranks)


def _fmt(value: float) -> str:
    return f"{value:.1f}".rstrip("0").rstrip(".")


def _edge_path(edge: _Edge, box: Layout, loop_x: float) -> tuple[str, float, float, int]:
    """The SVG path of ``edge``, where its label goes, and on which side of that point (-1 to
    its left, 0 centred on it, 1 to its right: beside an edge that goes around nodes, off
    them)."""
    sx, sy, sw = box.nodes[edge.source]
    tx, ty, tw = box.nodes[edge.target]
    half = NODE_HEIGHT / 2
    if edge.back or edge.source == edge.target:
        x1, x2 = sx + sw / 2, tx + tw / 2
        path = (
            f"M{_fmt(x1)},{_fmt(sy)} C{_fmt(loop_x)},{_fmt(sy)} {_fmt(loop_x)},{_fmt(ty)} "
            f"{_fmt(x2 + 6)},{_fmt(ty)}"
        )
        return path, loop_x - 4, (sy + ty) / 2, 0
    y1, y2 = sy + half, ty - half - 4
    bypass = _bypass(edge, box, sx, tx)
    if bypass is not None:  # a node of a layer in between is in the way: go around it
        path = (
            f"M{_fmt(sx)},{_fmt(y1)} C{_fmt(bypass)},{_fmt(y1 + LAYER_GAP)} "
            f"{_fmt(bypass)},{_fmt(y2 - LAYER_GAP)} {_fmt(tx)},{_fmt(y2)}"
        )
        middle = (sx + tx) / 8 + 0.75 * bypass  # (the curve's own middle)
        return path, middle, (y1 + y2) / 2, 1 if bypass > (sx + tx) / 2 else -1
    bend = (y2 - y1) / 2
    path = (
        f"M{_fmt(sx)},{_fmt(y1)} C{_fmt(sx)},{_fmt(y1 + bend)} {_fmt(tx)},{_fmt(y2 - bend)} "
        f"{_fmt(tx)},{_fmt(y2)}"
    )
    return path, (sx + tx) / 2, (y1 + y2) / 2, 0


def _bypass(edge: _Edge, box: Layout, sx: float, tx: float) -> float | None:
    """For an edge over several layers whose straight course crosses a node: the x of a course
    beside the nodes in between (on the side with more room), else ``None``."""
    low, high = box.ranks[edge.source], box.ranks[edge.target]
    between = [(x, w) for node, (x, _, w) in box.nodes.items() if low < box.ranks[node] < high]
    left, right = min(sx, tx) - 8, max(sx, tx) + 8
    if not any(x - w / 2 < right and x + w / 2 > left for x, w in between):
        return None
    leftmost = min(x - w / 2 for x, w in between) - NODE_GAP / 2
    rightmost = max(x + w / 2 for x, w in between) + NODE_GAP / 2
    centre = (sx + tx) / 2
    return leftmost if centre - leftmost < rightmost - centre else rightmost


def enclosing(spec: GraphSpec, node: str | None) -> str | None:
    """``node`` if it is one of ``spec``'s, else the compiled subgraph node of ``spec`` whose
    graph (or a graph nested in it) has it; ``None`` if none has."""
    if node is None or node in spec.nodes:
        return node
    for sub_id, compiled in spec.subgraphs.items():
        child = getattr(compiled, "spec", None)
        if isinstance(child, GraphSpec) and enclosing(child, node) is not None:
            return sub_id
    return None


def render_svg(
    spec: GraphSpec,
    *,
    highlight: str | None = None,
    status: str | None = None,
    visited: Collection[str] = (),
    title: str | None = None,
    ident: str = "g",
) -> str:
    """The graph as an ``<svg>`` element; ``ident`` makes its marker ids unique in a page.
    A ``highlight`` that is a node of a compiled subgraph (where a child run parked, failed or
    runs) highlights the subgraph's node in this graph."""
    box = layout(spec)
    highlight = enclosing(spec, highlight)
    esc = html.escape
    marker = f"arrow-{''.join(c for c in ident if c.isalnum()) or 'g'}"
    left, right = 0.0, box.width  # (widened for labels beside edges that go around nodes)
    parts = [
        "",  # (the <svg> tag, once its width is known)
        f'<defs><marker id="{marker}" viewBox="0 0 10 10" refX="9" refY="5" markerWidth="7" '
        'markerHeight="7" orient="auto-start-reverse"><path d="M0,0 L10,5 L0,10 z" '
        'fill="#555"/></marker></defs>',
    ]
    loop_x = max((x + w / 2 for x, _, w in box.nodes.values()), default=0.0) + 30
    labels: list[str] = []
    for edge in box.edges:
        if edge.back or edge.source == edge.target:
            loop_x += LOOP_GAP
        path, lx, ly, side = _edge_path(edge, box, loop_x)
        dash = ' stroke-dasharray="5 4"' if edge.conditional else ""
        kind = "edge conditional" if edge.conditional else "edge"
        parts.append(
            f'<path class="{kind}" d="{path}" fill="none" stroke="#555" stroke-width="1.4"'
            f'{dash} marker-end="url(#{marker})"><title>{esc(edge.source)} \u2192 '
            f"{esc(edge.target)}</title></path>"
        )
        if edge.labels:
            text = ", ".join(edge.labels)
            text = text if len(text) <= MAX_LABEL else text[: MAX_LABEL - 1] + "\u2026"
            width = len(text) * 6.6 + 10
            lx += side * (width / 2 + 4)
            left, right = min(left, lx - width / 2 - 4), max(right, lx + width / 2 + 4)
            labels.append(
                f'<g class="edge-label"><rect x="{_fmt(lx - width / 2)}" y="{_fmt(ly - 9)}" '
                f'width="{_fmt(width)}" height="18" rx="4" fill="#fff" stroke="#ccc"/>'
                f'<text x="{_fmt(lx)}" y="{_fmt(ly + 4)}" text-anchor="middle" font-size="11" '
                f'fill="#333">{esc(text)}</text></g>'
            )
    parts.extend(labels)
    for node, (x, y, w) in box.nodes.items():
        classes = ["node"]
        if node in (START, END):
            classes.append("terminal")
        if node in visited:
            classes.append("visited")
        if node in spec.subgraphs:
            classes.append("subgraph")  # (a compiled subgraph: drawn with a dashed border)
        if node == highlight:
            classes += ["current", f"status-{status or 'running'}"]
        radius = NODE_HEIGHT / 2 if node in (START, END) else 6
        fill = "#eef2f7" if node in (START, END) else "#ffffff"
        parts.append(
            f'<g class="{" ".join(classes)}" data-node="{esc(node)}"><title>{esc(node)}</title>'
            f'<rect x="{_fmt(x - w / 2)}" y="{_fmt(y - NODE_HEIGHT / 2)}" width="{_fmt(w)}" '
            f'height="{NODE_HEIGHT}" rx="{_fmt(radius)}" fill="{fill}" stroke="#456" '
            f'stroke-width="1.3"/><text x="{_fmt(x)}" y="{_fmt(y + 4.5)}" text-anchor="middle" '
            f'font-size="13" fill="#123">{esc(_label(node))}</text></g>'
        )
    width = right - left
    parts[0] = (
        f'<svg xmlns="http://www.w3.org/2000/svg" class="graph" viewBox="{_fmt(left)} 0 '
        f'{_fmt(width)} {_fmt(box.height)}" width="{_fmt(width)}" height="{_fmt(box.height)}" '
        f'role="img" aria-label="{esc(title or "graph")}">'
    )
    parts.append("</svg>")
    return "".join(parts)


def nodes_of(spec: GraphSpec) -> Iterable[str]:
    return [START, *spec.nodes, END]
