"""Merged subgraphs: ``add_node(id, StateGraph)`` puts the child's nodes into the parent.

Each child node ``n`` becomes the parent's node ``f"{id}-{n}"`` (LangGraph4j's names), with its
action, timeout, destinations, joins and hooks.  Edges into ``id`` lead to the child's entry;
the child's edges to ``END`` (plain, conditional, a command node's destinations) continue with
``id``'s outgoing edges.  Two no-op *bridge* nodes are added where one node must stand for several
(as in LangGraph4j, whose tests see them run):

- ``f"{id}-__START__"`` when the child's entry is conditional (it carries the child's
  ``START`` route), or when the entry fans out and ``id`` is reached by a label (a conditional
  mapping, a command node's destinations, a join), which names one node;
- ``f"{id}-__END__"`` when ``id``'s outgoing edge is conditional (it carries that route), when
  ``id`` is one of a join's sources, or when ``id`` fans out and the child reaches ``END`` by a
  label.

The state is one: the child's channels join the parent's schema; a key both declare must have
the same reducer (the same function, or none in both), else a :class:`GraphDefinitionError`
names the key.  The parent's channel (its default) is the one used.  A typed parent's schema
gains the child's keys (validated by the child's pydantic fields, if any); an untyped parent
stays untyped (the child's field types are still registered with the saver's serializer).
Checkpoints, threads and interruptions are the parent's; ``interrupt_before=[id]`` stops before
the child's entry nodes (:attr:`GraphSpec.entries`), and ``interrupt_after=[id]`` is refused
(name a node of the child).

A child's hooks apply to the child's nodes only: a hook it registered for every node becomes one
per merged node, after the parent's hooks (so the parent's wrap hooks are outermost).  A parent
hook that names ``id`` applies to every node of the child (an edge hook: to its ``__END__`` bridge).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Hashable, Iterable, Mapping
from typing import Any

from langgraph_celery.errors import GraphDefinitionError
from langgraph_celery.graph._callables import CallableSpec
from langgraph_celery.graph._spec import ConditionalEdge, GraphSpec, Hook, Join
from langgraph_celery.graph._typed import TypedSchema
from langgraph_celery.graph.config import CompileConfig, check_id
from langgraph_celery.graph.state import Channel
from langgraph_celery.graph.types import END, START

__all__ = ["merge_subgraphs", "merged_id", "resolve_interrupts"]

_NODE_HOOKS = ("before_node", "after_node", "wrap_node")


def merged_id(node: str, child: str) -> str:
    """The id a child's node gets in its parent: ``f"{node}-{child}"``."""
    return f"{node}-{child}"


def _bridge(state: Any) -> None:
    """A bridge node's action: it changes nothing; its edges do the work."""
    return None


_BRIDGE = CallableSpec.of(_bridge)


def _unique(items: Iterable[str]) -> tuple[str, ...]:
    return tuple(dict.fromkeys(items))


def _one(targets: tuple[str, ...], where: str) -> str:
    if len(targets) != 1:  # the bridges exist so that this never happens
        raise GraphDefinitionError(f"{where} leads to several nodes {targets}; give it one")
    return targets[0]


def _merge_schema(
    schema: dict[str, Channel], node: str, child: Mapping[str, Channel]
) -> dict[str, Channel]:
    for key, channel in child.items():
        mine = schema.get(key)
        if mine is None:
            schema[key] = channel
        elif mine.reducer is not channel.reducer:
            raise GraphDefinitionError(
                f"state key {key!r} has reducer {channel.reducer!r} in subgraph {node!r} and "
                f"{mine.reducer!r} in its parent graph; a merged subgraph shares its parent's "
                "state: give the key the same reducer in both schemas (or leave it out of one)"
            )
    return schema


