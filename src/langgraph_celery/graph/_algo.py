"""The superstep algorithm, as pure functions of data.

Nothing here performs I/O, awaits or imports an executor: given a graph definition, the state,
the tasks of a step and what they (and the routes) returned, these functions say how updates
merge, where the run goes next and whether it stops.  The in-process runner and the Celery
workers both call them, which is what makes their results identical.
"""

from __future__ import annotations

from collections.abc import Hashable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from langgraph_celery.checkpoint.base import PendingTask
from langgraph_celery.errors import GraphStateError, InvalidUpdateError
from langgraph_celery.graph._spec import GraphSpec
from langgraph_celery.graph.state import Ops, apply_update
from langgraph_celery.graph.types import END, Command, Send

__all__ = [
    "GOTO",
    "RouteDecision",
    "command_gotos",
    "command_routes",
    "command_write",
    "decide_route",
    "interrupt_after_node",
    "merge_writes",
    "order_tasks",
    "plan_next",
    "without_goto",
]

#: The reserved key under which a command node's write carries where its ``Command`` goes: a
#: list of node ids (or ``END``) and :class:`Send`\ s, resolved through the node's
#: ``destinations``.  It travels with the update (a pending write, a checkpoint's ``writes``
#: metadata, a Celery task's result) and is never merged into the state.
GOTO = "__goto__"


def check_update(node: str, update: Any) -> dict[str, Any] | None:
    """A node's return value as an update, or :class:`InvalidUpdateError` naming the node."""
    if update is None:
        return None
    if isinstance(update, Mapping):
        for key in update:
            if not isinstance(key, str):
                raise InvalidUpdateError(
                    f"node {node!r} returned an update with non-string key {key!r}; state keys "
                    "are strings"
                )
            if key == GOTO:
                raise InvalidUpdateError(
                    f"node {node!r} returned an update with key {GOTO!r}, which is reserved for "
                    "where a Command goes; rename the key, or return Command(goto=..., update=...)"
                )
        return dict(update)
    raise InvalidUpdateError(
        f"node {node!r} returned {type(update).__name__}; a node must return a mapping of state "
        "updates or None"
    )


def _goto_items(goto: Any) -> list[Any]:
    return list(goto) if isinstance(goto, list | tuple) else [goto]


def command_write(spec: GraphSpec, node: str, command: Command) -> dict[str, Any]:
    """A command node's ``Command`` as its write: the update (checked like any node's) with
    where it goes under :data:`GOTO` (node ids and Sends, resolved through the node's
    ``destinations``).  A label outside them, or a Command from a node without destinations,
    is an :class:`InvalidUpdateError` naming the node."""
    destinations = spec.destinations.get(node)
    if destinations is None:
        raise InvalidUpdateError(
            f"node {node!r} returned a Command, but it has no destinations; add it with "
            f"add_node({node!r}, action, destinations=[...]) listing where it may go, or route "
            "with add_conditional_edges"
        )
    allowed = set(destinations.values())
    known = ", ".join(str(label) for label in destinations)
    goto: list[Any] = []
    for item in _goto_items(command.goto):
        if isinstance(item, Send):
            item = _sent(spec, node, item)
            if item.node not in allowed or item.node == END:
                raise InvalidUpdateError(
                    f"node {node!r} returned a Command that sends to {item.node!r}, which is not "
                    f"among its destinations ({known}); add it to destinations"
                )
            goto.append(item)
            continue
        try:
            target = destinations[item]
        except (KeyError, TypeError):  # (TypeError: an unhashable label)
            raise InvalidUpdateError(
                f"node {node!r} returned Command(goto={item!r}), which is not among its "
                f"destinations ({known}); go to one of them, or add it to destinations"
            ) from None
        if target not in goto:
            goto.append(target)
    update = check_update(node, command.update) or {}
    return {**update, GOTO: goto}


def without_goto(update: Mapping[str, Any] | None) -> Mapping[str, Any] | None:
    """A node's write as its update: without the :data:`GOTO` of a Command."""
    if update is None or GOTO not in update:
        return update
    return {key: value for key, value in update.items() if key != GOTO}


def command_gotos(writes: Sequence[tuple[str, Mapping[str, Any] | None]]) -> dict[str, list[Any]]:
    """Where the command nodes of a step go, by node, from the step's writes (in task order):
    the node ids of all its tasks' Commands, then their Sends (JSON-storable, as the writes)."""
    found: dict[str, tuple[list[str], list[Send]]] = {}
    for node, write in writes:
        if not write or GOTO not in write:
            continue
        targets, sends = found.setdefault(node, ([], []))
        for item in write[GOTO]:
            if isinstance(item, Send):
                sends.append(item)
            elif item not in targets:
                targets.append(item)
    return {node: [*targets, *sends] for node, (targets, sends) in found.items()}


def command_routes(gotos: Mapping[str, Sequence[Any]]) -> dict[str, RouteDecision]:
    """:func:`command_gotos` as the route decisions :func:`plan_next` takes."""
    return {
        node: RouteDecision(
            tuple(item for item in items if not isinstance(item, Send)),
            tuple(item for item in items if isinstance(item, Send)),
        )
        for node, items in gotos.items()
    }


def order_tasks(spec: GraphSpec, tasks: Iterable[PendingTask]) -> list[PendingTask]:
    """Tasks in the order their nodes were added (Send tasks keep their relative order)."""
    index = spec.node_index
    return sorted(tasks, key=lambda task: index.get(task.node, len(index)))


