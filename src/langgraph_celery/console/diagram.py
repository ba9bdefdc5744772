"""A graph drawn as SVG on the server, so that pages show diagrams without any JavaScript library.

Mermaid's renderer is JavaScript that no PyPI package we trust ships on its own, and the console
must work with no internet; the console therefore lays the graph out itself, simply:

* nodes go in layers by their longest path from ``START`` (edges that close a loop are left out
  of the layering), ``END`` in the last layer;
* within a layer, nodes are ordered by the mean position of their neighbours (a few sweeps down
  and up), which untangles most agent graphs;
* edges into the next layers are curves downwards, loops are drawn on the right-hand side;
  an edge over several layers whose course would cross a node goes around the nodes in
  between; conditional edges are dashed and carry their labels, each where it covers no node
  and no other label when its edge has such a place;
* a subgraph node (merged or compiled) is a block that holds its graph, laid out the same way,
  nested as deep as subgraphs nest; the enclosing graph's edges reach the block.

The nodes and edges are the ones the Mermaid text of ``get_graph("mermaid")`` draws.  Every text
is escaped.  Each node carries the id a run records for it (``data-node``): a merged subgraph's
nodes their merged ids (``"{id}-{child}"``), a compiled subgraph's nodes their own.  A node can
be highlighted (``current``, with the run's status as a class; the blocks around it are marked
``holds-current``) and nodes a thread went through marked ``visited``.
"""

from __future__ import annotations

import html
from collections.abc import Collection, Sequence
from dataclasses import dataclass, field

from langgraph_celery.graph._spec import GraphSpec
from langgraph_celery.graph.draw import _child, _edges, _view
from langgraph_celery.graph.types import END, START

__all__ = ["Layout", "layout", "render_svg"]

NODE_HEIGHT = 36
LAYER_GAP = 64
NODE_GAP = 36
MARGIN = 32
CHAR_WIDTH = 7.6
MAX_LABEL = 32
LOOP_GAP = 18
#: a block's margin around its graph, and the height of its title above it
BLOCK_PAD = 12
BLOCK_TITLE = 22


@dataclass
class _Edge:
    source: str
    target: str
    labels: list[str] = field(default_factory=list)
    conditional: bool = False
    back: bool = False
    #: set by :func:`layout`: the SVG path, and the label's box (centre x, centre y, width)
    path: str = ""
    label: tuple[float, float, float] | None = None


@dataclass
class Layout:
    """Positions (centre x, centre y, width) of nodes, the edges between them, the blocks of
    subgraph nodes (each its own layout, drawn inside the node's box) and the drawing's extent
    (``left`` is where it starts: labels beside edges may lie left of the nodes)."""

    nodes: dict[str, tuple[float, float, float]]
    edges: list[_Edge]
    width: float
    height: float
    ranks: dict[str, int]
    #: the id a run records for each node (``data-node``)
    ids: dict[str, str] = field(default_factory=dict)
    blocks: dict[str, Layout] = field(default_factory=dict)
    left: float = 0.0
    #: whether runs record the nodes of this graph in the enclosing graph's checkpoints (the
    #: graph of a merged subgraph), so that ``visited`` applies inside
    merged: bool = False

    def height_of(self, node: str) -> float:
        block = self.blocks.get(node)
        return NODE_HEIGHT if block is None else block.height + BLOCK_TITLE

    def path_to(self, node_id: str | Sequence[str] | None) -> list[str]:
        """The nodes from this layout's down to the one whose run id is ``node_id``: a node
        of this graph first, then of its blocks, outer ones first; ``[]`` if none is.
        ``node_id`` may be a parked run's ``subgraph_path`` (the run ids from this graph's
        node down through compiled subgraphs), which tells apart nodes of the same id."""
        if node_id is None or isinstance(node_id, str):
            return self._search(node_id, merged_only=False) if node_id else []
        path: list[str] = []
        box: Layout | None = self
        for part in node_id:
            found = box._search(part, merged_only=True) if box is not None else []
            if not found:
                return []
            path += found
            box = _descend(box, found) if box is not None else None
        return path

    def _search(self, node_id: str, merged_only: bool) -> list[str]:
        level: list[tuple[list[str], Layout]] = [([], self)]
        while level:
            for path, box in level:
                for node, ident in box.ids.items():
                    if ident == node_id and node not in (START, END):
                        return [*path, node]
            level = [
                ([*path, node], block)
                for path, box in level
                for node, block in box.blocks.items()
                if block.merged or not merged_only
            ]
        return []