def _extend_typed(typed: TypedSchema | None, child: GraphSpec) -> TypedSchema | None:
    """The parent's typed schema with the child's keys added (a node may write them), checked
    by the child's validators when the parent validates (pydantic), else accepted as they are.
    An untyped parent stays untyped."""
    if typed is None:
        return None
    inner = child.typed
    added = (set(child.schema) | (set(inner.keys) if inner else set())) - typed.keys
    types = typed.types + tuple(t for t in (inner.types if inner else ()) if t not in typed.types)
    if not added and types == typed.types:
        return typed
    validators = dict(typed.validators)
    if validators:
        from pydantic import TypeAdapter

        for key in added:
            found = inner.validators.get(key) if inner is not None else None
            validators[key] = found if found is not None else TypeAdapter(Any)
    return dataclasses.replace(
        typed, keys=typed.keys | frozenset(added), validators=validators, types=types
    )


class _Merge:
    """One merge: the parent as built and its merged children (each already merged itself)."""

    def __init__(self, parent: GraphSpec, children: Mapping[str, GraphSpec]) -> None:
        self.parent = parent
        self.children = children
        by_label = {
            target
            for edge in parent.conditional.values()
            for target in (edge.mapping or {}).values()
        }
        by_label |= {t for dests in parent.destinations.values() for t in dests.values()}
        by_label |= {join.target for join in parent.joins}
        any_unmapped = any(edge.mapping is None for edge in parent.conditional.values())
        join_sources = {source for join in parent.joins for source in join.sources}
        self.start_bridge: dict[str, str] = {}
        self.end_bridge: dict[str, str] = {}
        self.entry: dict[str, tuple[str, ...]] = {}
        for node, child in children.items():
            starts = child.edges.get(START, ())
            if END in starts:
                raise GraphDefinitionError(
                    f"subgraph {node!r} has an edge from START to END; a merged subgraph must "
                    "run a node (route around it in the parent instead)"
                )
            if START in child.conditional or (
                len(starts) > 1 and (node in by_label or any_unmapped)
            ):
                self.start_bridge[node] = merged_id(node, START)
                self.entry[node] = (self.start_bridge[node],)
            else:
                self.entry[node] = tuple(merged_id(node, target) for target in starts)
            ends_by_label = any(
                edge.mapping is None or END in edge.mapping.values()
                for edge in child.conditional.values()
            )
            ends_by_label |= any(END in dests.values() for dests in child.destinations.values())
            ends_by_label |= any(join.target == END for join in child.joins)
            if (
                node in parent.conditional
                or node in join_sources
                or (len(parent.edges.get(node, ())) > 1 and ends_by_label)
            ):
                self.end_bridge[node] = merged_id(node, END)
        self.exit = {node: self._exit(node) for node in children}

    def into(self, target: str) -> tuple[str, ...]:
        """Where an edge to ``target`` (a parent's node id or END) leads after the merge."""
        return self.entry.get(target, (target,))

    def _exit(self, node: str) -> tuple[str, ...]:
        if node in self.end_bridge:
            return (self.end_bridge[node],)
        return _unique(t for target in self.parent.edges.get(node, ()) for t in self.into(target))

    # -- the merged graph ---------------------------------------------------------------------

    def nodes(self) -> dict[str, CallableSpec]:
        nodes: dict[str, CallableSpec] = {}
        for node, action in self.parent.nodes.items():
            child = self.children.get(node)
            if child is None:
                added = {node: action}
            else:
                added = {}
                if node in self.start_bridge:
                    added[self.start_bridge[node]] = _BRIDGE
                added.update({merged_id(node, n): a for n, a in child.nodes.items()})
                if node in self.end_bridge:
                    added[self.end_bridge[node]] = _BRIDGE
            for new in added:
                too_long = check_id("merged node id", new)
                if too_long:
                    raise GraphDefinitionError(f"subgraph {node!r}: {too_long}")
                if new in nodes or (new != node and new in self.parent.nodes):
                    raise GraphDefinitionError(
                        f"subgraph {node!r} adds node {new!r}, which the graph has already; "
                        "rename one of them"
                    )
            nodes.update(added)
        return nodes

    def _targets(self, node: str, target: str) -> tuple[str, ...]:
        """Where a child's edge to ``target`` leads in the parent."""
        return self.exit[node] if target == END else (merged_id(node, target),)

    def _child_mapping(
        self, node: str, child: GraphSpec, mapping: Mapping[Hashable, str] | None, where: str
    ) -> dict[Hashable, str]:
        labels: Mapping[Hashable, str] = (
            mapping if mapping is not None else {n: n for n in [*child.nodes, END]}
        )
        return {
            label: _one(self._targets(node, target), f"{where} label {label!r}")
            for label, target in labels.items()
        }

    def edges(self) -> tuple[dict[str, tuple[str, ...]], dict[str, ConditionalEdge]]:
        edges: dict[str, tuple[str, ...]] = {}
        conditional: dict[str, ConditionalEdge] = {}
        all_nodes = [*self.nodes(), END]
        for source, targets in self.parent.edges.items():
            if source in self.children and source not in self.end_bridge:
                continue  # they are where the child's END edges go (its exit)
            new_source = self.end_bridge.get(source, source)
            edges[new_source] = _unique(t for target in targets for t in self.into(target))
        for source, edge in self.parent.conditional.items():
            new_source = self.end_bridge.get(source, source)
            if edge.mapping is None:  # labels are node ids: keep the merged ones too
                labels: dict[Hashable, str] = {n: n for n in all_nodes}
                labels.update({node: node for node in self.parent.nodes})
            else:
                labels = dict(edge.mapping)
            mapping = {
                label: _one(self.into(target), f"conditional edge from {source!r} label {label!r}")
                for label, target in labels.items()
            }
            conditional[new_source] = ConditionalEdge(new_source, edge.route, mapping)
        for node, child in self.children.items():
            for source, targets in child.edges.items():
                if source == START:
                    continue  # the entry: edges into ``node`` lead there
                edges[merged_id(node, source)] = _unique(
                    t for target in targets for t in self._targets(node, target)
                )
            for source, edge in child.conditional.items():
                new_source = self.start_bridge[node] if source == START else merged_id(node, source)
                where = f"conditional edge from {new_source!r}"
                mapping = self._child_mapping(node, child, edge.mapping, where)
                conditional[new_source] = ConditionalEdge(new_source, edge.route, mapping)
            if node in self.start_bridge and START not in child.conditional:
                edges[self.start_bridge[node]] = tuple(
                    merged_id(node, target) for target in child.edges[START]
                )
        return edges, conditional

    def joins(self) -> tuple[Join, ...]:
        joins: list[Join] = []
        for join in self.parent.joins:
            sources = tuple(self.end_bridge.get(source, source) for source in join.sources)
            joins.extend(Join(sources, target) for target in self.into(join.target))
        for node, child in self.children.items():
            for join in child.joins:
                sources = tuple(merged_id(node, source) for source in join.sources)
                joins.extend(Join(sources, t) for t in self._targets(node, join.target))
        return tuple(joins)

    def destinations(self) -> dict[str, dict[Hashable, str]]:
        found: dict[str, dict[Hashable, str]] = {}
        for source, dests in self.parent.destinations.items():
            where = f"node {source!r} destination"
            found[source] = {
                label: _one(self.into(target), f"{where} {label!r}")
                for label, target in dests.items()
            }
        for node, child in self.children.items():
            for source, dests in child.destinations.items():
                new_source = merged_id(node, source)
                found[new_source] = self._child_mapping(
                    node, child, dests, f"node {new_source!r} destination"
                )
        return found

    def hooks(self) -> tuple[Hook, ...]:
        hooks: list[Hook] = []
        for hook in self.parent.hooks:
            child = self.children.get(hook.target) if hook.target is not None else None
            if child is None or hook.target is None:
                hooks.append(hook)
            elif hook.kind in _NODE_HOOKS:
                target = hook.target
                hooks.extend(Hook(hook.kind, hook.fn, merged_id(target, n)) for n in child.nodes)
            elif hook.target in self.end_bridge:
                hooks.append(Hook(hook.kind, hook.fn, self.end_bridge[hook.target]))
        for node, child in self.children.items():
            for hook in child.hooks:
                if hook.kind in _NODE_HOOKS:
                    targets = [hook.target] if hook.target is not None else list(child.nodes)
                else:
                    targets = [hook.target] if hook.target is not None else list(child.conditional)
                for target in targets:
                    if target == START:
                        if node in self.start_bridge:
                            hooks.append(Hook(hook.kind, hook.fn, self.start_bridge[node]))
                    else:
                        hooks.append(Hook(hook.kind, hook.fn, merged_id(node, target)))
        return tuple(hooks)

    def send_names(self) -> dict[str, dict[str, str]]:
        """A merged child's routes and command nodes send to the child's node ids: what they
        run as here (nested subgraphs' too, renamed once more)."""
        found = {k: dict(v) for k, v in self.parent.send_names.items()}
        for node, child in self.children.items():
            local = {n: merged_id(node, n) for n in child.nodes}
            for source in [*child.conditional, *child.destinations]:
                new_source = self.start_bridge[node] if source == START else merged_id(node, source)
                found[new_source] = dict(local)
            for source, names in child.send_names.items():
                renamed = {k: merged_id(node, v) for k, v in names.items()}
                found.setdefault(merged_id(node, source), {}).update(renamed)
        return found

    def spec(self) -> GraphSpec:
        schema = dict(self.parent.schema)
        typed = self.parent.typed
        for node, child in self.children.items():
            schema = _merge_schema(schema, node, child.schema)
            typed = _extend_typed(typed, child)
        edges, conditional = self.edges()
        timeouts = {n: t for n, t in self.parent.timeouts.items() if n not in self.children}
        subgraphs = dict(self.parent.subgraphs)
        entries = {n: e for n, e in self.parent.entries.items() if n not in self.children}
        entries.update(self.entry)
        for node, child in self.children.items():
            timeouts.update({merged_id(node, n): t for n, t in child.timeouts.items()})
            subgraphs.update({merged_id(node, n): g for n, g in child.subgraphs.items()})
            entries.update(
                {
                    merged_id(node, inner): tuple(merged_id(node, n) for n in first)
                    for inner, first in child.entries.items()
                }
            )
        return dataclasses.replace(
            self.parent,
            schema=schema,
            nodes=self.nodes(),
            edges=edges,
            conditional=conditional,
            joins=self.joins(),
            hooks=self.hooks(),
            timeouts=timeouts,
            destinations=self.destinations(),
            typed=typed,
            subgraphs=subgraphs,
            merged={},
            outline=dataclasses.replace(self.parent, merged=dict(self.children)),
            entries=entries,
            send_names=self.send_names(),
        )


