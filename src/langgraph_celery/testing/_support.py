"""Helpers of the conformance suite, also for a saver author's own tests."""

from __future__ import annotations

import threading
import uuid
from collections.abc import Callable
from typing import Any

import pytest

from langgraph_celery.checkpoint import BaseCheckpointSaver, Checkpoint

__all__ = ["THREAD", "SaverFixtures", "make_checkpoint", "race"]

#: The thread most conformance tests store in.
THREAD = "thread-1"


def make_checkpoint(
    step: int = 0,
    *,
    thread: str = THREAD,
    run: str = "run-1",
    checkpoint_id: str | None = None,
    values: dict[str, Any] | None = None,
    **fields: Any,
) -> Checkpoint:
    """A checkpoint of ``thread``, ``run`` and ``step`` with a fresh id and ``{"step": step}`` as
    values unless given.  It has a parent of its own (``"ck-parent-<hex>"``, not stored) unless
    ``parent_id`` is given: a thread has only one checkpoint without a parent (``parent_id=None``),
    and one successor per checkpoint (give ``branch=True`` for a fork of a checkpoint that
    another one already goes on from)."""
    fields.setdefault("parent_id", f"ck-parent-{uuid.uuid4().hex}")
    return Checkpoint(
        thread_id=thread,
        checkpoint_id=checkpoint_id or f"ck-{uuid.uuid4().hex}",
        run_id=run,
        step=step,
        values={"step": step} if values is None else values,
        **fields,
    )


def race(count: int, action: Callable[[int], Any]) -> list[Any]:
    """Run ``action(i)`` for ``i`` in ``range(count)`` in as many threads, released together;
    each one's outcome (its result or the exception it raised), in order."""
    barrier = threading.Barrier(count)
    outcomes: list[Any] = [None] * count

    def run(index: int) -> None:
        barrier.wait(timeout=30)
        try:
            outcomes[index] = action(index)
        except Exception as exc:
            outcomes[index] = exc

    threads = [threading.Thread(target=run, args=(i,)) for i in range(count)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=60)
    return outcomes


class SaverFixtures:
    """The fixtures of the conformance classes: override :meth:`saver_factory`."""

    @pytest.fixture
    def saver_factory(self) -> Callable[[], BaseCheckpointSaver]:
        """Override: a callable returning a handle on one store, empty when the test starts,
        each time it is called (a new handle on the same store, as another process would
        build one, or the same object for a saver that lives in one process)."""
        raise NotImplementedError(
            f"{type(self).__name__} runs the saver conformance tests without a saver: "
            "override the saver_factory fixture to return a callable that builds yours"
        )

    @pytest.fixture
    def saver(self, saver_factory: Callable[[], BaseCheckpointSaver]) -> BaseCheckpointSaver:
        """The store's first handle."""
        return saver_factory()
