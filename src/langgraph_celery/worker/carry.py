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

Only the latest carried checkpoint of a run is kept: the one before it is removed as the next one
is put, so a run holds one state in the result backend at a time.  A client that cancels such a
run marks its last stored checkpoint, as always, and leaves a sign in the backend
(``lgc:cancelled:<run_id>``) that the next carried step reads with its checkpoint, in the same
round trip: that step stores its checkpoint and stops there.  Keys: ``worker/names.py``.

A client streaming the run gets its carried steps too: the task that puts one also publishes it
on the run's outputs channel, in the same round trip (``worker/streaming.py``).

With ``durability="async"`` the same carriage runs, and the task that carried a checkpoint also
stores it, right after sending its step's task (so the next node starts without waiting for the
store), then leaves a sign that it did (``lgc:stored:<checkpoint_id>``).  The next step's task
takes that sign as it puts the checkpoint after (:meth:`Carrier.swap`); missing (the store is
still in flight, or its task died), it stores its own step's checkpoint first, from the copy it
carries (the compare-and-set keeps one), before it sends the next step: a run has one store in
flight at a time, and a checkpoint is never stored before its parent.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from langgraph_celery.checkpoint.base import Checkpoint
from langgraph_celery.errors import GraphStateError, SerializationError
from langgraph_celery.serde import JsonSerializer
from langgraph_celery.worker import names

__all__ = ["HEADER", "Carried", "Carrier", "carried_id", "carried_of", "check_backend"]

#: The message header of a node task whose step's checkpoint is carried (not in the store).
HEADER = names.CARRIED_HEADER
_KEY = names.CARRIED_KEY
_CANCEL = names.CANCELLED_KEY
_STORED = names.STORED_KEY
_SENDING = names.SENDING_KEY


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
    """Refuse ``durability="exit"`` or ``"async"`` on an app whose result backend cannot
    carry state."""
    if not _key_value(app.backend):
        raise GraphStateError(
            f"durability='exit' or 'async' on Celery carries each step's state in the result "
            f"backend, which must be a key-value store (redis://...); this app's is "
            f"{type(app.backend).__name__}: configure result_backend='redis://...', or run "
            "with durability='sync'"
        )


def _key_value(backend: Any) -> bool:
    return all(callable(getattr(backend, name, None)) for name in ("get", "mget", "set", "delete"))


def carried_of(data: Mapping[str, Any]) -> Carried:
    """A carried checkpoint from what :meth:`Carrier.put` stores (decoded by the serializer)."""
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


