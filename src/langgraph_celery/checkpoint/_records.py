r"""The records a saver stores and reads: :class:`Checkpoint` (with its :class:`CheckpointKind`
and :class:`PendingTask`\ s), :class:`PendingWrite` (with its :class:`WriteKind`),
:class:`Timer` and :class:`CheckpointView`; immutable dataclasses and enums.  The rules they obey
(uniqueness, successors, first write wins) are described in
:mod:`langgraph_celery.checkpoint.base`, which exports them with the saver's contract.
"""

from __future__ import annotations

import enum
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

__all__ = [
    "Checkpoint",
    "CheckpointKind",
    "CheckpointView",
    "PendingTask",
    "PendingWrite",
    "Timer",
    "WriteKind",
    "as_utc",
    "kind_of_body",
]


def _utcnow() -> datetime:
    return datetime.now(UTC)


class CheckpointKind(enum.StrEnum):
    """What stored a checkpoint: the run loop reads this, never ``metadata["source"]`` (which
    is kept, with the same words, for people reading a thread's history)."""

    #: a new run's first checkpoint (the input merged, the entry edges evaluated)
    INPUT = "input"
    #: a superstep's merged updates, stored by the run loop
    LOOP = "loop"
    #: a parked or failed run continued by ``GraphInput.resume``
    RESUME = "resume"
    #: an earlier checkpoint's pending tasks run again (invoked with its ``checkpoint_id``)
    FORK = "fork"
    #: written by ``update_state``
    UPDATE = "update"
    #: edges left for the resume by ``interrupt_before_edge``, evaluated
    EDGES = "edges"


@dataclass(frozen=True)
class PendingTask:
    """One task of the next superstep: a node, and for a ``Send`` the argument it runs with."""

    id: str
    node: str
    arg: Any = None
    has_arg: bool = False

    def to_data(self) -> dict[str, Any]:
        data: dict[str, Any] = {"id": self.id, "node": self.node}
        if self.has_arg:
            data["arg"] = self.arg
        return data

    @classmethod
    def from_data(cls, data: Mapping[str, Any]) -> PendingTask:
        return cls(id=data["id"], node=data["node"], arg=data.get("arg"), has_arg="arg" in data)


class WriteKind(enum.StrEnum):
    """What a pending write is: a task's update, or one of the marks a run leaves on a checkpoint
    (the run loop reads them by this kind, never by the write's task id)."""

    #: a node task's update for the step
    UPDATE = "update"
    #: the run is parked here
    INTERRUPT = "interrupt"
    #: a node, or the step, failed for good here
    ERROR = "error"
    #: a transition out of this checkpoint was claimed
    CLAIM = "claim"
    #: the run was cancelled here
    CANCEL = "cancel"
    #: a node task's message came back after its worker process died
    DELIVERY = "delivery"


@dataclass(frozen=True)
class PendingWrite:
    """What one task (or the run, for a mark) recorded for the step that starts from
    ``checkpoint_id``: an update, or with another ``kind`` a mark and its data."""

    task_id: str
    node: str
    update: dict[str, Any]
    kind: WriteKind = WriteKind.UPDATE


@dataclass(frozen=True)
class Timer:
    """A thread the beat reaper must look at by ``due_at``: ``kind`` is ``"stall"`` (a run is
    active: check that it progresses) or ``"deadline"`` (a parked run expires)."""

    thread_id: str
    run_id: str
    graph_id: str
    kind: str
    due_at: datetime