def _descend(box: Layout, path: list[str]) -> Layout | None:
    """The layout of the block at the end of ``path`` (``None`` if it ends at a node)."""
    for node in path:
        found = box.blocks.get(node)
        if found is None:
            return None
        box = found
    return box


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


def layout(spec: GraphSpec, prefix: str | None = None, margin: float = MARGIN) -> Layout:
    """Lay ``spec`` out as built (subgraph nodes as blocks).  Inside the block of a merged
    subgraph node, ``prefix`` is that node's merged id: its nodes run as
    ``"{prefix}-{node}"``."""
    view = _view(spec)
    nodes = [START, *view.nodes, END]
    ids = {node: f"{prefix}-{node}" if prefix else node for node in view.nodes}
    ids[START], ids[END] = START, END
    blocks: dict[str, Layout] = {}
    for node in view.nodes:
        child = _child(view, node)
        if child is not None:
            merged = ids[node] if node in view.merged else None
            blocks[node] = layout(child, merged, BLOCK_PAD)
    edges = _merged_edges(view)
    _mark_back_edges(nodes, edges)
    ranks = _ranks(nodes, edges)
    layers: list[list[str]] = [[] for _ in range(max(ranks.values()) + 1)]
    for node in nodes:
        layers[ranks[node]].append(node)
    _order(layers, edges)
    widths = {n: max(72.0, len(_label(n)) * CHAR_WIDTH + 28) for n in nodes}
    for node, block in blocks.items():
        widths[node] = max(widths[node], block.width)
    box = Layout({}, edges, 0.0, 0.0, ranks, ids, blocks, merged=prefix is not None)
    spans = [sum(widths[n] for n in layer) + NODE_GAP * (len(layer) - 1) for layer in layers]
    inner = max(spans, default=0.0)
    y = margin
    for i, layer in enumerate(layers):
        x = margin + (inner - spans[i]) / 2
        tallest = max(box.height_of(node) for node in layer)
        for node in layer:
            box.nodes[node] = (x + widths[node] / 2, y + tallest / 2, widths[node])
            x += widths[node] + NODE_GAP
        y += tallest + LAYER_GAP
    box.height = y - LAYER_GAP + margin
    box.width = inner + 2 * margin
    _route(box, margin)
    return box


def _fmt(value: float) -> str:
    return f"{value:.1f}".rstrip("0").rstrip(".")


#: where a label may go along its edge, best first: at these fractions of the height the edge
#: (or the straight part of an edge that goes around nodes) spans, then just below its source
#: and just above its target's arrowhead (in the gaps between layers, past the nodes of the
#: layers in between)
_LABEL_HEIGHTS = (0.5, 0.3, 0.7)
#: how far from the top and from the bottom of an edge its last two spots are
LABEL_ENDS = (12.0, 20.0)
#: the room a label keeps from nodes and from the labels placed before it
LABEL_PAD = 2.0
#: how far apart edges that go around the same nodes run
LANE_GAP = 8.0

#: (x, y, side): a point where a label may go, and on which side of it (-1 to its left, 0
#: centred on it, 1 to its right: beside an edge that goes around nodes, off them)
_Spot = tuple[float, float, int]
#: a rectangle: left, top, right, bottom
_Rect = tuple[float, float, float, float]


def _route(box: Layout, margin: float) -> None:
    """Set each edge's path and label box, and widen the drawing to hold loops, the edges that
    go around nodes, and labels.  A label goes at the first of its edge's spots where it
    covers no node and no label placed before it (at the first spot if there is none)."""
    loop_x = max((x + w / 2 for x, _, w in box.nodes.values()), default=0.0) + 30
    left, right = 0.0, box.width
    taken = [_node_rect(box, node) for node in box.nodes]
    lanes: dict[float, int] = {}
    for edge in box.edges:
        if edge.back or edge.source == edge.target:
            loop_x += LOOP_GAP
            right = max(right, loop_x + margin)
        edge.path, spots, (low, high) = _edge_path(edge, box, loop_x, lanes)
        left, right = min(left, low), max(right, high)
        if edge.labels:
            width = min(len(", ".join(edge.labels)), MAX_LABEL) * 6.6 + 10
            edge.label = _place_label(spots, width, taken)
            lx = edge.label[0]
            left, right = min(left, lx - width / 2 - 4), max(right, lx + width / 2 + 4)
    box.left, box.width = left, right - left


