"""When the in-process executor stores a run's checkpoints: its durability mode
(``RunnableConfig(durability=...)``).

* ``"sync"``: each checkpoint is stored before the run goes on (the engine's own store).
* ``"async"``: each is stored on a thread while the next step runs; the stores of a run are
  made one after the other, in order, and the run waits for them where it stops.  A store that
  fails fails the run (at its next step, or where it stops): none is lost silently.
* ``"exit"``: the checkpoints the steps compute are held in memory; where the run stops
  (completed, parked, failed, cancelled, timed out) the last one is stored, after the run's
  last stored checkpoint (:func:`~langgraph_celery.graph._loop.rebased`).

A run's first checkpoint (its input, a resume or a fork) is stored at once in every mode: it
claims the thread and is where a run that crashed starts again.

A step whose changes the saver's serializer refuses fails where ``"sync"`` fails it, in every
mode: the keeper serializes each step's changes as it takes it (and drops the text), so a value
that would not be stored fails the run at its step, with the run's last good step stored: not
one step later (``"async"``), at the end, or never (``"exit"``, a value a later step removes).
"""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING

from langgraph_celery.checkpoint.base import Checkpoint
from langgraph_celery.graph import _loop, _sync

if TYPE_CHECKING:
    from langgraph_celery.graph._engine import Engine

__all__ = ["Keeper"]


class Keeper:
    """Holds or stores in the background the checkpoints of one run (``"async"``/``"exit"``);
    the engine hands it each checkpoint it makes (:meth:`hold`, called on the run's loop)."""

    def __init__(self, engine: Engine, durability: str, stored: Checkpoint) -> None:
        assert engine.saver is not None
        self.engine = engine
        self.durability = durability
        #: the run's last checkpoint in the store
        self.stored = stored
        #: (exit) the last checkpoint computed, not stored
        self.held: Checkpoint | None = None
        #: (async) the store in flight: it waits for the one before
        self.background: asyncio.Future[None] | None = None

    async def hold(self, checkpoint: Checkpoint) -> Checkpoint:
        """Take ``checkpoint`` (the engine's next): keep it (exit), or start storing it
        (async) once the store before it is done (one store in flight at a time, in order: a
        child is never stored before its parent).  A background store that failed is raised
        here, at the next step."""
        self._check(checkpoint)
        if self.durability == "exit":
            self.held = checkpoint
            return checkpoint
        background, self.background = self.background, None
        if background is not None:
            await background
        self.background = asyncio.ensure_future(self._put(checkpoint))
        return checkpoint

    def _check(self, checkpoint: Checkpoint) -> None:
        """Raise the serializer's ``SerializationError`` for what storing ``checkpoint`` would
        refuse: its changes (or values) and its metadata (the nodes' updates)."""
        saver = self.engine.saver
        assert saver is not None
        dumps = saver.serializer.dumps
        dumps(checkpoint.values if checkpoint.delta is None else checkpoint.delta)
        dumps(checkpoint.metadata)

    async def _put(self, checkpoint: Checkpoint) -> None:
        saver = self.engine.saver
        assert saver is not None
        self.stored = await _sync.in_thread(saver.put, checkpoint)

    async def flush(self) -> Checkpoint:
        """Store what is held or in flight; the run's last stored checkpoint."""
        background, self.background = self.background, None
        if background is not None:
            await background
        held, self.held = self.held, None
        if held is not None:
            saver = self.engine.saver
            assert saver is not None
            self.stored = await self.engine.io(
                saver.put, _loop.rebased(held, self.stored.checkpoint_id)
            )
        return self.stored
