"""How a run with ``durability="exit"`` goes from one step to the next on Celery without the
checkpoint store: the checkpoint a step commits is *carried* in the result backend.

The node task that commits a step computes the next checkpoint, puts it under its key in the
result backend (``lgc:carried:<checkpoint_id>``, JSON, expiring after ``result_expires``), and
sends the next step's task with the header ``lgc_carried``; that task reads the checkpoint
there instead of the store.  Where the run stops (completes, parks, fails, is cancelled), at a
step of several tasks, and on a redelivered message, the carried checkpoint is stored first
(after the run's last stored one: :func:`~langgraph_celery.graph._loop.rebased`), and the run
goes on from the store as in ``"sync"``.

A carried checkpoint's id is made from its parent's (:func:`carried_id`): a message delivered
twice, or a step re-dispatched by the reaper from the last stored checkpoint, computes the same
ids again, so two copies of a run converge on the same checkpoints and the store keeps one of
each (the second ``put`` is a :class:`~langgraph_celery.errors.CheckpointConflictError`).

Only the latest carried checkpoint of a run is kept: the one before it is removed once the next
step's task is sent, so a run holds one state in the result backend at a time.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from langgraph_celery.checkpoint.base import Checkpoint
from langgraph_celery.errors import GraphStateError
from langgraph_celery.serde import JsonSerializer

__all__ = ["HEADER", "Carried", "Carrier", "carried_id", "check_backend"]

#: The message header of a node task whose step's checkpoint is carried (not in the store).
HEADER = "lgc_carried"
_KEY = "lgc:carried:"


def carried_id(parent_id: str) -> str:
    """The id of the checkpoint computed after ``parent_id`` by a carried step: the same for
    every copy of the step (32 hex digits, as :func:`~langgraph_celery.graph._engine.new_id`)."""
    return hashlib.sha256(f"carried:{parent_id}".encode()).hexdigest()[:32]


@dataclass(frozen=True)
class Carried:
    """A checkpoint in the result backend: ``stored_id`` is the run's last stored checkpoint
    (where a crash restarts it, whose marks tell a cancel); ``watched_at`` when the run's stall
    timer was last pushed back."""

    checkpoint: Checkpoint
    stored_id: str
    watched_at: datetime


def check_backend(app: Any) -> None:
    """Refuse ``durability="exit"`` on an app whose result backend cannot carry state."""
    if not _key_value(app.backend):
        raise GraphStateError(
            f"durability='exit' on Celery carries each step's state in the result backend, "
            f"which must be a key-value store (redis://...); this app's is "
            f"{type(app.backend).__name__}: configure result_backend='redis://...', or run "
            "with durability='sync' or 'async'"
        )


def _key_value(backend: Any) -> bool:
    return all(callable(getattr(backend, name, None)) for name in ("get", "set", "delete"))


class Carrier:
    """Puts, reads and removes carried checkpoints in ``app``'s result backend."""

    def __init__(self, app: Any, serializer: JsonSerializer) -> None:
        self.app = app
        self.serializer = serializer

    def put(self, carried: Carried) -> int:
        """Store ``carried``; the size of what was stored (bytes)."""
        checkpoint = carried.checkpoint
        data = self.serializer.dumps(
            {
                "thread_id": checkpoint.thread_id,
                "checkpoint_id": checkpoint.checkpoint_id,
                "run_id": checkpoint.run_id,
                "step": checkpoint.step,
                "parent_id": checkpoint.parent_id,
                "created_at": checkpoint.created_at,
                "body": checkpoint.body(),
                "stored_id": carried.stored_id,
                "watched_at": carried.watched_at,
            }
        )
        self.app.backend.set(_KEY + checkpoint.checkpoint_id, data)
        return len(data)

    def get(self, checkpoint_id: str) -> Carried | None:
        raw = self.app.backend.get(_KEY + checkpoint_id)
        if raw is None:
            return None
        data = self.serializer.loads(raw.decode() if isinstance(raw, bytes) else raw)
        checkpoint = Checkpoint.from_body(
            data["body"],
            thread_id=data["thread_id"],
            checkpoint_id=data["checkpoint_id"],
            run_id=data["run_id"],
            step=data["step"],
            parent_id=data["parent_id"],
            created_at=data["created_at"],
        )
        return Carried(checkpoint, data["stored_id"], data["watched_at"])

    def forget(self, checkpoint_id: str) -> None:
        self.app.backend.delete(_KEY + checkpoint_id)