def _node_rect(box: Layout, node: str) -> _Rect:
    x, y, w = box.nodes[node]
    h = box.height_of(node)
    return (x - w / 2, y - h / 2, x + w / 2, y + h / 2)


def _place_label(
    spots: list[_Spot], width: float, taken: list[_Rect]
) -> tuple[float, float, float]:
    """The box (centre x, centre y, width) of a label at the first of ``spots`` where it
    overlaps none of ``taken`` (else at the first spot); its rectangle is then taken."""
    boxes: list[tuple[float, float, _Rect]] = []
    for x, y, side in spots:
        cx = x + side * (width / 2 + 4)
        boxes.append((cx, y, (cx - width / 2, y - 9, cx + width / 2, y + 9)))
    cx, cy, rect = next((b for b in boxes if not _overlaps(b[2], taken)), boxes[0])
    taken.append(rect)
    return cx, cy, width


def _overlaps(rect: _Rect, others: list[_Rect]) -> bool:
    left, top, right, bottom = rect
    pad = LABEL_PAD
    return any(
        left < o_right + pad
        and o_left - pad < right
        and top < o_bottom + pad
        and o_top - pad < bottom
        for o_left, o_top, o_right, o_bottom in others
    )


def _curve_point(points: tuple[tuple[float, float], ...], t: float) -> tuple[float, float]:
    """The point at time ``t`` of the cubic Bézier curve through ``points`` (four of them)."""
    (x0, y0), (x1, y1), (x2, y2), (x3, y3) = points
    a, b, c, d = (1 - t) ** 3, 3 * (1 - t) ** 2 * t, 3 * (1 - t) * t**2, t**3
    return a * x0 + b * x1 + c * x2 + d * x3, a * y0 + b * y1 + c * y2 + d * y3


def _at_height(points: tuple[tuple[float, float], ...], y: float) -> tuple[float, float]:
    """The point of a curve that goes down (as an edge between layers does) at height ``y``."""
    low, high = 0.0, 1.0
    for _ in range(24):
        middle = (low + high) / 2
        low, high = (middle, high) if _curve_point(points, middle)[1] < y else (low, middle)
    return _curve_point(points, (low + high) / 2)


def _heights(top: float, bottom: float) -> list[float]:
    """The heights of the spots for a label beside a course from ``top`` down to ``bottom``."""
    span = bottom - top
    return [top + span * f for f in _LABEL_HEIGHTS] + [top + LABEL_ENDS[0], bottom - LABEL_ENDS[1]]


