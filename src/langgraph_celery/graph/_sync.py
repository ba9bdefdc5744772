"""Driving async generators and coroutines from plain code, and keeping blocking calls off a
caller's event loop.

Each thread keeps one event loop for the plain API (``invoke``, ``stream``), so a call costs no
loop set-up; when the calling thread is already running a loop (a plain call made from inside
async code), the work runs on a helper thread with its own loop instead.

Those loops are the library's own: blocking on them (a checkpoint store's round trip, a message
to the broker) holds up nobody else.  On a caller's loop (``ainvoke``, ``astream``,
``aupdate_state`` awaited by the user) a blocking call runs on a thread instead
(:func:`blocking`), or a coroutine made of them on one of our loops (:func:`off_loop`).
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
from collections.abc import AsyncIterator, Callable, Coroutine
from concurrent.futures import ThreadPoolExecutor
from typing import Any, TypeVar

__all__ = [
    "SHARED_POOL",
    "blocking",
    "in_thread",
    "off_loop",
    "on_own_loop",
    "run_sync",
    "step_sync",
]

T = TypeVar("T")

#: Threads for plain nodes of parallel steps and for plain hooks around async actions.
SHARED_POOL = ThreadPoolExecutor(max_workers=64, thread_name_prefix="langgraph-celery")
_HELPER = ThreadPoolExecutor(max_workers=8, thread_name_prefix="langgraph-celery-sync")
_IO_POOL = ThreadPoolExecutor(max_workers=16, thread_name_prefix="langgraph-celery-io")
_local = threading.local()


def _thread_loop() -> asyncio.AbstractEventLoop:
    loop: asyncio.AbstractEventLoop | None = getattr(_local, "loop", None)
    if loop is None or loop.is_closed():
        loop = asyncio.new_event_loop()
        _local.loop = loop
    return loop


def on_own_loop() -> bool:
    """Whether the running event loop is one of the library's (blocking on it is harmless):
    each thread runs at most its own (:func:`_thread_loop`)."""
    try:
        running = asyncio.get_running_loop()
    except RuntimeError:
        return True
    return running is getattr(_local, "loop", None)


async def blocking(call: Callable[..., T], *args: Any) -> T:
    """``call(*args)``, a blocking call: inline on our own loop, on a thread on a caller's."""
    if on_own_loop():
        return call(*args)
    return await asyncio.get_running_loop().run_in_executor(_IO_POOL, call, *args)


async def in_thread(call: Callable[..., T], *args: Any) -> T:
    """``call(*args)`` on a thread, whichever loop awaits it (work meant to overlap with what
    the loop does meanwhile: a background store)."""
    return await asyncio.get_running_loop().run_in_executor(_IO_POOL, call, *args)


async def off_loop(coroutine: Coroutine[Any, Any, T]) -> T:
    """Await ``coroutine`` (made of blocking calls) on one of our loops, so that it never
    blocks a caller's loop."""
    if on_own_loop():
        return await coroutine
    loop = asyncio.get_running_loop()
    return await loop.run_in_executor(_HELPER, lambda: _thread_loop().run_until_complete(coroutine))


def _in_running_loop() -> bool:
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return False
    return True


def run_sync(coroutine: Coroutine[Any, Any, T]) -> T:
    """Run a coroutine to completion from plain code."""
    if _in_running_loop():
        return _HELPER.submit(lambda: _until_complete(_thread_loop(), coroutine)).result()
    return _until_complete(_thread_loop(), coroutine)


def _until_complete(loop: asyncio.AbstractEventLoop, coroutine: Coroutine[Any, Any, T]) -> T:
    task = loop.create_task(coroutine)
    try:
        return loop.run_until_complete(task)
    except BaseException:
        # Interrupted (Ctrl-C, SystemExit) in this task or in another one it waited for: cancel
        # what is left and let it unwind, so that its ``finally`` blocks run (a run records
        # where it stopped), then raise the interruption (a second Ctrl-C stops the unwinding).
        if task.done():
            if not task.cancelled():
                task.exception()  # (raised here: not "never retrieved")
        else:
            task.cancel()
        left = [t for t in asyncio.all_tasks(loop) if not t.done()]
        if left:
            with contextlib.suppress(Exception, asyncio.CancelledError):
                loop.run_until_complete(asyncio.gather(*left, return_exceptions=True))
        raise


def step_sync(generator: AsyncIterator[T]) -> T:
    """The next item of an async generator, from plain code (StopAsyncIteration at the end)."""
    return run_sync(_anext(generator))


async def _anext(generator: AsyncIterator[T]) -> T:
    return await generator.__anext__()