def merge_subgraphs(parent: GraphSpec, children: Mapping[str, GraphSpec]) -> GraphSpec:
    """The parent (as built: each merged subgraph is a node of its own) with ``children``
    merged into it; ``children`` are the subgraphs' specs, merged themselves."""
    return _Merge(parent, children).spec()


def resolve_interrupts(spec: GraphSpec, config: CompileConfig) -> CompileConfig:
    """``config`` with each merged subgraph's id in ``interrupt_before`` replaced by the
    subgraph's entry nodes; a merged subgraph's id in ``interrupt_after`` is refused."""
    for name in config.interrupt_after:
        if name in spec.entries:
            after = spec.outline.edges.get(name, ()) if spec.outline is not None else ()
            instead = (
                f"interrupt_before={[t for t in after if t != END]!r}"
                if after and END not in after
                else "interrupt_before on the node that follows it"
            )
            raise GraphDefinitionError(
                f"interrupt_after names the merged subgraph {name!r}, which ends at whichever "
                f"of its nodes reaches its END; name those nodes ('{name}-<node>'), or use "
                f"{instead}"
            )
    before = _unique(
        node for name in config.interrupt_before for node in spec.entries.get(name, (name,))
    )
    if before == config.interrupt_before:
        return config
    return dataclasses.replace(config, interrupt_before=before)
