"""The run loop's decisions, as pure functions of stored data.

Every executor moves a run the same way: from a stored checkpoint it asks :func:`decide_next`
what to do (evaluate edges left for a resume, complete, park before a node, fail on the
recursion limit, or dispatch the step's tasks); once the step's tasks have reported, it asks
:func:`decide_step` whether to wait, park, fail or commit the next checkpoint; and anyone who
watches a run reads its :class:`RunStatus` from :func:`status_of`.  The in-process executor
(``graph/_local.py``), the Celery node and resume tasks (``worker/runtime.py``), the client
(``worker/client.py``) and the beat reaper (``beat/reaper.py``) only carry decisions out, so a
rule they must agree on is written here once.

Nothing here performs I/O, awaits, calls user code or imports an executor.  Calling user code
(routes, ``InterruptibleAction``) and storing are the engine's (``graph/_engine.py``).

The names of the bookkeeping a checkpoint carries in ``extra``, and of the *marks* a run leaves
on a checkpoint (pending writes under reserved task ids), are defined here too.
"""

from __future__ import annotations

import dataclasses
import enum
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Final

from langgraph_celery.checkpoint.base import (
    Checkpoint,
    CheckpointKind,
    CheckpointView,
    PendingTask,
    PendingWrite,
    WriteKind,
)
from langgraph_celery.checkpoint.index import RunStatus
from langgraph_celery.errors import GraphError, GraphRecursionError, NodeError

