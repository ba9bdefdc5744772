"""Diagrams of a graph as text: Mermaid flowcharts and PlantUML.

Every text drawn (the title, node names, edge labels) is one line: each control character (line
breaks, tabs, Unicode line and paragraph separators) becomes a space, so no text can end its line
and add lines of diagram syntax (a second ``@startuml`` diagram, a Mermaid front matter key).  A
Mermaid title is YAML: written plain when it is a simple phrase, double-quoted otherwise.
"""

from __future__ import annotations

import re

from langgraph_celery.graph.builder import GraphSpec
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
    # Injective: letters and digits stay, every other character (``_`` included) becomes
    # ``_<hex>_``, so "step 1" and "step_1" never share an identifier.
    cleaned = re.sub(r"[^A-Za-z0-9]", lambda m: f"_{ord(m.group()):x}_", node)
    return f"n_{cleaned}"


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


def _mermaid(spec: GraphSpec, title: str | None) -> str:
    lines = []
    if title := _title(title):
        lines += ["---", f"title: {_yaml_title(title)}", "---"]
    lines.append("flowchart TD")
    lines.append(f'    {_ident(START)}(("{START}"))')
    lines.extend(f'    {_ident(node)}["{_quote(node)}"]' for node in spec.nodes)
    lines.append(f'    {_ident(END)}(("{END}"))')
    for source, target, label, conditional in _edges(spec):
        arrow = "-.->" if conditional else "-->"
        text = f'|"{_quote(label)}"|' if label is not None else ""
        lines.append(f"    {_ident(source)} {arrow}{text} {_ident(target)}")
    return "\n".join(lines) + "\n"


def _plantuml(spec: GraphSpec, title: str | None) -> str:
    lines = ["@startuml"]
    if title := _title(title):
        lines.append(f"title {title}")
    lines.append(f'circle "{START}" as {_ident(START)}')
    lines.extend(f'usecase "{_quote(node)}" as {_ident(node)}' for node in spec.nodes)
    lines.append(f'circle "{END}" as {_ident(END)}')
    for source, target, label, conditional in _edges(spec):
        arrow = "-[dotted]->" if conditional else "-->"
        text = f' : "{_quote(label)}"' if label is not None else ""
        lines.append(f"{_ident(source)} {arrow} {_ident(target)}{text}")
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