@dataclass(frozen=True)
class Checkpoint:
    """A thread's state at one point of one run.

    ``tasks`` are what runs next (``next`` is their node ids); ``extra`` is engine bookkeeping
    (join barriers, edges still to evaluate, nodes a resume runs without interrupting);
    ``kind`` says what stored it; ``metadata`` is what users read in its history (``source``,
    the update).  ``delta``, when the engine knows it, is how ``values`` differ from the
    parent's (see :mod:`langgraph_celery.checkpoint._delta`): a saver may store that instead of
    the whole state; ``None`` (always, for a checkpoint read back) means store it whole.
    ``branch`` says the checkpoint was made from a checkpoint the caller named that is not the
    thread's latest (a fork, time travel, ``update_state`` of an older checkpoint): it may
    share its parent with other checkpoints.  Otherwise (the default) it is its parent's
    *successor* (:attr:`successor_of`), and a saver refuses a second successor of one
    checkpoint.  Like ``delta`` it does not take part in equality, and a checkpoint read back
    has ``branch=False``.
    """

    thread_id: str
    checkpoint_id: str
    run_id: str
    step: int
    values: dict[str, Any]
    tasks: tuple[PendingTask, ...] = ()
    parent_id: str | None = None
    node: str | None = None
    extra: dict[str, Any] = field(default_factory=dict)
    metadata: dict[str, Any] = field(default_factory=dict)
    created_at: datetime = field(default_factory=_utcnow)
    kind: CheckpointKind = CheckpointKind.LOOP
    delta: dict[str, list[list[Any]]] | None = field(default=None, compare=False, repr=False)
    branch: bool = field(default=False, compare=False, repr=False)

    @property
    def next(self) -> tuple[str, ...]:
        return tuple(task.node for task in self.tasks)

    @property
    def successor_of(self) -> str | None:
        """The checkpoint this one is the successor of (its parent), or ``None`` for a branch
        and for a thread's first checkpoint: what the saver's one-successor rule keys on."""
        return None if self.branch else self.parent_id

    def body(self) -> dict[str, Any]:
        """Everything but the indexed columns, for a saver to serialize as one document."""
        return {
            "values": self.values,
            "tasks": [task.to_data() for task in self.tasks],
            "node": self.node,
            "extra": self.extra,
            "metadata": self.metadata,
            "kind": self.kind.value,
        }

    @classmethod
    def from_body(
        cls,
        body: Mapping[str, Any],
        *,
        thread_id: str,
        checkpoint_id: str,
        run_id: str,
        step: int,
        parent_id: str | None,
        created_at: datetime,
        kind: str | None = None,
        values: dict[str, Any] | None = None,
    ) -> Checkpoint:
        """The checkpoint stored as ``body`` and the indexed columns; ``kind``, when the saver
        keeps it in a column of its own, is read from there (else from the body); ``values``,
        when the saver reconstructed them (a delta body has none), replace the body's."""
        return cls(
            thread_id=thread_id,
            checkpoint_id=checkpoint_id,
            run_id=run_id,
            step=step,
            values=dict(body["values"]) if values is None else values,
            tasks=tuple(PendingTask.from_data(t) for t in body.get("tasks", ())),
            parent_id=parent_id,
            node=body.get("node"),
            extra=dict(body.get("extra") or {}),
            metadata=dict(body.get("metadata") or {}),
            created_at=created_at,
            kind=kind_of_body(body) if kind is None else _as_kind(kind),
        )


def kind_of_body(body: Mapping[str, Any]) -> CheckpointKind:
    """A stored body's kind: its ``"kind"``, or for bodies stored before kinds existed their
    metadata's ``"source"`` (the same words), else :attr:`CheckpointKind.LOOP`."""
    metadata = body.get("metadata")
    source = metadata.get("source") if isinstance(metadata, Mapping) else None
    return _as_kind(body.get("kind") or source or CheckpointKind.LOOP.value)


def _as_kind(word: str) -> CheckpointKind:
    try:
        return CheckpointKind(word)
    except ValueError:  # (a word no release wrote as a kind)
        return CheckpointKind.LOOP


@dataclass(frozen=True)
class CheckpointView:
    """A checkpoint with its pending writes (and markers) and its parent's markers: what a
    worker or a watching client needs about a thread's position, read in one go."""

    checkpoint: Checkpoint | None
    writes: dict[str, PendingWrite] = field(default_factory=dict)
    parent_markers: dict[str, PendingWrite] = field(default_factory=dict)
    #: True when the same run already stored the next step (this step is done).
    step_committed: bool = False


def as_utc(value: datetime) -> datetime:
    """``value`` as an aware UTC datetime (a naive one is taken to be UTC already)."""
    if value.tzinfo is None:
        return value.replace(tzinfo=UTC)
    if value.tzinfo is UTC:
        return value
    return value.astimezone(UTC)
