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

The records the decisions are taken from (the keys of a checkpoint's ``extra``, the *marks* a
run leaves on a checkpoint, and the predicates that read them) are ``graph/_marks.py``'s.
"""

from __future__ import annotations

import dataclasses
import enum
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Final

from langgraph_celery.checkpoint.base import (
    Checkpoint,
    CheckpointKind,
    PendingTask,
    PendingWrite,
    WriteKind,
)
from langgraph_celery.checkpoint.index import RunStatus
from langgraph_celery.errors import GraphError, GraphRecursionError, GraphStateError
from langgraph_celery.graph._marks import (
    Extra,
    Failure,
    Parking,
    StepMarks,
    has_pending,
    is_resumed,
    steps_taken,
)
from langgraph_celery.graph.types import GraphInput

__all__ = [
    "LATE_STEPS",
    "Action",
    "Decision",
    "RunStatus",
    "Status",
    "carried_writes",
    "decide_next",
    "decide_step",
    "dispatchable",
    "fail",
    "foreign_graph",
    "given_input",
    "is_continued",
    "keeps_unstored",
    "overtaken",
    "rebased",
    "recursion_error",
    "run_node",
    "same_run",
    "status_of",
    "stores_behind",
]


def dispatchable(checkpoint: Checkpoint) -> bool:
    """Whether node tasks may run from ``checkpoint``: not from one ``update_state`` wrote (a
    parked thread stays parked, whatever its latest checkpoint, until a resume stores the
    checkpoint its nodes run from)."""
    return checkpoint.kind is not CheckpointKind.UPDATE


def is_continued(checkpoint: Checkpoint) -> bool:
    """Whether ``checkpoint`` continues a stopped step (a resume or fork of it), so that the
    updates its tasks recorded before stopping are carried on it."""
    return checkpoint.kind in (CheckpointKind.RESUME, CheckpointKind.FORK)


def given_input(graph_input: GraphInput, base: Checkpoint | None, named: str | None) -> GraphInput:
    """What a run starts with, ``base`` being the checkpoint it starts from (the thread's
    latest, or the one ``named`` by ``config.checkpoint_id``): ``None`` given as the input
    continues the thread's pending run (a parked, failed or cancelled one) as
    ``GraphInput.resume()`` does, as LangGraph's ``invoke(None, config)`` and LangGraph4j's
    ``stream(null, config)`` do; on a thread with nothing pending, on a new thread, or with a
    checkpoint named (a fork of it), it is ``GraphInput.no_args()``."""
    if not graph_input.is_none:
        return graph_input
    if named is None and has_pending(base):
        return GraphInput.resume()
    return GraphInput.no_args()


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
        # (parked still for the interruption it carries, when it was written on one)
        parked = checkpoint.extra.get(Extra.PARKED) if checkpoint.extra else None
        if isinstance(parked, Mapping):
            return Status(RunStatus.PARKED, checkpoint, parking=Parking.from_data(parked))
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


def run_node(status: RunStatus, node: str | None, checkpoint: Checkpoint | None) -> str | None:
    """The node a run with ``status`` at ``checkpoint`` is shown at: ``node`` when known (the
    one running, parked at or failed), else, unless it completed, the checkpoint's next node
    (where a cancelled or stopped run resumes)."""
    if node is None and status is not RunStatus.COMPLETED and checkpoint is not None:
        return checkpoint.next[0] if checkpoint.next else None
    return node


def recursion_error(limit: int, next_nodes: Sequence[str]) -> GraphRecursionError:
    return GraphRecursionError(
        f"the run reached its recursion limit of {limit} supersteps without completing "
        f"(next: {', '.join(next_nodes)}); raise recursion_limit in RunnableConfig or "
        "CompileConfig if the graph really needs more"
    )


def nothing_to_resume(thread_id: str) -> GraphStateError:
    """A resume of a thread whose last run completed (in process and on Celery alike)."""
    return GraphStateError(
        f"thread {thread_id!r} has nothing pending to resume (its last run completed); start "
        "a new run: GraphInput.args(...), or the command line's `run`"
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
    the graph's nodes whose actions implement ``InterruptibleAction``, asked before every run of
    their node (SPEC §5, LangGraph4j's runner), a resumed one too: the action decides, from the
    state the resume's update went into or the config's metadata, whether to stop again.  A
    resumed checkpoint's tasks run without stopping at ``interrupt_before`` again.
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
    if interruptible:
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
    ``update_state`` goes on from ``now`` instead, taking the late step up.

    Only a step the run loop stored (``LOOP``) is such a late step: a resume, fork or
    ``update_state`` of another caller that stored first is not taken up, and the store stays
    refused (two resumes of one parked run would otherwise both run its next node)."""
    return (
        base is not None
        and now is not None
        and now.checkpoint_id != base.checkpoint_id
        and now.run_id == base.run_id
        and now.step > base.step
        and now.kind is CheckpointKind.LOOP
    )
