"""Routing node tasks to queues through Celery's own ``task_routes``.

``CeleryExecutor(app, routes=...)`` maps route keys to queue names. A key is

* ``"node"``: that node, in every graph compiled with the executor that has a node of that id;
* ``"graph_id:node"``: that graph's node only; it wins over a plain key for the same node.

One executor can so serve several graphs: a plain key applies to the graphs that have the node
and is ignored by the others. When a graph is compiled, the executor enters the node tasks its
routes cover (``langgraph_celery.node.<graph_id>.<node_id>``, see ``worker/names.py``) in the
app's :class:`NodeRouter`, which it puts first in ``app.conf.task_routes``; whatever the app
already had there stays, after it. So the executor's routes win for the nodes they name (as an
explicit queue would), and the app's own ``task_routes`` route every other task: the other
nodes, the resume, reap and start tasks, the user's own tasks; the rest goes to the default
queue.

Typos. A ``"graph_id:node"`` key naming a compiled graph's id with a node that graph lacks is a
:class:`~langgraph_celery.errors.GraphDefinitionError` when that graph is compiled. Whether a
plain key (or a key qualified with another graph's id) names anything cannot be told at one
compile, since the graph it names may be compiled next; :func:`unmatched_keys` tells once every
graph is compiled: a worker checks when it starts (:class:`CheckRoutes`, after the app's modules
are imported) and refuses to start, naming the keys and the graphs it checked them against.
``CeleryExecutor.check_routes()`` runs the same check anywhere else.
"""

from __future__ import annotations

import weakref
from collections.abc import Collection, Iterable, Mapping
from typing import TYPE_CHECKING, Any

from celery import bootsteps

from langgraph_celery.errors import GraphDefinitionError
from langgraph_celery.worker.names import node_task_name

if TYPE_CHECKING:
    from langgraph_celery.worker.executor import CeleryExecutor

__all__ = [
    "CheckRoutes",
    "NodeRouter",
    "assign",
    "check_graph_keys",
    "queues_for",
    "unmatched_keys",
]

_ROUTER_ATTR = "_langgraph_celery_router"


class NodeRouter:
    """A Celery router (an entry of ``task_routes``): the queue of each routed node task.

    One per app, shared by the app's executors; it also keeps the executors that have routes,
    for :class:`CheckRoutes`.
    """

    def __init__(self) -> None:
        self._queues: dict[str, str] = {}
        self._by_graph: dict[str, tuple[str, ...]] = {}
        self.executors: weakref.WeakSet[CeleryExecutor] = weakref.WeakSet()

    def __call__(
        self, name: str, args: Any, kwargs: Any, options: Any, task: Any = None, **kw: Any
    ) -> str | None:
        return self._queues.get(name)

    def set_graph(self, graph_id: str, queues: Mapping[str, str]) -> None:
        """Route ``graph_id``'s nodes to ``queues`` (node id -> queue), and no others."""
        for name in self._by_graph.pop(graph_id, ()):
            self._queues.pop(name, None)
        if queues:
            entries = {node_task_name(graph_id, node): queue for node, queue in queues.items()}
            self._queues.update(entries)
            self._by_graph[graph_id] = tuple(entries)

    def __repr__(self) -> str:
        return f"<langgraph_celery NodeRouter: {len(self._queues)} routed node task(s)>"


def router_of(app: Any) -> NodeRouter:
    """The app's router, created and put first in ``app.conf.task_routes`` if need be."""
    router: NodeRouter | None = getattr(app, _ROUTER_ATTR, None)
    if router is None:
        router = NodeRouter()
        setattr(app, _ROUTER_ATTR, router)
    _put_first(app, router)
    return router


def _put_first(app: Any, router: NodeRouter) -> None:
    current = app.conf.task_routes
    if isinstance(current, list | tuple):
        entries = list(current)
    else:
        entries = [] if current is None else [current]
    if entries and entries[0] is router:
        return
    app.conf.task_routes = (router, *(entry for entry in entries if entry is not router))
    amqp = app.__dict__.get("amqp")
    if amqp is not None:  # Celery keeps the routes it prepared: make it read them again
        amqp.flush_routes()
        del amqp.router


def assign(app: Any, graph_id: str, queues: Mapping[str, str]) -> None:
    """Route ``graph_id``'s node tasks on ``app`` to ``queues`` (replacing what it had)."""
    router: NodeRouter | None = getattr(app, _ROUTER_ATTR, None)
    if router is None and not queues:
        return
    router_of(app).set_graph(graph_id, queues)


def queues_for(routes: Mapping[str, str], graph_id: str, nodes: Iterable[str]) -> dict[str, str]:
    """The queue of each of ``graph_id``'s ``nodes`` that ``routes`` names."""
    queues = {}
    for node in nodes:
        queue = routes.get(f"{graph_id}:{node}", routes.get(node))
        if queue is not None:
            queues[node] = queue
    return queues


def check_graph_keys(routes: Mapping[str, str], graph_id: str, nodes: Collection[str]) -> None:
    """Refuse a ``"graph_id:node"`` key for this graph that names a node it lacks."""
    prefix = f"{graph_id}:"
    for key in routes:
        if key.startswith(prefix) and key not in nodes and key[len(prefix) :] not in nodes:
            raise GraphDefinitionError(
                f"CeleryExecutor routes key {key!r} names node {key[len(prefix) :]!r} of graph "
                f"{graph_id!r}, which has no such node (its nodes: {', '.join(nodes)}); fix the "
                "key"
            )


def _matches(key: str, graph_id: str, nodes: Collection[str]) -> bool:
    prefix = f"{graph_id}:"
    return key in nodes or (key.startswith(prefix) and key[len(prefix) :] in nodes)


def unmatched_keys(routes: Iterable[str], graphs: Mapping[str, Collection[str]]) -> list[str]:
    """The route keys that name no node of ``graphs`` (graph id -> node ids)."""
    return [
        key
        for key in routes
        if not any(_matches(key, graph_id, nodes) for graph_id, nodes in graphs.items())
    ]


def unmatched_message(keys: list[str], graphs: Mapping[str, Collection[str]]) -> str:
    """What :class:`GraphDefinitionError` says about ``keys`` that match none of ``graphs``."""
    names = ", ".join(repr(key) for key in keys)
    if not graphs:
        return (
            f"CeleryExecutor routes name nodes ({names}), but no graph is compiled with the "
            "executor in this process; compile its graphs (CompileConfig(executor=...)) in the "
            "module the worker imports, or drop the routes"
        )
    checked = "; ".join(
        f"graph {graph_id!r}: {', '.join(nodes)}" for graph_id, nodes in graphs.items()
    )
    return (
        f"CeleryExecutor routes key(s) {names} name no node of the graphs compiled with the "
        f"executor (checked against {checked}); fix the key(s): a key is a node id, or "
        "'graph_id:node' for one graph's node"
    )


class CheckRoutes(bootsteps.Step):  # type: ignore[misc]  # celery has no type hints
    """A worker step: the worker does not start while a route key of one of its app's
    executors names no node of the graphs compiled with that executor."""

    def __init__(self, parent: Any, **kwargs: Any) -> None:
        super().__init__(parent, **kwargs)
        router: NodeRouter | None = getattr(parent.app, _ROUTER_ATTR, None)
        for executor in list(router.executors) if router is not None else ():
            executor.check_routes()
