"""Calls of the checkpoint store made again when its connection drops.

A client (the run handle, a command-line process) reads and marks the store outside any Celery
task, so Celery's ``autoretry_for`` cannot help it: these helpers make a read, or an idempotent
write, again with a growing pause, the connection pool replacing the connection that failed.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable, Iterator
from typing import Any, TypeVar

from sqlalchemy.exc import InterfaceError, OperationalError

__all__ = ["STORE_ERRORS", "astore", "pauses", "store"]

#: A dropped connection to the checkpoint store (killed, failover): the call is made again, up
#: to this many times with a growing pause (about 6 s in all), before giving up.
STORE_ERRORS = (OperationalError, InterfaceError)
_STORE_ATTEMPTS = 9

T = TypeVar("T")


def pauses() -> Iterator[float]:
    """The pauses between the attempts of a call of the store."""
    pause = 0.05
    for _ in range(_STORE_ATTEMPTS - 1):
        yield pause
        pause = min(pause * 2, 1.0)


def store(call: Callable[..., T], *args: Any) -> T:
    """``call(*args)``, a read or an idempotent write of the store, made again if the connection
    drops."""
    for pause in pauses():
        try:
            return call(*args)
        except STORE_ERRORS:
            time.sleep(pause)
    return call(*args)


async def astore(call: Callable[[], Awaitable[T]]) -> T:
    """``await call()``, made again like :func:`store`."""
    for pause in pauses():
        try:
            return await call()
        except STORE_ERRORS:
            await asyncio.sleep(pause)
    return await call()