def merge_writes(
    spec: GraphSpec,
    values: Mapping[str, Any],
    writes: Sequence[tuple[str, Mapping[str, Any] | None]],
    ops: Ops | None = None,
) -> dict[str, Any]:
    """Merge the updates of one step, in the given (node-added) order, into a new state (and,
    with ``ops``, record there how each key changed).

    Two writes of one step to the same key without a reducer are an :class:`InvalidUpdateError`.
    """
    merged = dict(values)
    writes = [(node, without_goto(update)) for node, update in writes]
    if len(writes) > 1:
        writers: dict[str, str] = {}
        for node, update in writes:
            for key in update or ():
                channel = spec.schema.get(key)
                if channel is not None and channel.reducer is not None:
                    continue
                if key in writers:
                    raise InvalidUpdateError(
                        f"nodes {writers[key]!r} and {node!r} both wrote key {key!r} in one "
                        "step (a before-call hook's update counts as its node's), and the key "
                        "has no reducer; give it a Channel with a reducer in the schema or "
                        "write it from one node"
                    )
                writers[key] = node
    for node, update in writes:
        if update:
            apply_update(spec.schema, merged, update, f"node {node!r}'s update", ops)
    return merged


@dataclass(frozen=True)
class RouteDecision:
    """What one route chose: node ids (or END) to go to, Sends, and an update to merge."""

    targets: tuple[str, ...] = ()
    sends: tuple[Send, ...] = ()
    update: Mapping[str, Any] | None = None


def _resolve_label(spec: GraphSpec, source: str, label: Any) -> str:
    mapping: Mapping[Hashable, str] | None = spec.conditional[source].mapping
    if mapping is None:
        if isinstance(label, str) and (label in spec.nodes or label == END):
            return label
        known = [*spec.nodes, END]
    else:
        try:
            if label in mapping:
                return mapping[label]
        except TypeError:  # an unhashable label
            pass
        known = [str(key) for key in mapping]
    raise GraphStateError(
        f"conditional edge from {source!r} returned label {label!r}, which is not in its "
        f"mapping; known labels: {', '.join(known)}"
    )


def _sent(spec: GraphSpec, source: str, send: Send) -> Send:
    """``send`` from ``source``, a merged subgraph's route or command node naming the
    subgraph's own node id, to the merged id it runs as (see ``GraphSpec.send_names``)."""
    if send.node in spec.nodes:
        return send
    merged = spec.send_names.get(source, {}).get(send.node)
    return send if merged is None else Send(merged, send.arg)


def decide_route(spec: GraphSpec, source: str, result: Any) -> RouteDecision:
    """Interpret a route's return value: a label, a Command, a list of labels or of Sends."""
    if isinstance(result, Command):
        inner = decide_route(spec, source, _goto_items(result.goto))
        return RouteDecision(inner.targets, inner.sends, result.update)
    if isinstance(result, Send):
        result = [result]
    if isinstance(result, list | tuple):
        targets: list[str] = []
        sends: list[Send] = []
        for item in result:
            if isinstance(item, Send):
                item = _sent(spec, source, item)
                if item.node not in spec.nodes:
                    raise GraphStateError(
                        f"conditional edge from {source!r} sent to unknown node {item.node!r}"
                    )
                sends.append(item)
            else:
                target = _resolve_label(spec, source, item)
                if target not in targets:
                    targets.append(target)
        return RouteDecision(tuple(targets), tuple(sends))
    return RouteDecision((_resolve_label(spec, source, result),))


def plan_next(
    spec: GraphSpec,
    executed: Sequence[str],
    decisions: Mapping[str, RouteDecision],
    barriers: Mapping[str, Sequence[str]],
) -> tuple[list[PendingTask], dict[str, list[str]]]:
    """The next step's tasks and join barriers after ``executed`` nodes (in order) have run.

    ``decisions`` holds the route decision of each executed node that has a conditional edge.
    A node picked by several sources runs once; each Send is its own task.
    """
    index = spec.node_index
    targets: set[str] = set()
    sends: list[Send] = []
    for node in executed:
        targets.update(spec.edges.get(node, ()))
        decision = decisions.get(node)
        if decision is not None:
            targets.update(decision.targets)
            sends.extend(decision.sends)
    new_barriers = {key: list(seen) for key, seen in barriers.items()}
    for join in spec.joins:
        ran = [source for source in join.sources if source in executed]
        if not ran:
            continue
        seen = new_barriers.setdefault(join.key, [])
        seen.extend(source for source in ran if source not in seen)
        if set(seen) >= set(join.sources):
            targets.add(join.target)
            del new_barriers[join.key]
    targets.discard(END)
    tasks = [PendingTask(id=node, node=node) for node in sorted(targets, key=index.__getitem__)]
    for number, send in enumerate(sends):
        tasks.append(
            PendingTask(id=f"{send.node}#send{number}", node=send.node, arg=send.arg, has_arg=True)
        )
    return order_tasks(spec, tasks), new_barriers


def interrupt_after_node(interrupt_after: Iterable[str], executed: Sequence[str]) -> str | None:
    """The first executed node that the run must stop after."""
    stops = set(interrupt_after)
    for node in executed:
        if node in stops:
            return node
    return None


def executed_nodes(tasks: Sequence[PendingTask]) -> list[str]:
    """Distinct nodes of a step's tasks, in task order."""
    seen: dict[str, None] = {}
    for task in tasks:
        seen.setdefault(task.node, None)
    return list(seen)