def _edge_path(
    edge: _Edge, box: Layout, loop_x: float, lanes: dict[float, int]
) -> tuple[str, list[_Spot], tuple[float, float]]:
    """The SVG path of ``edge``, the spots where its label may go (best first), and how far
    left and right the path reaches.  ``lanes`` counts the edges that go around nodes at each
    x, so that each of them runs apart from the others."""
    sx, sy, sw = box.nodes[edge.source]
    tx, ty, tw = box.nodes[edge.target]
    if edge.back or edge.source == edge.target:
        x1, x2 = sx + sw / 2, tx + tw / 2
        path = (
            f"M{_fmt(x1)},{_fmt(sy)} C{_fmt(loop_x)},{_fmt(sy)} {_fmt(loop_x)},{_fmt(ty)} "
            f"{_fmt(x2 + 6)},{_fmt(ty)}"
        )
        return path, [(loop_x - 4, (sy + ty) / 2, 0)], (min(x1, x2), loop_x)
    y1, y2 = sy + box.height_of(edge.source) / 2, ty - box.height_of(edge.target) / 2 - 4
    around = _bypass(edge, box, sx, tx)
    if around is not None:  # a node of a layer in between is in the way: go around them
        x, top, bottom = around
        side = 1 if x > (sx + tx) / 2 else -1
        lane = lanes.get(x, 0)
        lanes[x] = lane + 1
        x += side * lane * LANE_GAP
        down, up = (y1 + top) / 2, (bottom + y2) / 2
        path = (
            f"M{_fmt(sx)},{_fmt(y1)} C{_fmt(sx)},{_fmt(down)} {_fmt(x)},{_fmt(down)} "
            f"{_fmt(x)},{_fmt(top)} L{_fmt(x)},{_fmt(bottom)} "
            f"C{_fmt(x)},{_fmt(up)} {_fmt(tx)},{_fmt(up)} {_fmt(tx)},{_fmt(y2)}"
        )
        spots = [(x, y, side) for y in _heights(top, bottom)]
        return path, spots, (min(sx, tx, x) - 2, max(sx, tx, x) + 2)
    bend = (y2 - y1) / 2
    curve = ((sx, y1), (sx, y1 + bend), (tx, y2 - bend), (tx, y2))
    path = (
        f"M{_fmt(sx)},{_fmt(y1)} C{_fmt(sx)},{_fmt(y1 + bend)} {_fmt(tx)},{_fmt(y2 - bend)} "
        f"{_fmt(tx)},{_fmt(y2)}"
    )
    spots = [(*_at_height(curve, y), 0) for y in _heights(y1, y2)]
    return path, spots, (min(sx, tx), max(sx, tx))


def _bypass(edge: _Edge, box: Layout, sx: float, tx: float) -> tuple[float, float, float] | None:
    """For an edge over several layers whose straight course crosses a node: the x of a course
    beside the nodes in between (on the side with more room), and the top and bottom of
    those nodes; else ``None``."""
    low, high = box.ranks[edge.source], box.ranks[edge.target]
    between = [node for node in box.nodes if low < box.ranks[node] < high]
    rects = [_node_rect(box, node) for node in between]
    left, right = min(sx, tx) - 8, max(sx, tx) + 8
    if not any(r_left < right and r_right > left for r_left, _, r_right, _ in rects):
        return None
    leftmost = min(r[0] for r in rects) - NODE_GAP / 2
    rightmost = max(r[2] for r in rects) + NODE_GAP / 2
    centre = (sx + tx) / 2
    x = leftmost if centre - leftmost < rightmost - centre else rightmost
    return x, min(r[1] for r in rects), max(r[3] for r in rects)


@dataclass
class _Marks:
    """What a drawing marks: the path to the highlighted node (see :meth:`Layout.path_to`),
    the run's status, the nodes its thread went through, the arrows' marker id, and whether
    the drawing is the page's graph (whose START and END are the run's) or a block's."""

    path: list[str]
    status: str
    visited: Collection[str]
    marker: str
    outer: bool = True


def _node_svg(box: Layout, node: str, classes: list[str], data: str) -> str:
    esc = html.escape
    x, y, w = box.nodes[node]
    terminal = node in (START, END)
    radius = NODE_HEIGHT / 2 if terminal else 6
    fill = "#eef2f7" if terminal else "#ffffff"
    return (
        f'<g class="{" ".join(classes)}"{data}><title>{esc(box.ids[node])}</title>'
        f'<rect x="{_fmt(x - w / 2)}" y="{_fmt(y - NODE_HEIGHT / 2)}" width="{_fmt(w)}" '
        f'height="{NODE_HEIGHT}" rx="{_fmt(radius)}" fill="{fill}" stroke="#456" '
        f'stroke-width="1.3"/><text x="{_fmt(x)}" y="{_fmt(y + 4.5)}" text-anchor="middle" '
        f'font-size="13" fill="#123">{esc(_label(node))}</text></g>'
    )


