"""Diagrams of a graph as text: Mermaid flowcharts and PlantUML.

A subgraph node (merged, ``add_node(id, StateGraph)``, or compiled, ``add_node(id,
CompiledGraph)``) is drawn as a block of its own (Mermaid ``subgraph``, PlantUML ``package``)
holding the subgraph's START, nodes, END and edges, nested as deep as subgraphs nest; the
enclosing graph's edges reach the block.  A merged graph is drawn as built (its
:attr:`GraphSpec.outline`), not as the merged nodes it runs.

Every text drawn (the title, node names, edge labels) is one line: each control character (line
breaks, tabs, Unicode line and paragraph separators) becomes a space, so no text can end its line
and add lines of diagram syntax (a second ``@startuml`` diagram, a Mermaid front matter key).  A
Mermaid title is YAML: written plain when it is a simple phrase, double-quoted otherwise.
"""

from __future__ import annotations

import re

from langgraph_celery.graph._spec import GraphSpec
from langgraph_celery.graph.types import END, START, GraphRepresentation

__all__ = ["CONTROL_CHARACTERS", "draw"]

_KINDS = ("mermaid", "plantuml")
#: Unicode's control characters (category Cc) and its line and paragraph separators.
CONTROL_CHARACTERS = re.compile(r"[\x00-\x1f\x7f-\x9f\u2028\u2029]")
#: A title YAML reads as the same plain string (no ``: ``, `` #``, quote, indicator or number).
_PLAIN_TITLE = re.compile(r"[A-Za-z_][A-Za-z0-9 _.,()+/-]*")
_YAML_WORDS = frozenset({"null", "true", "false", "yes", "no", "on", "off", "y", "n"})


def _edges(spec: GraphSpec) -> list[tuple[str, str, str | None, bool]]:
    """(source, target, label, conditional) for every edge of the graph (a command node's
    destinations are conditional edges)."""
    edges: list[tuple[str, str, str | None, bool]] = []
    for source, targets in spec.edges.items():
        edges.extend((source, target, None, False) for target in targets)
    for join in spec.joins:
        edges.extend((source, join.target, None, False) for source in join.sources)
    for source, destinations in spec.destinations.items():
        # a command node's destinations: where its Command may go, drawn as a conditional
        # edge's labelled targets
        edges.extend((source, target, str(label), True) for label, target in destinations.items())
    for source, edge in spec.conditional.items():
        if edge.mapping is None:
            edges.extend((source, node, node, True) for node in [*spec.nodes, END])
        else:
            edges.extend(
                (source, target, str(label), True) for label, target in edge.mapping.items()
            )
    return edges


def _ident(node: str) -> str:
    if node == START:
        return "__start__"
    if node == END:
        return "__end__"
    return f"n_{_clean(node)}"


def _one_line(text: str) -> str:
    return CONTROL_CHARACTERS.sub(" ", text)


def _quote(text: str) -> str:
    return _one_line(text).replace('"', "'")


def _title(title: str | None) -> str:
    """The title as one line, without spaces around it ("" for none)."""
    return _one_line(title or "").strip()


def _yaml_title(title: str) -> str:
    if _PLAIN_TITLE.fullmatch(title) and title.lower() not in _YAML_WORDS:
        return title
    return '"' + title.replace("\\", "\\\\").replace('"', '\\"') + '"'


def _clean(node: str) -> str:
    # Injective: letters and digits stay, every other character (``_`` included) becomes
    # ``_<hex>_``, so "step 1" and "step_1" never share an identifier.
    return re.sub(r"[^A-Za-z0-9]", lambda m: f"_{ord(m.group()):x}_", node)


def _path_ident(path: tuple[str, ...]) -> str:
    """The identifier of a node inside nested blocks: ``path`` is the ids of the enclosing
    subgraph nodes, then the node's own (``START``/``END`` for a block's own circles).  The
    length of each part is written before it, so no two paths share one, nor a top-level
    node (``n_...``); a block's START and END end in ``_start`` and ``_end``."""
    if len(path) == 1:
        return _ident(path[0])
    *blocks, node = path
    parts = "".join(f"_{len(part)}_{part}" for part in map(_clean, blocks))
    last = {START: "_start", END: "_end"}.get(node) or f"_{len(_clean(node))}_{_clean(node)}"
    return f"s{parts}{last}"


def _view(spec: GraphSpec) -> GraphSpec:
    """The graph as built: merged subgraphs as nodes of their own (drawn as blocks)."""
    return spec.outline if spec.outline is not None else spec


