"""Driving async generators and coroutines from plain code.

Each thread keeps one event loop for the plain API (``invoke``, ``stream``), so a call costs no
loop set-up; when the calling thread is already running a loop (a plain call made from inside
async code), the work runs on a helper thread with its own loop instead.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import AsyncIterator, Coroutine
from concurrent.futures import ThreadPoolExecutor
from typing import Any, TypeVar

__all__ = ["SHARED_POOL", "run_sync", "step_sync"]

T = TypeVar("T")

#: Threads for plain nodes of parallel steps and for plain hooks around async actions.
SHARED_POOL = ThreadPoolExecutor(max_workers=64, thread_name_prefix="langgraph-celery")
_HELPER = ThreadPoolExecutor(max_workers=8, thread_name_prefix="langgraph-celery-sync")
_local = threading.local()


def _thread_loop() -> asyncio.AbstractEventLoop:
    loop: asyncio.AbstractEventLoop | None = getattr(_local, "loop", None)
    if loop is None or loop.is_closed():
        loop = asyncio.new_event_loop()
        _local.loop = loop
    return loop


def _in_running_loop() -> bool:
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return False
    return True


def run_sync(coroutine: Coroutine[Any, Any, T]) -> T:
    """Run a coroutine to completion from plain code."""
    if _in_running_loop():
        return _HELPER.submit(lambda: _thread_loop().run_until_complete(coroutine)).result()
    return _thread_loop().run_until_complete(coroutine)


def step_sync(generator: AsyncIterator[T]) -> T:
    """The next item of an async generator, from plain code (StopAsyncIteration at the end)."""
    return run_sync(_anext(generator))


async def _anext(generator: AsyncIterator[T]) -> T:
    return await generator.__anext__()