class Carrier:
    """Puts, reads and removes carried checkpoints in ``app``'s result backend, and the cancel
    signs clients leave there for them (a carried step checks both in one round trip)."""

    def __init__(self, app: Any, serializer: JsonSerializer) -> None:
        self.app = app
        self.serializer = serializer

    def put(
        self,
        carried: Carried,
        forget: str | None = None,
        announce: Callable[[str], tuple[str, str]] | None = None,
        sending: float | None = None,
    ) -> bool:
        """Store ``carried`` (and remove the carried checkpoint ``forget``, the step it was
        computed from); with ``announce``, also publish ``announce(data)`` (a channel and a
        message, made of what is stored) in the same round trip.  With ``sending`` (seconds),
        also take the right to send the carried step's tasks for that long (of the tasks of a
        step of several, which may all commit it to the same checkpoint, one sends): whether
        this call took it (always true without ``sending``, or with a backend other than
        Redis)."""
        checkpoint_id = carried.checkpoint.checkpoint_id
        data = self._dump(carried)
        return self._set(_KEY + checkpoint_id, data, forget, announce, sending, checkpoint_id)

    def _dump(self, carried: Carried) -> str:
        checkpoint = carried.checkpoint
        try:
            return self._dumps(carried)
        except SerializationError:
            self.serializer.dumps(checkpoint.values)  # (names the state key at fault)
            raise

    def _dumps(self, carried: Carried) -> str:
        checkpoint = carried.checkpoint
        return self.serializer.dumps(
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

    def get(self, checkpoint_id: str, run_id: str) -> tuple[Carried | None, bool]:
        """The carried checkpoint ``checkpoint_id`` of run ``run_id`` (``None`` if there is
        none), and whether the run was cancelled at its last stored checkpoint, or (async) at
        this one, stored already (a client's :meth:`cancel`): one round trip."""
        raw, cancelled_at = self.app.backend.mget([_KEY + checkpoint_id, _CANCEL + run_id])
        if raw is None:
            return None, False
        carried = carried_of(self.serializer.loads(raw.decode() if isinstance(raw, bytes) else raw))
        if isinstance(cancelled_at, bytes):
            cancelled_at = cancelled_at.decode()
        cancelled = cancelled_at is not None and cancelled_at in (
            carried.stored_id,
            carried.checkpoint.checkpoint_id,
        )
        return carried, cancelled

    def swap(
        self, carried: Carried | None, own: Checkpoint, sending: float | None = None
    ) -> tuple[bool, str | None, bool]:
        """(async) Put ``carried`` (if any) and remove the carried checkpoint ``own`` (the step
        it was computed from) with its stored sign: whether that sign was there (``own`` is in
        the store), where the run was cancelled (``own`` or its parent), if it was since
        ``own``'s task read it, and whether this call took the right to send ``carried``'s
        tasks for ``sending`` seconds (see :meth:`put`: of two copies of a running step, one
        goes on); one round trip on Redis."""
        backend = self.app.backend
        client: Any = getattr(backend, "client", None)
        own_id = own.checkpoint_id
        sign = _STORED + own_id
        sends = True
        if not callable(getattr(client, "pipeline", None)):
            there = backend.get(sign) is not None
            cancelled_at = backend.get(_CANCEL + own.run_id)
            if carried is not None:
                backend.set(_KEY + carried.checkpoint.checkpoint_id, self._dump(carried))
            backend.delete(_KEY + own_id)
            backend.delete(sign)
        else:
            claims = carried is not None and sending is not None
            with client.pipeline() as pipe:
                if claims:
                    assert carried is not None and sending is not None
                    self._claim(pipe, carried.checkpoint.checkpoint_id, sending)
                pipe.delete(sign)
                pipe.get(_CANCEL + own.run_id)
                pipe.delete(_KEY + own_id)
                if carried is not None:
                    key = _KEY + carried.checkpoint.checkpoint_id
                    pipe.set(key, self._dump(carried), ex=self._expires())
                done = pipe.execute()
            if claims:
                sends, done = bool(done[0]), done[1:]
            there, cancelled_at = bool(done[0]), done[1]
        if isinstance(cancelled_at, bytes):
            cancelled_at = cancelled_at.decode()
        cancelled = cancelled_at if cancelled_at in (own_id, own.parent_id) else None
        return there, cancelled, sends

    def stored(self, checkpoint_id: str) -> None:
        """(async) Sign that the carried checkpoint ``checkpoint_id`` is in the store now; not
        left behind if its step's task took the checkpoint already (it stored it itself)."""
        backend = self.app.backend
        client: Any = getattr(backend, "client", None)
        sign = _STORED + checkpoint_id
        if not callable(getattr(client, "pipeline", None)):
            backend.set(sign, "1")
            if backend.get(_KEY + checkpoint_id) is None:
                backend.delete(sign)
            return
        with client.pipeline() as pipe:
            pipe.set(sign, "1", ex=self._expires())
            pipe.exists(_KEY + checkpoint_id)
            if not pipe.execute()[1]:
                backend.delete(sign)

    def forget(self, checkpoint_id: str) -> None:
        """Remove the carried checkpoint ``checkpoint_id`` (and its stored sign, if any)."""
        backend = self.app.backend
        client: Any = getattr(backend, "client", None)
        if callable(getattr(client, "delete", None)):
            client.delete(_KEY + checkpoint_id, _STORED + checkpoint_id)
        else:
            backend.delete(_KEY + checkpoint_id)
            backend.delete(_STORED + checkpoint_id)

    def cancel(self, checkpoint: Checkpoint) -> None:
        """Tell the carried steps of ``checkpoint``'s run that it was cancelled there, at its
        last stored checkpoint (a client's cancel also marks it in the store; a resume stores
        another checkpoint, so the sign no longer applies to the run's later steps)."""
        self._set(_CANCEL + checkpoint.run_id, checkpoint.checkpoint_id)

    def _set(
        self,
        key: str,
        value: str,
        forget: str | None = None,
        announce: Callable[[str], tuple[str, str]] | None = None,
        sending: float | None = None,
        checkpoint_id: str = "",
    ) -> bool:
        """Set ``key`` (expiring as the backend's results do), remove the carried checkpoint
        ``forget``, publish ``announce(value)`` and take the right to send ``checkpoint_id``'s
        tasks (see :meth:`put`): on Redis in one round trip, without the publication Celery's
        ``set`` adds (with another backend, nothing is published nor taken)."""
        backend = self.app.backend
        client: Any = getattr(backend, "client", None)
        if not callable(getattr(client, "pipeline", None)):
            backend.set(key, value)
            if forget is not None:
                self.forget(forget)
            return True
        with client.pipeline() as pipe:
            if sending is not None:
                self._claim(pipe, checkpoint_id, sending)
            pipe.set(key, value, ex=self._expires())
            if forget is not None:
                pipe.delete(_KEY + forget, _STORED + forget)
            if announce is not None:
                pipe.publish(*announce(value))
            done = pipe.execute()
        return sending is None or bool(done[0])

    @staticmethod
    def _claim(pipe: Any, checkpoint_id: str, sending: float) -> None:
        """Queue on the Redis pipeline ``pipe`` the taking of the right to send
        ``checkpoint_id``'s tasks for ``sending`` seconds (at least one): a SET NX, whose reply
        is whether this call took it (see :meth:`put`)."""
        pipe.set(_SENDING + checkpoint_id, "1", nx=True, ex=max(1, int(sending)))

    def _expires(self) -> int | None:
        expires = int(getattr(self.app.backend, "expires", 0) or 0)
        return expires if expires > 0 else None