def _draw(box: Layout, marks: _Marks, parts: list[str]) -> None:
    """Append ``box``'s edges, labels and nodes (blocks with their graphs inside) to
    ``parts``, in ``box``'s own coordinates."""
    esc = html.escape
    for edge in box.edges:
        dash = ' stroke-dasharray="5 4"' if edge.conditional else ""
        kind = "edge conditional" if edge.conditional else "edge"
        parts.append(
            f'<path class="{kind}" d="{edge.path}" fill="none" stroke="#555" stroke-width="1.4"'
            f'{dash} marker-end="url(#{marks.marker})"><title>{esc(box.ids[edge.source])} '
            f"\u2192 {esc(box.ids[edge.target])}</title></path>"
        )
    for edge in box.edges:
        if edge.label is not None:
            lx, ly, width = edge.label
            text = ", ".join(edge.labels)
            text = text if len(text) <= MAX_LABEL else text[: MAX_LABEL - 1] + "\u2026"
            parts.append(
                f'<g class="edge-label"><rect x="{_fmt(lx - width / 2)}" y="{_fmt(ly - 9)}" '
                f'width="{_fmt(width)}" height="18" rx="4" fill="#fff" stroke="#ccc"/>'
                f'<text x="{_fmt(lx)}" y="{_fmt(ly + 4)}" text-anchor="middle" font-size="11" '
                f'fill="#333">{esc(text)}</text></g>'
            )
    here = marks.path[0] if marks.path else None
    for node, (x, y, w) in box.nodes.items():
        terminal = node in (START, END)
        block = box.blocks.get(node)
        classes = ["node"] if block is None else ["block", "merged" if block.merged else "compiled"]
        if terminal:
            classes.append("terminal")
        elif box.ids[node] in marks.visited:
            classes.append("visited")
        if node == here:
            inside = len(marks.path) > 1
            classes += ["holds-current" if inside else "current", f"status-{marks.status}"]
        # (the START and END of a block carry no id: they are not nodes a run records)
        data = "" if terminal and not marks.outer else f' data-node="{esc(box.ids[node])}"'
        if block is None:
            parts.append(_node_svg(box, node, classes, data))
            continue
        top = y - box.height_of(node) / 2
        parts.append(
            f'<g class="{" ".join(classes)}"{data}><title>{esc(box.ids[node])}</title>'
            f'<rect x="{_fmt(x - w / 2)}" y="{_fmt(top)}" width="{_fmt(w)}" '
            f'height="{_fmt(box.height_of(node))}" rx="8" fill="#f8fafc" stroke="#456" '
            f'stroke-width="1.3"/><text class="block-title" x="{_fmt(x - w / 2 + BLOCK_PAD)}" '
            f'y="{_fmt(top + 16)}" font-size="12" font-weight="600" fill="#345">'
            f"{esc(_label(node))}</text>"
            f'<g transform="translate({_fmt(x - block.width / 2 - block.left)},'
            f'{_fmt(top + BLOCK_TITLE)})">'
        )
        inner = _Marks(
            marks.path[1:] if node == here else [],
            marks.status,
            marks.visited if block.merged else (),
            marks.marker,
            outer=False,
        )
        _draw(block, inner, parts)
        parts.append("</g></g>")


def render_svg(
    spec: GraphSpec,
    *,
    highlight: str | Sequence[str] | None = None,
    status: str | None = None,
    visited: Collection[str] = (),
    title: str | None = None,
    ident: str = "g",
) -> str:
    """The graph as an ``<svg>`` element; ``ident`` makes its marker ids unique in a page.
    ``highlight`` is the id a run records for a node: of this graph, of a merged subgraph, or
    of a compiled subgraph's graph (where a child run parked, failed or runs); or, for a run
    parked in a compiled subgraph, its ``subgraph_path`` (see :meth:`Layout.path_to`)."""
    box = layout(spec)
    marker = f"arrow-{''.join(c for c in ident if c.isalnum()) or 'g'}"
    parts = [
        f'<svg xmlns="http://www.w3.org/2000/svg" class="graph" viewBox="{_fmt(box.left)} 0 '
        f'{_fmt(box.width)} {_fmt(box.height)}" width="{_fmt(box.width)}" '
        f'height="{_fmt(box.height)}" role="img" aria-label="{html.escape(title or "graph")}">',
        f'<defs><marker id="{marker}" viewBox="0 0 10 10" refX="9" refY="5" markerWidth="7" '
        'markerHeight="7" orient="auto-start-reverse"><path d="M0,0 L10,5 L0,10 z" '
        'fill="#555"/></marker></defs>',
    ]
    _draw(box, _Marks(box.path_to(highlight), status or "running", visited, marker), parts)
    parts.append("</svg>")
    return "".join(parts)
