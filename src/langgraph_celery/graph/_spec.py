"""The frozen definition of a graph: :class:`GraphSpec` (nodes, edges, joins, hooks, typed schema,
subgraphs), what ``StateGraph.compile()`` builds and validates and what the algorithm, the
executors and the diagrams read.  Data only: no validation, no I/O.
"""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Callable, Hashable, Mapping
from dataclasses import dataclass
from typing import Any

from langgraph_celery.graph._callables import CallableSpec
from langgraph_celery.graph._typed import TypedSchema
from langgraph_celery.graph.state import AgentState, Channel

__all__ = ["ConditionalEdge", "GraphSpec", "Hook", "Join"]


@dataclass(frozen=True)
class Hook:
    """A registered hook: ``target`` is a node id (or edge source), or ``None`` for all."""

    kind: str
    fn: Callable[..., Any]
    target: str | None


@dataclass(frozen=True)
class ConditionalEdge:
    source: str
    route: CallableSpec
    mapping: Mapping[Hashable, str] | None


@dataclass(frozen=True)
class Join:
    """``add_edge([a, b], c)``: ``c`` runs once every source has run."""

    sources: tuple[str, ...]
    target: str

    @property
    def key(self) -> str:
        return f"{'+'.join(self.sources)}->{self.target}"


@dataclass(frozen=True)
class GraphSpec:
    """A validated, immutable graph definition (what ``compile()`` freezes)."""

    schema: Mapping[str, Channel]
    state_factory: Callable[[Mapping[str, Any]], AgentState]
    nodes: Mapping[str, CallableSpec]
    edges: Mapping[str, tuple[str, ...]]
    conditional: Mapping[str, ConditionalEdge]
    joins: tuple[Join, ...]
    hooks: tuple[Hook, ...]
    #: the time limit of each node that has one, in seconds (``add_node(..., timeout=...)``)
    timeouts: Mapping[str, float] = dataclasses.field(default_factory=dict)
    #: where each command node may go: label -> node id (or END) (``add_node(..., destinations)``)
    destinations: Mapping[str, Mapping[Hashable, str]] = dataclasses.field(default_factory=dict)
    #: the typed schema (TypedDict, dataclass, pydantic model) the graph was built with, if any
    typed: TypedSchema | None = None
    #: compiled subgraphs by node id (``add_node(id, CompiledGraph)``)
    subgraphs: Mapping[str, Any] = dataclasses.field(default_factory=dict)
    #: merged subgraphs by node id (``add_node(id, StateGraph)``), each as its own spec: set on
    #: :attr:`outline`, the graph as built, which diagrams draw (see :mod:`._merge`)
    merged: Mapping[str, GraphSpec] = dataclasses.field(default_factory=dict)
    #: the graph as built, before its merged subgraphs were merged into it (``None`` if none)
    outline: GraphSpec | None = None
    #: where each merged subgraph (nested ones too, by merged id) is entered: its first nodes
    entries: Mapping[str, tuple[str, ...]] = dataclasses.field(default_factory=dict)
    #: for the routes and command nodes of merged subgraphs (by merged source id): the node ids
    #: their ``Send``\ s name, the subgraph's own, to the merged ids they run as
    send_names: Mapping[str, Mapping[str, str]] = dataclasses.field(default_factory=dict)

    @functools.cached_property
    def node_index(self) -> dict[str, int]:
        """Each node's position in the order nodes were added (the merge order)."""
        return {node: index for index, node in enumerate(self.nodes)}

    @functools.cached_property
    def fan_out_sources(self) -> dict[str, tuple[str, ...]]:
        """For each node that is a branch of a fan-out (a source, ``START`` included, with
        several plain edges), those sources, in the order their edges were added."""
        sources: dict[str, list[str]] = {}
        for source, targets in self.edges.items():
            if len(targets) > 1:
                for target in targets:
                    sources.setdefault(target, []).append(source)
        return {node: tuple(found) for node, found in sources.items()}
