"""What ``compile()`` checks of a graph before freezing it: every problem the builder noted,
node and edge ids, reachability, and what interrupts, joins and command nodes name.  A graph
that fails raises :class:`GraphDefinitionError` naming the first problem and how to fix it."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from langgraph_celery.errors import GraphDefinitionError
from langgraph_celery.graph.config import CompileConfig
from langgraph_celery.graph.types import END, START

if TYPE_CHECKING:
    from langgraph_celery.graph._spec import GraphSpec

__all__ = ["validate"]


def validate(spec: GraphSpec, problems: Sequence[str], config: CompileConfig) -> None:
    if problems:
        raise GraphDefinitionError(problems[0])
    nodes = spec.nodes
    if START not in spec.edges and START not in spec.conditional:
        raise GraphDefinitionError(
            "the graph has no edge from START; add add_edge(START, '<first node>') or a "
            "conditional entry point"
        )
    known_sources = set(nodes) | {START}
    known_targets = set(nodes) | {END}
    for source, targets in spec.edges.items():
        if source == END:
            raise GraphDefinitionError("an edge leaves END; END is terminal")
        if source not in known_sources:
            raise GraphDefinitionError(f"edge from unknown node {source!r}; add_node it first")
        for target in targets:
            if target not in known_targets:
                raise GraphDefinitionError(
                    f"edge {source!r} -> {target!r} goes to unknown node {target!r}"
                )
    for join in spec.joins:
        for source in join.sources:
            if source not in nodes:
                raise GraphDefinitionError(f"join {join.key!r} waits on unknown node {source!r}")
        if join.target not in known_targets:
            raise GraphDefinitionError(f"join {join.key!r} goes to unknown node {join.target!r}")
    for source, edge in spec.conditional.items():
        if source not in known_sources:
            raise GraphDefinitionError(
                f"conditional edge from unknown node {source!r}; add_node it first"
            )
        if source in spec.edges:
            raise GraphDefinitionError(
                f"node {source!r} has both a plain and a conditional edge; use one of them"
            )
        for label, target in (edge.mapping or {}).items():
            if target not in known_targets:
                raise GraphDefinitionError(
                    f"conditional edge from {source!r} maps label {label!r} to unknown node "
                    f"{target!r}"
                )
    for node, destinations in spec.destinations.items():
        for label, target in destinations.items():
            if target not in known_targets:
                where = f"{label!r} -> {target!r}" if label != target else repr(target)
                raise GraphDefinitionError(
                    f"node {node!r} lists destination {where}, which is not a node; add_node "
                    "it, or use END"
                )
        other = (
            "a plain"
            if node in spec.edges
            else "a conditional"
            if node in spec.conditional
            else None
        )
        if other is not None:
            raise GraphDefinitionError(
                f"node {node!r} has destinations and {other} edge; its destinations are its "
                "outgoing edges (its Command picks among them): list every target there"
            )
    join_sources = {source for join in spec.joins for source in join.sources}
    for node in nodes:
        if (
            node not in spec.edges
            and node not in spec.conditional
            and node not in join_sources
            and node not in spec.destinations
        ):
            raise GraphDefinitionError(
                f"node {node!r} has no outgoing edge; add add_edge({node!r}, END) or another edge"
            )
    reachable = _reachable(spec)
    for node in nodes:
        if node not in reachable:
            raise GraphDefinitionError(f"node {node!r} is unreachable from START")
    for name, ids in (
        ("interrupt_before", config.interrupt_before),
        ("interrupt_after", config.interrupt_after),
    ):
        for node in ids:
            if node not in nodes:
                raise GraphDefinitionError(f"{name} names unknown node {node!r}")
    if (config.interrupt_before or config.interrupt_after) and config.checkpoint_saver is None:
        raise GraphDefinitionError(
            "interrupts need a checkpoint saver to resume from; pass "
            "CompileConfig(checkpoint_saver=MemorySaver()) or another saver"
        )
    for hook in spec.hooks:
        kinds = ("before_node", "after_node", "wrap_node")
        if hook.target is not None and hook.kind in kinds and hook.target not in nodes:
            raise GraphDefinitionError(f"a {hook.kind} hook names unknown node {hook.target!r}")


def _successors(spec: GraphSpec, node: str) -> set[str]:
    found = set(spec.edges.get(node, ()))
    found.update(spec.destinations.get(node, {}).values())
    edge = spec.conditional.get(node)
    if edge is not None:
        found |= set(edge.mapping.values()) if edge.mapping is not None else set(spec.nodes)
    for join in spec.joins:
        if node in join.sources:
            found.add(join.target)
    return found


def _reachable(spec: GraphSpec) -> set[str]:
    seen: set[str] = set()
    frontier = [START]
    while frontier:
        node = frontier.pop()
        for successor in _successors(spec, node):
            if successor not in seen and successor != END:
                seen.add(successor)
                frontier.append(successor)
    return seen
