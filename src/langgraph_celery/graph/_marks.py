"""What the run loop records on a checkpoint, and the predicates that read it back.

A checkpoint carries the run loop's bookkeeping in its ``extra`` (the keys are :class:`Extra`'s),
and a run leaves *marks* on it besides its nodes' updates: pending writes under reserved task ids
(:class:`Mark`) that record a parking (:class:`Parking`), a failure (:class:`Failure`), a cancel,
a claim or a redelivery, all read back at once by :class:`StepMarks`.  :func:`has_pending`,
:func:`steps_taken`, :func:`is_resumed` and :func:`next_extra` read a checkpoint's bookkeeping.
What a run does about them is decided in ``graph/_loop.py``.

Like ``graph/_loop.py``, nothing here performs I/O, awaits, calls user code or imports an
executor.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Final

from langgraph_celery import errors
from langgraph_celery.checkpoint.base import Checkpoint, CheckpointView, PendingWrite, WriteKind
from langgraph_celery.errors import NodeError
from langgraph_celery.graph.config import MAX_ID_LENGTH

__all__ = [
    "MARK_KINDS",
    "STOPS",
    "Extra",
    "Failure",
    "Mark",
    "Parking",
    "StepMarks",
    "has_pending",
    "is_resumed",
    "next_extra",
    "steps_taken",
]


class Extra:
    """Keys of a checkpoint's ``extra``: the run loop's bookkeeping, stored with the checkpoint
    (plain strings: they are stored as JSON object keys)."""

    #: join barriers: for each ``add_edge([a, b], c)``, the sources that ran so far
    BARRIERS: Final = "barriers"
    #: nodes whose edges are left for the resume (``interrupt_before_edge``)
    EDGES_PENDING: Final = "edges_pending"
    #: where those of them that are command nodes go (their Commands' gotos, by node)
    GOTOS: Final = "gotos"
    #: the checkpoint continues a parked run: its tasks run without stopping again
    RESUMED: Final = "resumed"
    #: an ``interrupt_after`` stopped a run whose edges led to END: a resume completes it
    COMPLETION_PENDING: Final = "completion_pending"
    #: (Celery) what the invocation was started with (recursion limit, metadata, clone_state),
    #: carried by each of its checkpoints: workers take a run's limits from the store, never
    #: from a message
    RUN_CONFIG: Final = "celery_run_config"
    #: how many supersteps the invocation has run up to this checkpoint (0 when absent)
    STEPS: Final = "steps"
    #: the ``graph_id`` of the graph whose runs the thread holds (graphs compiled with one)
    GRAPH_ID: Final = "graph_id"
    #: (a compiled subgraph's child run) the run id of the parent run it belongs to, carried
    #: by each of its checkpoints
    PARENT: Final = "parent_run"
    #: (a checkpoint ``update_state`` wrote on a parked run, which stays parked) the run's
    #: interruption as its ``INTERRUPT`` mark names it (node, reason, metadata; not a child
    #: run's state), so that the run is still shown parked for that reason and deadline
    PARKED: Final = "parked"


class Mark:
    """What a run leaves on a checkpoint besides node updates, as pending writes under these
    reserved task ids (the first write of each wins; plain strings, as the store keeps them)."""

    #: the run is parked here (the interruption: node, reason, metadata, deadline)
    INTERRUPT: Final = "__interrupt__"
    #: a node (or the step as a whole) failed for good here (node, error type, message)
    ERROR: Final = "__error__"
    #: a transition out of this checkpoint (a new run, a resume, an update, a fork) is taken
    CLAIM: Final = "__claim__"
    #: the run was cancelled here
    CANCEL: Final = "__cancel__"
    #: (a prefix) ``__delivery__:<task id>#<n>``: the task's message came back after its worker
    #: process died, for the ``n``-th delivery (first deliveries are not recorded); a task id
    #: too long for the mark to fit the store's 255 characters is replaced by its digest
    #: (:meth:`delivery_key`)
    DELIVERY: Final = "__delivery__:"

    @staticmethod
    def delivery_key(task_id: str) -> str:
        """What a delivery mark names ``task_id`` by (:attr:`StepMarks.deliveries`' key)."""
        if len(Mark.DELIVERY) + len(task_id) + 4 <= MAX_ID_LENGTH:
            return task_id
        return "sha256:" + hashlib.sha256(task_id.encode("utf-8", "surrogatepass")).hexdigest()

    @staticmethod
    def delivery(task_id: str, number: int) -> str:
        return f"{Mark.DELIVERY}{Mark.delivery_key(task_id)}#{number}"


#: The marks that stop a run.
STOPS = frozenset({Mark.INTERRUPT, Mark.ERROR, Mark.CANCEL})
#: The kind each mark is stored with (the run loop reads marks by their kind).
MARK_KINDS = {
    Mark.INTERRUPT: WriteKind.INTERRUPT,
    Mark.ERROR: WriteKind.ERROR,
    Mark.CLAIM: WriteKind.CLAIM,
    Mark.CANCEL: WriteKind.CANCEL,
}


@dataclass(frozen=True)
class Parking:
    """A parked run's interruption, as a mark stores it.  ``state`` is the state the caller
    sees when it is not the checkpoint's: a compiled subgraph's child run's, which parked it."""

    node_id: str
    reason: str | None = None
    metadata: Mapping[str, Any] = field(default_factory=dict)
    state: Mapping[str, Any] | None = None

    @classmethod
    def from_data(cls, data: Mapping[str, Any]) -> Parking:
        state = data.get("state")
        return cls(
            str(data.get("node_id")),
            data.get("reason"),
            dict(data.get("metadata") or {}),
            dict(state) if isinstance(state, Mapping) else None,
        )

    def shown(self) -> dict[str, Any]:
        """What an ``update_state`` checkpoint carries of it (:attr:`Extra.PARKED`)."""
        return {"node_id": self.node_id, "reason": self.reason, "metadata": dict(self.metadata)}

    def to_data(self, parked_at: datetime) -> dict[str, Any]:
        """What the run's ``INTERRUPT`` mark stores."""
        data = {
            "node_id": self.node_id,
            "reason": self.reason,
            "metadata": dict(self.metadata),
            "parked_at": parked_at.isoformat(),
        }
        if self.state is not None:
            data["state"] = dict(self.state)
        return data


@dataclass(frozen=True)
class Failure:
    """A node's (or a step's) failure for good, as a mark stores it."""

    node_id: str
    error_type: str
    message: str

    @classmethod
    def from_data(cls, data: Mapping[str, Any]) -> Failure:
        return cls(
            str(data.get("node_id", "?")),
            str(data.get("error_type", "Exception")),
            str(data.get("message", "")),
        )

    @classmethod
    def of_error(cls, node_id: str, error: BaseException) -> Failure:
        """``error`` raised by ``node_id`` (or by its step); a :class:`NodeError` (a route's
        failure) names its own node and original error."""
        if isinstance(error, NodeError):
            return cls(error.node_id, error.error_type, error.error_message)
        return cls(node_id, type(error).__name__, str(error))

    def to_data(self) -> dict[str, Any]:
        return {"node_id": self.node_id, "error_type": self.error_type, "message": self.message}

    def as_error(self) -> errors.GraphError:
        """The error a caller of the run gets for this failure, as in process: the library's
        own error (an ``InvalidUpdateError``, ...) as itself, any other a :class:`NodeError`
        naming the node and the original error's type."""
        known = getattr(errors, self.error_type, None)
        if (
            isinstance(known, type)
            and issubclass(known, errors.GraphError)
            and known is not NodeError
        ):
            return known(self.message)
        return NodeError(self.node_id, self.error_type, self.message)


@dataclass(slots=True)
class StepMarks:
    """What is recorded on one checkpoint: node updates by task id and the run's marks."""

    updates: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)
    parking: Parking | None = None
    failure: Failure | None = None
    cancelled: bool = False
    claimed: bool = False
    #: the checkpoint's parent was marked cancelled (the step that stored it was finishing)
    parent_cancelled: bool = False
    #: the same run already stored the next step (this one is done)
    step_committed: bool = False
    #: deliveries of each task's message recorded so far, by :meth:`Mark.delivery_key`
    deliveries: Mapping[str, int] = field(default_factory=dict)

    @classmethod
    def of(
        cls,
        writes: Iterable[PendingWrite],
        parent_marks: Iterable[PendingWrite] = (),
        step_committed: bool = False,
    ) -> StepMarks:
        updates: dict[str, Mapping[str, Any]] = {}
        deliveries: dict[str, int] = {}
        parking = failure = None
        cancelled = claimed = False
        for write in writes:
            kind = write.kind
            if kind is WriteKind.UPDATE:
                updates[write.task_id] = write.update
            elif kind is WriteKind.DELIVERY:
                task_id, _, number = write.task_id[len(Mark.DELIVERY) :].rpartition("#")
                if number.isdigit():
                    deliveries[task_id] = max(deliveries.get(task_id, 1), int(number))
            elif kind is WriteKind.INTERRUPT:
                parking = Parking.from_data(write.update)
            elif kind is WriteKind.ERROR:
                failure = Failure.from_data(write.update)
            elif kind is WriteKind.CANCEL:
                cancelled = True
            elif kind is WriteKind.CLAIM:
                claimed = True
        return cls(
            updates,
            parking,
            failure,
            cancelled,
            claimed,
            any(mark.kind is WriteKind.CANCEL for mark in parent_marks),
            step_committed,
            deliveries,
        )

    @classmethod
    def of_view(cls, view: CheckpointView) -> StepMarks:
        return cls.of(view.writes.values(), view.parent_markers.values(), view.step_committed)

    @property
    def stopped(self) -> bool:
        """A node of this step parked or failed the run (or the run was cancelled here)."""
        return self.parking is not None or self.failure is not None or self.cancelled