def _child(spec: GraphSpec, node: str) -> GraphSpec | None:
    """The subgraph node ``node`` stands for (merged or compiled), or ``None``."""
    if node in spec.merged:
        return spec.merged[node]
    compiled = spec.subgraphs.get(node)
    return compiled.spec if compiled is not None else None


def _mermaid_body(spec: GraphSpec, path: tuple[str, ...], indent: str) -> list[str]:
    """A graph's circles, nodes (subgraphs as blocks) and edges; inside a block ``path`` is
    the ids of the enclosing subgraph nodes."""
    view = _view(spec)

    def ident(node: str) -> str:
        return _path_ident((*path, node))

    lines = [f'{indent}{ident(START)}(("{START}"))']
    for node in view.nodes:
        child = _child(view, node)
        if child is None:
            lines.append(f'{indent}{ident(node)}["{_quote(node)}"]')
        else:
            lines.extend(_mermaid_block(node, child, path, indent))
    lines.append(f'{indent}{ident(END)}(("{END}"))')
    for source, target, label, conditional in _edges(view):
        arrow = "-.->" if conditional else "-->"
        text = f'|"{_quote(label)}"|' if label is not None else ""
        lines.append(f"{indent}{ident(source)} {arrow}{text} {ident(target)}")
    return lines


def _mermaid_block(
    node: str, child: GraphSpec, path: tuple[str, ...] = (), indent: str = "    "
) -> list[str]:
    """Subgraph node ``node`` (merged or compiled), whose graph is ``child``, as a Mermaid
    ``subgraph ... end`` block: the child's own START, nodes, END and edges; nested subgraphs
    nest.  Edges of the enclosing graph reach the block by ``node``'s identifier."""
    inner = (*path, node)
    return [
        f'{indent}subgraph {_path_ident(inner)} ["{_quote(node)}"]',
        *_mermaid_body(child, inner, indent + "    "),
        f"{indent}end",
    ]


def _mermaid(spec: GraphSpec, title: str | None) -> str:
    lines = []
    if title := _title(title):
        lines += ["---", f"title: {_yaml_title(title)}", "---"]
    lines.append("flowchart TD")
    lines.extend(_mermaid_body(spec, (), "    "))
    return "\n".join(lines) + "\n"


def _plantuml_body(spec: GraphSpec, path: tuple[str, ...], indent: str) -> list[str]:
    view = _view(spec)

    def ident(node: str) -> str:
        return _path_ident((*path, node))

    lines = [f'{indent}circle "{START}" as {ident(START)}']
    for node in view.nodes:
        child = _child(view, node)
        if child is None:
            lines.append(f'{indent}usecase "{_quote(node)}" as {ident(node)}')
        else:
            lines.extend(_plantuml_block(node, child, path, indent))
    lines.append(f'{indent}circle "{END}" as {ident(END)}')
    for source, target, label, conditional in _edges(view):
        arrow = "-[dotted]->" if conditional else "-->"
        text = f' : "{_quote(label)}"' if label is not None else ""
        lines.append(f"{indent}{ident(source)} {arrow} {ident(target)}{text}")
    return lines


def _plantuml_block(
    node: str, child: GraphSpec, path: tuple[str, ...] = (), indent: str = ""
) -> list[str]:
    """Subgraph node ``node`` (merged or compiled), whose graph is ``child``, as a PlantUML
    ``package ... { }``: the child's own START, nodes, END and edges; nested subgraphs nest."""
    inner = (*path, node)
    return [
        f'{indent}package "{_quote(node)}" as {_path_ident(inner)} {{',
        *_plantuml_body(child, inner, indent + "  "),
        f"{indent}}}",
    ]


def _plantuml(spec: GraphSpec, title: str | None) -> str:
    lines = ["@startuml"]
    if title := _title(title):
        lines.append(f"title {title}")
    lines.extend(_plantuml_body(spec, (), ""))
    lines.append("@enduml")
    return "\n".join(lines) + "\n"


def draw(spec: GraphSpec, kind: str, title: str | None = None) -> GraphRepresentation:
    """The graph as ``kind`` text (``"mermaid"`` or ``"plantuml"``); control characters in the
    title and the labels are drawn as spaces."""
    normalized = str(getattr(kind, "value", kind)).lower()
    if normalized == "mermaid":
        return GraphRepresentation("mermaid", _mermaid(spec, title))
    if normalized == "plantuml":
        return GraphRepresentation("plantuml", _plantuml(spec, title))
    raise ValueError(f"unknown graph representation {kind!r}; use one of {', '.join(_KINDS)}")
