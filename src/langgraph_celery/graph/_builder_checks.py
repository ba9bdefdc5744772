"""The checks :class:`~langgraph_celery.graph.builder.StateGraph` makes of what it is given.

Each takes an argument of the builder's methods and returns it normalized, or the problem with it
(a message naming the node at fault and saying what to do), which the builder collects and
``compile()`` reports; ``checked_schema`` and ``hook_of`` raise at once, as ``StateGraph(schema)``
and the ``add_*_hook`` methods do.  ``allow_stored_types`` is ``compile()``'s: it registers a
typed schema's classes with the checkpoint saver's serializer.  Used by
:mod:`langgraph_celery.graph.builder` only.
"""

from __future__ import annotations

from collections.abc import Hashable, Mapping, Sequence
from typing import Any

from langgraph_celery.errors import GraphDefinitionError
from langgraph_celery.graph._spec import Hook
from langgraph_celery.graph._typed import TypedSchema, kind_of, typed_schema
from langgraph_celery.graph.config import check_id
from langgraph_celery.graph.state import Channel
from langgraph_celery.graph.types import END, START
from langgraph_celery.serde import JsonSerializer

__all__ = [
    "allow_stored_types",
    "checked_schema",
    "destinations_of",
    "hook_of",
    "is_compiled",
    "name_of",
    "node_id_problem",
    "timeout_problem",
]


def _not_a_schema(schema: object) -> str:
    """Why ``schema`` is not a schema, and what to pass instead."""
    got = (
        f"the class {schema.__name__!r}"
        if isinstance(schema, type)
        else f"a {type(schema).__name__}"
    )
    return (
        "StateGraph(schema) takes a mapping of state key -> Channel, such as "
        "{'messages': Channels.appender()}, or a TypedDict, dataclass or pydantic model class "
        f"whose fields are the state's keys; got {got}"
    )


def checked_schema(
    schema: Mapping[str, Channel] | type | None,
) -> tuple[dict[str, Channel], TypedSchema | None]:
    """``StateGraph(schema)``'s schema as channels by state key, and its typed schema if it is a
    class; raises :class:`GraphDefinitionError` if it is neither a mapping of channels nor a
    TypedDict, dataclass or pydantic model class."""
    typed: TypedSchema | None = None
    if kind_of(schema) is not None:
        assert isinstance(schema, type)
        typed = typed_schema(schema)
        schema = typed.channels
    elif schema is not None and (isinstance(schema, type) or not isinstance(schema, Mapping)):
        raise GraphDefinitionError(_not_a_schema(schema))
    channels = dict(schema or {})
    for key, channel in channels.items():
        if not isinstance(channel, Channel):
            raise GraphDefinitionError(
                f"schema key {key!r} maps to {type(channel).__name__}, not a Channel; use "
                "Channel(reducer, default) or Channels.appender()"
            )
    return channels, typed


def name_of(action: Any) -> tuple[Any, str | None]:
    """The id ``add_node(action)`` gives ``action`` (its ``__name__``), or ``action`` itself
    and the problem when it has no usable name."""
    name = getattr(action, "__name__", None)
    if callable(action) and isinstance(name, str) and name and name != "<lambda>":
        return name, None
    what = "a lambda" if name == "<lambda>" else f"a {type(action).__name__}"
    return action, (
        f"add_node(action) names the node after the action's __name__, but {what} has "
        "no usable name; pass the id: add_node('id', action)"
    )


def timeout_problem(id: Any, timeout: object) -> str | None:
    """What is wrong with node ``id``'s ``timeout`` (positive seconds or ``None``), if anything."""
    if timeout is not None and (
        isinstance(timeout, bool) or not isinstance(timeout, int | float) or not timeout > 0
    ):
        return f"node {id!r}: timeout must be positive seconds or None, got {timeout!r}"
    return None


def node_id_problem(id: Any, nodes: Mapping[str, object]) -> str | None:
    """What is wrong with ``id`` as the id of a new node beside ``nodes``, if anything."""
    if not isinstance(id, str) or not id:
        return f"node id must be a non-empty string, got {id!r}"
    if id in (START, END):
        return f"node id {id!r} is reserved; choose another name"
    if check_id("node id", id):
        return str(check_id("node id", id))
    if id in nodes:
        return f"node {id!r} is added twice; node ids must be unique"
    return None


def destinations_of(
    node: str, destinations: Mapping[Hashable, str] | Sequence[str]
) -> tuple[dict[Hashable, str], str | None]:
    """A command node's ``destinations`` as a mapping of labels to node ids, or the problem
    with them."""
    if isinstance(destinations, Mapping):
        mapping = dict(destinations)
    elif isinstance(destinations, str) or not isinstance(destinations, Sequence | set):
        return {}, (
            f"node {node!r}: destinations must be a list of node ids or a mapping of labels "
            f"to node ids, got {type(destinations).__name__} {destinations!r}"
        )
    else:
        mapping = {target: target for target in destinations}
    if not mapping:
        return {}, f"node {node!r}: destinations is empty; list where its Command may go"
    for label, target in mapping.items():
        if not isinstance(target, str):
            return {}, f"node {node!r}: destination {label!r} must be a node id, got {target!r}"
    return mapping, None


def is_compiled(action: object) -> bool:
    """Whether ``action`` is a :class:`CompiledGraph` (a compiled subgraph node)."""
    from langgraph_celery.graph.compiled import CompiledGraph

    return isinstance(action, CompiledGraph)


def hook_of(kind: str, node_or_hook: Any, hook: Any) -> Hook:
    """The hook an ``add_*_hook(node_or_hook, hook)`` method of ``kind`` adds: for every node
    (or route) when ``hook`` is ``None``, else for node ``node_or_hook``; ``TypeError`` if the
    target is not a node id or the hook is not callable."""
    target: str | None
    if hook is None:
        target, fn = None, node_or_hook
    else:
        target, fn = node_or_hook, hook
        if not isinstance(target, str):
            raise TypeError(f"{kind} hook target must be a node id, got {target!r}")
    if not callable(fn):
        raise TypeError(f"{kind} hook must be callable, got {type(fn).__name__}")
    return Hook(kind, fn, target)


def allow_stored_types(typed: TypedSchema, serializer: object) -> None:
    """Register the enums, dataclasses and pydantic models that the typed schema's fields name
    with the saver's serializer (a ``JsonSerializer``; another serializer is left as it is), so
    that the values nodes write to those fields can be stored.  A class whose name another class
    holds there already is a :class:`GraphDefinitionError` (its values could not be told apart).
    """
    if not isinstance(serializer, JsonSerializer):
        return
    for cls in typed.types:
        try:
            serializer.register(cls)
        except ValueError as error:
            raise GraphDefinitionError(
                f"the state schema {typed.name} names {cls.__qualname__}, which cannot be "
                f"registered with the checkpoint saver's serializer: {error}; give the class a "
                "name of its own (module and qualified name), or use another serializer"
            ) from error