def has_pending(checkpoint: Checkpoint | None) -> bool:
    """Whether a run continues from ``checkpoint`` (tasks, edges or a completion are left)."""
    return checkpoint is not None and bool(
        checkpoint.tasks
        or checkpoint.extra.get(Extra.EDGES_PENDING)
        or checkpoint.extra.get(Extra.COMPLETION_PENDING)
    )


def steps_taken(checkpoint: Checkpoint) -> int:
    """How many supersteps the invocation ``checkpoint`` belongs to has run."""
    steps = checkpoint.extra.get(Extra.STEPS, 0)
    return steps if type(steps) is int else 0


def next_extra(checkpoint: Checkpoint, *, stepped: bool) -> dict[str, Any]:
    """What the checkpoint after ``checkpoint`` in the same invocation carries of its
    bookkeeping: the invocation's config, its step count (one more when a step ran) and, for a
    child run, its parent run."""
    extra: dict[str, Any] = {}
    if Extra.RUN_CONFIG in checkpoint.extra:
        extra[Extra.RUN_CONFIG] = checkpoint.extra[Extra.RUN_CONFIG]
    if Extra.PARENT in checkpoint.extra:
        extra[Extra.PARENT] = checkpoint.extra[Extra.PARENT]
    steps = steps_taken(checkpoint) + (1 if stepped else 0)
    if steps:
        extra[Extra.STEPS] = steps
    return extra


def is_resumed(checkpoint: Checkpoint) -> bool:
    """Whether ``checkpoint``'s tasks run without stopping before them again (a resume)."""
    return bool(checkpoint.extra.get(Extra.RESUMED))
