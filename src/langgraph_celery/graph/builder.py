"""The graph builder: :class:`StateGraph` collects nodes, edges and hooks; ``compile()`` checks
them and returns a :class:`CompiledGraph`.  The checks of the methods' arguments are in
:mod:`langgraph_celery.graph._builder_checks`."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Hashable, Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from langgraph_celery.errors import GraphDefinitionError
from langgraph_celery.graph._builder_checks import (
    allow_stored_types,
    checked_schema,
    destinations_of,
    hook_of,
    is_compiled,
    name_of,
    node_id_problem,
    timeout_problem,
)
from langgraph_celery.graph._callables import CallableSpec
from langgraph_celery.graph._spec import ConditionalEdge, GraphSpec, Hook, Join
from langgraph_celery.graph._typed import TypedSchema
from langgraph_celery.graph._validate import validate
from langgraph_celery.graph.config import CompileConfig
from langgraph_celery.graph.state import AgentState, Channel
from langgraph_celery.graph.types import END, GraphRepresentation

if TYPE_CHECKING:
    from langgraph_celery.graph.compiled import CompiledGraph

__all__ = ["ConditionalEdge", "GraphSpec", "Hook", "Join", "StateGraph"]


class StateGraph:
    """Builds a graph of nodes over a shared state.

    ``schema`` maps state keys to :class:`Channel` (keys not in it are overwritten by updates),
    or is a TypedDict, dataclass or pydantic model class whose fields are the state's keys
    (``Annotated[T, reducer]`` or ``Annotated[T, Channel(...)]`` makes a field a channel; see
    :mod:`langgraph_celery.graph._typed`); ``state_factory`` builds what nodes receive from the
    state's data (an :class:`AgentState` by default, with a typed schema too).
    """

    def __init__(
        self,
        schema: Mapping[str, Channel] | type | None = None,
        state_factory: Callable[[Mapping[str, Any]], AgentState] = AgentState,
    ) -> None:
        channels, typed = checked_schema(schema)
        if not callable(state_factory):
            raise GraphDefinitionError("state_factory must be callable, e.g. AgentState")
        self._schema: dict[str, Channel] = channels
        self._typed = typed
        self._state_factory = state_factory
        self._nodes: dict[str, CallableSpec] = {}
        self._timeouts: dict[str, float] = {}
        self._destinations: dict[str, dict[Hashable, str]] = {}
        self._subgraphs: dict[str, CompiledGraph] = {}
        self._edges: dict[str, list[str]] = {}
        self._conditional: dict[str, ConditionalEdge] = {}
        self._joins: list[Join] = []
        self._hooks: list[Hook] = []
        self._problems: list[str] = []
        #: merged subgraphs by node id (``add_node(id, StateGraph)``), merged at compile
        self._merged: dict[str, StateGraph] = {}
        self._building = False

    # -- nodes and edges ----------------------------------------------------------------------

    def add_node(
        self,
        id: str | Callable[..., Any],
        action: Callable[..., Any] | StateGraph | CompiledGraph | None = None,
        destinations: Mapping[Hashable, str] | Sequence[str] | None = None,
        *,
        timeout: float | None = None,
    ) -> StateGraph:
        """Add a node running ``action(state)`` or ``action(state, config)``; ``add_node(action)``
        names it ``action.__name__``.

        ``action`` may be a :class:`CompiledGraph`: a compiled subgraph, run as one node on the
        parent's state (see :mod:`langgraph_celery.graph._subgraph`).

        ``destinations`` (node ids or ``END``, or a mapping of labels to them) makes it a command
        node: its action may return ``Command(goto=label_or_labels, update=...)``, whose update
        is the node's update and whose goto picks the next nodes among ``destinations`` (Sends
        too, to nodes among them).  They are the node's outgoing edges: it takes no other plain
        or conditional edge (as in LangGraph4j, where a command node is its own conditional
        edge).  A step in which it returns a mapping or ``None`` leads nowhere from it.

        ``timeout`` (seconds) limits each call of the action: past it the node fails with a
        ``TimeoutError`` (a ``NodeError`` for the run; a ``RetryPolicy`` that lists
        ``TimeoutError`` retries it).  In process an async action is cancelled and a plain one
        is reported as timed out (its thread cannot be stopped and finishes in the background);
        on Celery it is the task's soft time limit, with a hard limit a little above it.

        ``action`` may be a :class:`StateGraph`: a merged subgraph, whose nodes join this graph
        at compile as ``f"{id}-{node}"`` (see :mod:`langgraph_celery.graph._merge`).
        """
        if action is None and not isinstance(id, str):
            action = id
            id = self._named(action)
        elif not isinstance(id, str) and callable(id):
            self._problems.append(
                f"add_node({getattr(id, '__name__', id)!r}, {action!r}): with the action first, "
                "give destinations by keyword (add_node(action, destinations=[...])), or pass "
                "the id first: add_node('id', action, ...)"
            )
            return self
        problem = timeout_problem(id, timeout)
        if problem is not None:
            self._problems.append(problem)
        elif timeout is not None:
            self._timeouts[str(id)] = float(timeout)
        problem = node_id_problem(id, self._nodes)
        if problem is not None:
            self._problems.append(problem)
            return self
        assert isinstance(id, str)  # (node_id_problem refuses any other id)
        if isinstance(action, StateGraph):
            self._add_merged(id, action, destinations, timeout)
        elif is_compiled(action):
            from langgraph_celery.graph._subgraph import SubgraphNode
            from langgraph_celery.graph.compiled import CompiledGraph

            assert isinstance(action, CompiledGraph)
            self._subgraphs[id] = action
            self._nodes[id] = CallableSpec.of(SubgraphNode(id, action))
            if destinations is not None:
                self._add_destinations(id, destinations)
        elif not callable(action):
            self._problems.append(
                f"node {id!r}: action must be callable, got {type(action).__name__}"
            )
        else:
            self._nodes[id] = CallableSpec.of(action)
            if destinations is not None:
                self._add_destinations(id, destinations)
        return self

    def _add_merged(
        self,
        id: str,
        subgraph: StateGraph,
        destinations: Mapping[Hashable, str] | Sequence[str] | None,
        timeout: float | None,
    ) -> None:
        """``add_node(id, StateGraph)``: the subgraph's nodes are merged in at compile (see
        :mod:`langgraph_celery.graph._merge`); until then ``id`` stands for them."""
        if subgraph is self:
            self._problems.append(f"node {id!r}: a graph cannot be merged into itself")
        elif destinations is not None:
            self._problems.append(
                f"node {id!r} is a merged subgraph: its exits are its edges to END, continued "
                f"by {id!r}'s edges; add those with add_edge or add_conditional_edges instead "
                "of destinations"
            )
        elif timeout is not None:
            self._timeouts.pop(id, None)
            self._problems.append(
                f"node {id!r} is a merged subgraph: give its nodes their timeouts in the "
                "subgraph (add_node(..., timeout=...))"
            )
        else:
            self._nodes[id] = _MERGED_PLACEHOLDER
            self._merged[id] = subgraph

    def _named(self, action: Any) -> Any:
        """The id ``add_node(action)`` gives ``action``: its ``__name__``."""
        name, problem = name_of(action)
        if problem is not None:
            self._problems.append(problem)
        return name

    def _add_destinations(
        self, node: str, destinations: Mapping[Hashable, str] | Sequence[str]
    ) -> None:
        mapping, problem = destinations_of(node, destinations)
        if problem is not None:
            self._problems.append(problem)
        else:
            self._destinations[node] = mapping

    def add_edge(self, source: str | Sequence[str], target: str) -> StateGraph:
        """Go from ``source`` to ``target``; several edges from one source fan out, and a list of
        sources makes ``target`` wait until all of them have run.

        An edge leaving ``END`` is refused here, when it is added (as in LangGraph4j); every
        other problem is reported by ``compile()``."""
        if not isinstance(target, str):
            self._problems.append(
                f"add_edge({source!r}, {target!r}): the target must be one node id, got "
                f"{type(target).__name__}; to fan out, add one edge per target"
            )
            return self
        if not isinstance(source, str) and (
            not isinstance(source, Iterable) or isinstance(source, bytes | Mapping)
        ):
            self._problems.append(
                f"add_edge({source!r}, {target!r}): the source must be a node id, or a list of "
                f"node ids to wait for, got {type(source).__name__}"
            )
            return self
        if source == END or (not isinstance(source, str) and END in tuple(source)):
            raise GraphDefinitionError(
                f"add_edge({source!r}, {target!r}): an edge cannot leave END, which ends the run"
            )
        if isinstance(source, str):
            self._edges.setdefault(source, [])
            if target in self._edges[source]:
                self._problems.append(f"edge {source!r} -> {target!r} is added twice")
            else:
                self._edges[source].append(target)
            return self
        sources = tuple(source)
        if not sources or not all(isinstance(s, str) for s in sources):
            self._problems.append(f"add_edge sources must be node ids, got {source!r}")
        elif len(sources) == 1:
            return self.add_edge(sources[0], target)
        else:
            self._joins.append(Join(sources, target))
        return self

    def add_conditional_edges(
        self,
        source: str,
        route: Callable[..., Any],
        mapping: Mapping[Hashable, str] | Sequence[str] | None = None,
    ) -> StateGraph:
        """After ``source``, call ``route(state[, config])`` to pick where to go; ``mapping`` maps
        its labels to node ids or ``END`` (``None``: labels are node ids).

        As in LangGraph4j, a conditional edge leaving ``END`` or with an empty mapping is
        refused here, when it is added; every other problem is reported by ``compile()``."""
        if source == END:
            raise GraphDefinitionError(
                "add_conditional_edges(END, ...): an edge cannot leave END, which ends the run"
            )
        if mapping is not None and len(mapping) == 0:
            raise GraphDefinitionError(
                f"conditional edge from {source!r} has an empty mapping; map each label its route "
                "returns to a node or END, or pass mapping=None if the labels are node ids"
            )
        if not callable(route):
            self._problems.append(f"conditional edge from {source!r}: route must be callable")
            return self
        if source in self._conditional:
            self._problems.append(f"node {source!r} has two conditional edges; merge the routes")
            return self
        if mapping is not None and not isinstance(mapping, Mapping):
            mapping = {label: label for label in mapping}
        self._conditional[source] = ConditionalEdge(
            source, CallableSpec.of(route), dict(mapping) if mapping is not None else None
        )
        return self

    # -- hooks --------------------------------------------------------------------------------

    def _add_hook(self, kind: str, node_or_hook: Any, hook: Any) -> StateGraph:
        self._hooks.append(hook_of(kind, node_or_hook, hook))
        return self

    def add_before_call_node_hook(self, node_or_hook: Any, hook: Any = None) -> StateGraph:
        """``hook(node_id, state, config)`` before a node; may return an update it sees."""
        return self._add_hook("before_node", node_or_hook, hook)

    def add_after_call_node_hook(self, node_or_hook: Any, hook: Any = None) -> StateGraph:
        """``hook(node_id, state, config, result)`` after a node; returns the result used."""
        return self._add_hook("after_node", node_or_hook, hook)

    def add_wrap_call_node_hook(self, node_or_hook: Any, hook: Any = None) -> StateGraph:
        """``hook(node_id, state, config, action)`` around a node; calls ``action`` or not."""
        return self._add_hook("wrap_node", node_or_hook, hook)

    def add_before_call_edge_hook(self, source_or_hook: Any, hook: Any = None) -> StateGraph:
        """``hook(source_id, state, config)`` before a route; may return an update it sees."""
        return self._add_hook("before_edge", source_or_hook, hook)

    def add_after_call_edge_hook(self, source_or_hook: Any, hook: Any = None) -> StateGraph:
        """``hook(source_id, state, config, result)`` after a route; returns the result used."""
        return self._add_hook("after_edge", source_or_hook, hook)

    def add_wrap_call_edge_hook(self, source_or_hook: Any, hook: Any = None) -> StateGraph:
        """``hook(source_id, state, config, action)`` around a route."""
        return self._add_hook("wrap_edge", source_or_hook, hook)

    # -- compile ------------------------------------------------------------------------------

    def compile(self, config: CompileConfig | None = None) -> CompiledGraph:
        """Check the graph and freeze it; raises :class:`GraphDefinitionError` naming the
        culprit."""
        from langgraph_celery.graph.compiled import CompiledGraph

        config = config if config is not None else CompileConfig()
        if not isinstance(config, CompileConfig):
            raise TypeError(f"compile() takes a CompileConfig, got {type(config).__name__}")
        spec, config = self._build(config)
        if config.checkpoint_saver is not None:
            for typed in self._typed_schemas():
                allow_stored_types(typed, config.checkpoint_saver.serializer)
        return CompiledGraph(spec, config)

    def get_graph(self, kind: str = "mermaid", title: str | None = None) -> GraphRepresentation:
        """A diagram of the graph as built, as LangGraph4j's ``StateGraph.getGraph``: what
        ``compile().get_graph(kind, title)`` draws (so a graph ``compile()`` refuses raises its
        :class:`GraphDefinitionError`)."""
        return self.compile().get_graph(kind, title)

    def _typed_schemas(self) -> list[TypedSchema]:
        """The typed schemas of this graph and of its merged subgraphs, nested ones too."""
        found = [self._typed] if self._typed is not None else []
        for child in self._merged.values():
            if child is not self:
                found.extend(t for t in child._typed_schemas() if t not in found)
        return found

    def _build(self, config: CompileConfig) -> tuple[GraphSpec, CompileConfig]:
        """The checked spec, with the merged subgraphs merged in, and ``config`` with the
        interrupts that name them resolved."""
        spec = self._freeze()
        if self._merged:
            from langgraph_celery.graph._merge import merge_subgraphs, resolve_interrupts

            if self._building:
                raise GraphDefinitionError("a merged subgraph contains its own parent graph")
            # the graph as built first (each subgraph one node), so errors name what was added
            validate(dataclasses.replace(spec, hooks=()), self._problems, CompileConfig())
            children: dict[str, GraphSpec] = {}
            self._building = True
            try:
                for node, child in self._merged.items():
                    try:
                        children[node], _ = child._build(CompileConfig())
                    except GraphDefinitionError as error:
                        raise GraphDefinitionError(f"subgraph {node!r}: {error}") from error
            finally:
                self._building = False
            spec = merge_subgraphs(spec, children)
            config = resolve_interrupts(spec, config)
        validate(spec, self._problems, config)
        return spec, config

    def _freeze(self) -> GraphSpec:
        return GraphSpec(
            schema=dict(self._schema),
            state_factory=self._state_factory,
            nodes=dict(self._nodes),
            edges={source: tuple(targets) for source, targets in self._edges.items()},
            conditional=dict(self._conditional),
            joins=tuple(self._joins),
            hooks=tuple(self._hooks),
            timeouts={node: t for node, t in self._timeouts.items() if node in self._nodes},
            destinations={node: dict(d) for node, d in self._destinations.items()},
            typed=self._typed,
            subgraphs=dict(self._subgraphs),
        )


def _merged_placeholder(state: Any) -> None:
    """What a merged subgraph's id stands for in the graph as built: never run (the
    subgraph's nodes are merged in at compile)."""
    raise AssertionError("a merged subgraph's placeholder ran")


_MERGED_PLACEHOLDER = CallableSpec.of(_merged_placeholder)
