"""Diagrams of a graph as text: Mermaid flowcharts and PlantUML."""

from __future__ import annotations

import re

from langgraph_celery.graph.builder import GraphSpec
from langgraph_celery.graph.types import END, START, GraphRepresentation

__all__ = ["draw"]

_KINDS = ("mermaid", "plantuml")


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


def _quote(text: str) -> str:
    return text.replace('"', "'")


def _mermaid(spec: GraphSpec, title: str | None) -> str:
    lines = []
    if title:
        lines += ["---", f"title: {_quote(title)}", "---"]
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
    if title:
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
    """The graph as ``kind`` text (``"mermaid"`` or ``"plantuml"``)."""
    normalized = str(getattr(kind, "value", kind)).lower()
    if normalized == "mermaid":
        return GraphRepresentation("mermaid", _mermaid(spec, title))
    if normalized == "plantuml":
        return GraphRepresentation("plantuml", _plantuml(spec, title))
    raise ValueError(f"unknown graph representation {kind!r}; use one of {', '.join(_KINDS)}")
