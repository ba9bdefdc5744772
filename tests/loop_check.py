"""Checking that a coroutine never blocks its event loop: asyncio's debug mode logs every
callback that holds the loop longer than ``slow_callback_duration`` (100 ms here), and
:func:`slow_down` makes a saver's calls take 150 ms, so one made on the loop is reported."""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable, Coroutine
from typing import Any

import pytest

from langgraph_celery.checkpoint import BaseCheckpointSaver

__all__ = ["SAVER_CALLS", "SLOW", "blocked_callbacks", "slow_down"]

SLOW = 0.15
SAVER_CALLS = ("get", "put", "list", "get_writes", "put_writes", "get_with_writes", "release")


def slow_down(saver: BaseCheckpointSaver, calls: tuple[str, ...] = SAVER_CALLS) -> None:
    """Make each of the saver's ``calls`` take ``SLOW`` seconds more (a far-away database)."""
    for name in calls:
        real = getattr(saver, name)

        def slowed(*args: Any, _real: Callable[..., Any] = real, **kwargs: Any) -> Any:
            time.sleep(SLOW)
            return _real(*args, **kwargs)

        setattr(saver, name, slowed)


def blocked_callbacks(
    caplog: pytest.LogCaptureFixture, main: Callable[[], Coroutine[Any, Any, None]]
) -> list[str]:
    """Run ``main()`` on a debug-mode loop; the slow callbacks asyncio reported."""

    async def debugged() -> None:
        asyncio.get_running_loop().slow_callback_duration = 0.1
        await main()

    caplog.clear()
    with caplog.at_level(logging.WARNING, logger="asyncio"):
        asyncio.run(debugged(), debug=True)
    return [r.getMessage() for r in caplog.records if "took" in r.getMessage()]