__all__ = [
    "LATE_STEPS",
    "Action",
    "Decision",
    "Extra",
    "Failure",
    "Mark",
    "Parking",
    "RunStatus",
    "Status",
    "StepMarks",
    "carried_writes",
    "decide_next",
    "decide_step",
    "dispatchable",
    "fail",
    "foreign_graph",
    "has_pending",
    "is_continued",
    "is_resumed",
    "keeps_unstored",
    "next_extra",
    "overtaken",
    "rebased",
    "recursion_error",
    "same_run",
    "status_of",
    "steps_taken",
    "stores_behind",
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
    #: process died, for the ``n``-th delivery (first deliveries are not recorded)
    DELIVERY: Final = "__delivery__:"

    @staticmethod
    def delivery(task_id: str, number: int) -> str:
        return f"{Mark.DELIVERY}{task_id}#{number}"


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
    #: deliveries of each task's message recorded so far (see :attr:`Mark.DELIVERY`)
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


def dispatchable(checkpoint: Checkpoint) -> bool:
    """Whether node tasks may run from ``checkpoint``: not from one ``update_state`` wrote (a
    parked thread stays parked, whatever its latest checkpoint, until a resume stores the
    checkpoint its nodes run from)."""
    return checkpoint.kind is not CheckpointKind.UPDATE


def is_continued(checkpoint: Checkpoint) -> bool:
    """Whether ``checkpoint`` continues a stopped step (a resume or fork of it), so that the
    updates its tasks recorded before stopping are carried on it."""
    return checkpoint.kind in (CheckpointKind.RESUME, CheckpointKind.FORK)


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


@dataclass(frozen=True)
class Status:
    """A run's status at a checkpoint, with the parking or failure that explains it."""

    status: RunStatus
    checkpoint: Checkpoint | None
    parking: Parking | None = None
    failure: Failure | None = None

    @property
    def terminal(self) -> bool:
        """The run is not running: nothing will move it without a request."""
        return self.status is not RunStatus.RUNNING


def status_of(checkpoint: Checkpoint | None, marks: StepMarks) -> Status:
    """Where the run at ``checkpoint`` (the thread's latest, or its run's latest) stands.

    A run that reached END is completed; otherwise a cancel outranks everything, and an
    interruption outranks a sibling's failure (as in process, where the parked step keeps the
    failed sibling's turn for the resume).
    """
    if checkpoint is None or not has_pending(checkpoint):
        # a run that reached END is completed, whatever a late cancel marked (an
        # interrupt_after's step whose edges led to END has COMPLETION_PENDING instead)
        return Status(RunStatus.COMPLETED, checkpoint)
    if marks.cancelled:
        return Status(RunStatus.CANCELLED, checkpoint)
    if marks.parking is not None:
        return Status(RunStatus.PARKED, checkpoint, parking=marks.parking)
    if marks.failure is not None:
        return Status(RunStatus.FAILED, checkpoint, failure=marks.failure)
    if marks.parent_cancelled and checkpoint.kind in (CheckpointKind.LOOP, CheckpointKind.EDGES):
        # stored by a step that finished while its run was being cancelled
        return Status(RunStatus.CANCELLED, checkpoint)
    if checkpoint.kind is CheckpointKind.UPDATE:
        # stored by update_state: nothing was dispatched from it, the run waits for a resume
        node = checkpoint.next[0] if checkpoint.next else (checkpoint.node or "")
        return Status(RunStatus.PARKED, checkpoint, parking=Parking(node))
    return Status(RunStatus.RUNNING, checkpoint)


class Action(enum.StrEnum):
    """What the executor does next."""

    #: (from a checkpoint) evaluate the edges a resume left pending, store, decide again
    EDGES = "edges"
    #: (from a checkpoint) the run is complete
    COMPLETE = "complete"
    #: park the run (before a node, or a node asked to stop)
    PARK = "park"
    #: fail the run (recursion limit, or a node failed for good)
    FAIL = "fail"
    #: (from a checkpoint) run ``tasks``
    DISPATCH = "dispatch"
    #: (after tasks reported) some tasks of the step have not reported yet
    WAIT = "wait"
    #: (after tasks reported) every task wrote: merge, route and store the next checkpoint
    COMMIT = "commit"


@dataclass(slots=True)
class Decision:
    """One decision of the run loop.

    ``tasks`` for DISPATCH (``ask`` lists their nodes whose ``InterruptibleAction`` the executor
    must ask first); ``node`` for PARK (before it, or where a node stopped) and FAIL;
    ``parking``/``error`` what to record.
    """

    action: Action
    tasks: tuple[PendingTask, ...] = ()
    ask: tuple[str, ...] = ()
    node: str | None = None
    parking: Parking | None = None
    error: GraphError | None = None
    failure: Failure | None = None


def recursion_error(limit: int, next_nodes: Sequence[str]) -> GraphRecursionError:
    return GraphRecursionError(
        f"the run reached its recursion limit of {limit} supersteps without completing "
        f"(next: {', '.join(next_nodes)}); raise recursion_limit in RunnableConfig or "
        "CompileConfig if the graph really needs more"
    )


def fail(node_id: str, error: GraphError) -> Decision:
    """The decision to fail the run with ``error``, raised at ``node_id`` (or its step)."""
    failure = Failure.of_error(node_id, error)
    return Decision(Action.FAIL, node=failure.node_id, error=error, failure=failure)


def decide_next(
    checkpoint: Checkpoint,
    *,
    limit: int,
    interrupt_before: frozenset[str] | set[str],
    interruptible: frozenset[str] | set[str] = frozenset(),
) -> Decision:
    """What to do from a stored ``checkpoint`` whose step has not run.

    The invocation's steps so far are the checkpoint's (:func:`steps_taken`); ``interruptible``
    the graph's nodes whose actions implement ``InterruptibleAction``.  A resumed checkpoint's
    tasks run without stopping before them again.
    """
    extra = checkpoint.extra
    if extra and extra.get(Extra.EDGES_PENDING):
        return Decision(Action.EDGES)
    tasks = checkpoint.tasks
    if not tasks:
        return Decision(Action.COMPLETE)
    resumed = bool(extra) and is_resumed(checkpoint)
    if not resumed and interrupt_before:
        for task in tasks:
            if task.node in interrupt_before:
                return Decision(Action.PARK, node=task.node, parking=Parking(task.node))
    if extra and steps_taken(checkpoint) >= limit:
        return fail(checkpoint.next[0], recursion_error(limit, checkpoint.next))
    ask: tuple[str, ...] = ()
    if not resumed and interruptible:
        ask = tuple(dict.fromkeys(t.node for t in tasks if t.node in interruptible))
    return Decision(Action.DISPATCH, tasks=tasks, ask=ask)


def decide_step(tasks: Sequence[PendingTask], marks: StepMarks) -> Decision:
    """What to do once tasks of a step have reported (their updates and marks in ``marks``).

    An interruption outranks a failure; a stopped step keeps the updates of the tasks that
    succeeded (they stay recorded on its checkpoint, and a resume carries them over).
    """
    if marks.parking is not None:
        return Decision(Action.PARK, node=marks.parking.node_id, parking=marks.parking)
    if marks.failure is not None:
        return Decision(Action.FAIL, node=marks.failure.node_id, failure=marks.failure)
    if all(task.id in marks.updates for task in tasks):
        return Decision(Action.COMMIT)
    return Decision(Action.WAIT)


def keeps_unstored(durability: str, decision: Decision, *, fan_out: bool = True) -> bool:
    """Whether the checkpoint ``decision`` was taken from may go to its step's task before it
    is stored, carried in memory (in process) or in the result backend (Celery): only with
    ``durability="exit"`` or ``"async"`` (:func:`stores_behind`), and only when the run goes on
    (a run that completes, parks or fails there stores it first).  ``fan_out=False``: a step of
    several tasks is stored first (its tasks record their updates as pending writes of a stored
    checkpoint)."""
    if durability not in ("exit", "async") or decision.action is not Action.DISPATCH:
        return False
    return fan_out or len(decision.tasks) == 1


def stores_behind(durability: str) -> bool:
    """Whether a checkpoint carried to its step is stored right behind it, while that step
    runs (``"async"``: every step ends up stored, one store in flight per run, in order), or
    only where the run stops (``"exit"``)."""
    return durability == "async"


def rebased(checkpoint: Checkpoint, parent_id: str | None) -> Checkpoint:
    """``checkpoint`` (computed from a parent that was not stored) as stored after
    ``parent_id``, the run's last stored checkpoint: a stored checkpoint's parent is always
    stored.  (A checkpoint whose parent is not the one it was computed from carries no delta
    against it: it is stored whole.)"""
    if checkpoint.parent_id == parent_id:
        return checkpoint
    return dataclasses.replace(checkpoint, parent_id=parent_id, delta=None)


def carried_writes(writes: Iterable[PendingWrite]) -> list[PendingWrite]:
    """The writes of a checkpoint that a resume or fork from it carries over: node updates, not
    marks (they belong to the old checkpoint)."""
    return [write for write in writes if write.kind is WriteKind.UPDATE]


def foreign_graph(checkpoint: Checkpoint | None, graph_id: str | None) -> str | None:
    """Why graph ``graph_id`` may not start, resume, fork or update runs on ``checkpoint``'s
    thread (it holds another graph's runs), or ``None``.  Only graphs compiled with a
    ``graph_id`` own their threads."""
    owner = checkpoint.extra.get(Extra.GRAPH_ID) if checkpoint is not None else None
    if checkpoint is None or owner is None or graph_id is None or owner == graph_id:
        return None
    return (
        f"thread {checkpoint.thread_id!r} holds runs of graph {owner!r}; graph {graph_id!r} "
        f"cannot start, resume or update runs on it: use graph {owner!r} for this thread, or "
        "another thread"
    )


def same_run(base: Checkpoint, latest: Checkpoint | None, checkpoint_id: str | None) -> bool:
    """Whether a transition out of ``base`` continues its run: yes when ``base`` is the
    thread's latest (a resume, an update); a fork of an older checkpoint starts a new run.
    It is also whether what the transition stores is ``base``'s successor (the saver keeps
    one per checkpoint) rather than a branch (:attr:`Checkpoint.branch`)."""
    if checkpoint_id is None:
        return True
    return latest is not None and latest.checkpoint_id == base.checkpoint_id


#: How many late steps of a cancelled run a start, resume or update starts again after (see
#: :func:`overtaken`).
LATE_STEPS: Final = 3


def overtaken(base: Checkpoint | None, now: Checkpoint | None) -> bool:
    """Whether ``now``, the thread's latest checkpoint after a store going on from ``base``
    (the latest when it was read) was refused, is a later step of ``base``'s run: a step that
    was finishing when the run was cancelled stored its checkpoint first (the saver keeps one
    successor per checkpoint, and one checkpoint per step).  Then the start, resume or
    ``update_state`` goes on from ``now`` instead, taking the late step up."""
    return (
        base is not None
        and now is not None
        and now.checkpoint_id != base.checkpoint_id
        and now.run_id == base.run_id
        and now.step > base.step
    )
