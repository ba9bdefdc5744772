"""Streaming nodes and custom output: what a node streams while it runs.

A node's update may hold, under one key, a generator or an async generator: each item it
yields is streamed (through the run's sink, see :data:`~langgraph_celery.graph.config.Sink`) as
soon as it is produced, and the node's update is the rest of the mapping merged with the
generator's final update (a sync generator's ``return`` value, or :class:`Done` yielded last).
``config.emit(value)`` streams through the same sink.

Every executor uses :func:`resolve` (through the task runner); what a sink does with an output
is the executor's business: :class:`Chunks` hands it to the in-process stream while the step
runs, a Celery worker publishes it on the run's channel.
"""

from __future__ import annotations

import asyncio
import threading
from collections import deque
from collections.abc import Generator, Mapping
from types import AsyncGeneratorType, GeneratorType
from typing import Any

from langgraph_celery.errors import InvalidUpdateError
from langgraph_celery.graph._sync import SHARED_POOL
from langgraph_celery.graph.config import RunnableConfig
from langgraph_celery.graph.state import Channel, compose_updates
from langgraph_celery.graph.types import Done, NodeOutput

__all__ = ["Chunks", "discard", "is_streamed", "resolve", "streaming_key"]

_GENERATORS = (GeneratorType, AsyncGeneratorType)


def discard(output: NodeOutput) -> None:
    """The sink of a run nobody streams (``invoke``): chunks are produced and dropped."""


def is_streamed(config: RunnableConfig) -> bool:
    """Whether someone streams the run ``config`` belongs to: what its nodes emit is wanted
    while they run."""
    return config._sink is not None and config._sink is not discard


def streaming_key(node: str, update: Any) -> str | None:
    """The key of ``update`` holding a generator, ``None`` if it holds none (a plain update
    pays for one type test per value); more than one is an :class:`InvalidUpdateError`."""
    if type(update) is not dict and not isinstance(update, Mapping):
        return None
    found = None
    for key, value in update.items():
        if isinstance(value, _GENERATORS):
            if found is not None:
                raise InvalidUpdateError(
                    f"node {node!r} returned generators under {found!r} and {key!r}; a node "
                    "streams one generator: merge them into one"
                )
            found = key
    return found


async def resolve(
    node: str,
    update: Mapping[str, Any],
    key: str,
    config: RunnableConfig,
    schema: Mapping[str, Channel],
) -> dict[str, Any]:
    """Stream the items of ``update[key]`` through ``config``'s sink as they come, and return
    the node's final update: the rest of ``update`` merged (through the reducers) with the
    generator's final update.  A sync generator runs on a thread when someone streams the run,
    so that its items reach the consumer while it runs."""
    generator = update[key]
    rest = {name: value for name, value in update.items() if name != key}
    if isinstance(generator, AsyncGeneratorType):
        final = await _drain_async(node, generator, config)
    elif config._sink is discard:
        final = _drain_sync(node, generator, config)
    else:
        loop = asyncio.get_running_loop()
        final = await loop.run_in_executor(SHARED_POOL, _drain_sync, node, generator, config)
    if final is None:
        return rest
    if not isinstance(final, Mapping):
        raise InvalidUpdateError(
            f"the generator node {node!r} returned under {key!r} ended with "
            f"{type(final).__name__}; it must end with a mapping of state updates (return it, "
            "or yield Done(update) last) or with nothing"
        )
    return compose_updates(schema, rest, final)


def _after_done(node: str) -> InvalidUpdateError:
    return InvalidUpdateError(
        f"the generator of node {node!r} went on after Done(update); Done must be the last "
        "item it yields"
    )


async def _drain_async(node: str, generator: Any, config: RunnableConfig) -> Any:
    final: Done | None = None
    async for item in generator:
        if final is not None:
            await generator.aclose()
            raise _after_done(node)
        if isinstance(item, Done):
            final = item
            continue
        config.emit(item)
    return final.update if final is not None else None


def _drain_sync(node: str, generator: Generator[Any, Any, Any], config: RunnableConfig) -> Any:
    final: Done | None = None
    while True:
        try:
            item = next(generator)
        except StopIteration as stop:
            if final is not None and stop.value is not None:
                raise InvalidUpdateError(
                    f"the generator of node {node!r} both yielded Done(update) and returned a "
                    "value; end it one way: return the update, or yield Done(update) last"
                ) from None
            return final.update if final is not None else stop.value
        if final is not None:
            generator.close()
            raise _after_done(node)
        if isinstance(item, Done):
            final = item
            continue
        config.emit(item)


class Chunks:
    """The in-process sink of a streamed run: outputs emitted on the run's loop are queued at
    once, those emitted on other threads (plain nodes) are queued through the loop, in the
    order each thread emitted them.  The executor takes them with :meth:`take` and waits for
    more with :meth:`wait`."""

    def __init__(self) -> None:
        self._loop = asyncio.get_running_loop()
        self._thread = threading.get_ident()
        self._items: deque[NodeOutput] = deque()
        self._waiter: asyncio.Future[None] | None = None

    def put(self, output: NodeOutput) -> None:
        if threading.get_ident() == self._thread:
            self._append(output)
        else:
            self._loop.call_soon_threadsafe(self._append, output)

    def _append(self, output: NodeOutput) -> None:
        self._items.append(output)
        waiter = self._waiter
        if waiter is not None and not waiter.done():
            waiter.set_result(None)

    def take(self) -> list[NodeOutput]:
        """The outputs queued so far, in order (and the queue emptied)."""
        if not self._items:
            return []
        items = list(self._items)
        self._items.clear()
        return items

    async def wait(self, task: asyncio.Future[Any]) -> None:
        """Until an output is queued or ``task`` is done."""
        if self._items or task.done():
            return
        waiter = self._loop.create_future()
        self._waiter = waiter
        try:
            await asyncio.wait((task, waiter), return_when=asyncio.FIRST_COMPLETED)
        finally:
            self._waiter = None
            if not waiter.done():
                waiter.cancel()
