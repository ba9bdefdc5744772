"""The node task's side of ``durability="exit"`` and ``"async"`` (the result backend's side is
``worker/carry.py``): a step's checkpoint carried to the next step's task instead of the store
(exit: stored where the run stops, before a step of several tasks, on a redelivered message and
on a cancel) or ahead of it (async: stored by the task that carried it, right after the send).
Functions of a :class:`~langgraph_celery.worker.runtime.GraphRuntime`, which calls them where
its node task reads a step, commits it, or parks or fails a run.
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
from collections.abc import Iterator, Mapping
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Any

from langgraph_celery.checkpoint.base import Checkpoint, CheckpointKind, CheckpointView
from langgraph_celery.errors import CheckpointConflictError, GraphError
from langgraph_celery.graph import _loop, _marks
from langgraph_celery.graph._loop import Decision
from langgraph_celery.graph._marks import Extra, Parking
from langgraph_celery.graph.config import RunnableConfig
from langgraph_celery.worker import names, subgraphs
from langgraph_celery.worker.carry import Carried, carried_id
from langgraph_celery.worker.envelope import TaskEnvelope
from langgraph_celery.worker.results import TaskResult, TaskStatus
from langgraph_celery.worker.streaming import carried_step, publish_step

if TYPE_CHECKING:
    from langgraph_celery.worker.runtime import GraphRuntime

__all__ = [
    "carried_view",
    "carry_first",
    "commit_carried",
    "materialize",
    "stored_view",
    "watched",
]


def carry_first(runtime: GraphRuntime, checkpoint: Checkpoint, decision: Decision) -> bool:
    """With durability "exit", put a new run's first checkpoint (stored) in the result
    backend too, for its first task to read there (no read of the store); whether it did.
    Not a resume's or a fork's: their tasks find the updates carried over in the store."""
    if checkpoint.kind is not CheckpointKind.INPUT:
        return False
    if not _loop.keeps_unstored(runtime.config_of(checkpoint).durability, decision, fan_out=False):
        return False
    stored = Carried(checkpoint, checkpoint.checkpoint_id, checkpoint.created_at)
    runtime.carrier.put(stored)
    return True


def materialize(runtime: GraphRuntime, carried: Carried, put: bool = True) -> Checkpoint | None:
    """Store a carried checkpoint after the run's last stored one (a copy of the step may
    have stored it already: then that one), and remove it from the result backend (unless
    it was never ``put`` there);
    ``None`` if another copy of the run stored another checkpoint at its step (it goes on,
    this one stops)."""
    if carried.checkpoint.checkpoint_id == carried.stored_id:
        if put:  # (a run's first checkpoint, stored, carried to its first task as well)
            runtime.carrier.forget(carried.stored_id)
        return carried.checkpoint
    checkpoint = _loop.rebased(carried.checkpoint, carried.stored_id)
    try:
        stored: Checkpoint | None = runtime.store_step(checkpoint)
    except CheckpointConflictError:
        stored = runtime.saver.get(checkpoint.thread_id, checkpoint.checkpoint_id)
    if put:  # (the store has it now)
        runtime.carrier.forget(checkpoint.checkpoint_id)
    return stored


def watched(runtime: GraphRuntime, checkpoint: Checkpoint, since: datetime) -> datetime:
    """Push the run's stall timer back when it was last pushed a quarter of
    ``stalled_after`` ago (a run whose steps are carried stores nothing the reaper would
    see progress in); when it was pushed."""
    stalled_after = timedelta(seconds=runtime.executor.stalled_after)
    now = datetime.now(UTC)
    if now - since < stalled_after / 4:
        return since
    runtime.saver.set_timer(
        checkpoint.thread_id,
        checkpoint.run_id,
        runtime.graph_id,
        names.STALL_TIMER,
        now + stalled_after,
    )
    return now


def stored_view(runtime: GraphRuntime, envelope: TaskEnvelope) -> CheckpointView:
    """The store's view of ``envelope``'s checkpoint; a carried one is stored first (a run
    that ends from outside its nodes -- revoked, killed -- ends where it was)."""
    view = runtime.saver.get_with_writes(envelope.thread_id, envelope.checkpoint_id)
    if view.checkpoint is None:
        carried, _ = runtime.carrier.get(envelope.checkpoint_id, envelope.run_id)
        if carried is not None and materialize(runtime, carried) is not None:
            view = runtime.saver.get_with_writes(envelope.thread_id, envelope.checkpoint_id)
    return view


def carried_view(
    runtime: GraphRuntime, envelope: TaskEnvelope, redelivered: bool
) -> tuple[CheckpointView, Carried | None]:
    """What a node task whose step's checkpoint is carried runs from: the carried checkpoint
    (with no writes: its step has one task), or, stored first, the stored one when the run
    was cancelled meanwhile or the message comes again (its worker died): from there the
    step goes as in "sync".  The store's view when nothing is carried (stored already)."""
    carried, cancelled = runtime.carrier.get(envelope.checkpoint_id, envelope.run_id)
    if carried is not None:
        if not redelivered and not cancelled:
            return CheckpointView(carried.checkpoint), carried
        materialize(runtime, carried)
    return runtime.saver.get_with_writes(envelope.thread_id, envelope.checkpoint_id), None


async def commit_carried(
    runtime: GraphRuntime,
    checkpoint: Checkpoint,
    writes: Mapping[str, Mapping[str, Any]],
    config: RunnableConfig,
    carried: Carried,
    kept: bool,
    wake: bool,
) -> TaskResult:
    """Commit a step of a run with durability "exit": the next checkpoint is carried in the
    result backend to the next step's task when the run goes on with one task; else (it
    stops there, or fans out) it is stored and the run goes on as in "sync".  ``wake``:
    no task result published by the backend wakes the thread's followers for a step stored
    here ("async"), so the worker does."""

    def hold(new: Checkpoint) -> Checkpoint:  # (the same id for every copy of the step)
        assert new.parent_id is not None
        return dataclasses.replace(new, checkpoint_id=carried_id(new.parent_id))

    fails_here = functools.partial(_step_fails_here, runtime, carried, writes)
    with fails_here():
        result = await runtime.engine.finish(checkpoint, writes, config, hold)
        at, decision = result.checkpoint, None
        if result.interruption is None:
            at, decision = await runtime.engine.next_decision(at, config, hold)
    goes_on = decision is not None and _loop.keeps_unstored(
        config.durability, decision, fan_out=False
    )
    if Extra.PARENT in at.extra or any(t.node in runtime.children for t in at.tasks):
        # A compiled subgraph's child run stores each step before its next one is sent, in
        # "async" too (the root run's clients read them in the store, in the order their step
        # messages are published: worker/streaming.py; stored behind, a step's message could
        # come after its successor's), and a step that starts a child run is stored (the
        # child's end commits it there).
        goes_on = False
    if _loop.stores_behind(config.durability):
        ahead = Carried(at, checkpoint.checkpoint_id, carried.watched_at) if goes_on else None
        with fails_here():  # (the next state refused by the serializer: nothing was put)
            own_stored, cancelled = _own_stored(runtime, carried, kept, ahead)
        if not own_stored:
            return TaskResult(TaskStatus.MERGED_ELSEWHERE)
        if cancelled is not None and ahead is not None:
            # cancelled since this task read its step: it goes no further (its own step is
            # stored after the cancel's mark, as in "sync"; not after its parent's)
            runtime.carrier.forget(at.checkpoint_id)
            if cancelled == checkpoint.checkpoint_id:
                with contextlib.suppress(CheckpointConflictError):
                    runtime.store_step(at)
            runtime.executor.notifier.publish(at.thread_id, final=True)
            return TaskResult(TaskStatus.STOPPED, checkpoint.next[-1])
        if ahead is not None:
            return _store_behind(runtime, at, wake)
        kept = False  # (gone from the result backend with its stored sign)
    elif goes_on:
        watched_at = watched(runtime, at, carried.watched_at)
        # (one carried state per run: the step's own goes as the next one is put)
        forget = checkpoint.checkpoint_id if kept else None
        # (a root run's clients that follow it get the step as it is carried, not stored)
        announce = None
        if Extra.PARENT not in at.extra and runtime.executor.notifier.can_publish():
            announce = carried_step(at)
        sending = runtime.executor.stalled_after
        with fails_here():
            first = runtime.carrier.put(
                Carried(at, carried.stored_id, watched_at), forget, announce, sending
            )
        if not first:  # another task that committed the step sends the next one
            return TaskResult(TaskStatus.MERGED_ELSEWHERE)
        runtime.send(at, carried=True)
        return TaskResult(
            TaskStatus.CARRIED, checkpoint_id=at.checkpoint_id, step=at.step, next=at.next
        )
    # (async: the step's own checkpoint is stored now)
    stored_id = checkpoint.checkpoint_id if _loop.stores_behind(config.durability) else None
    with fails_here():
        try:
            stored = runtime.store_step(_loop.rebased(at, stored_id or carried.stored_id))
        except CheckpointConflictError:
            # another task of the step (the last two of a step of several may both see every
            # update in) or another copy of this one stored it, and goes on from it: as in
            # "sync", this one stops here (else the next step's tasks would be sent twice)
            return TaskResult(TaskStatus.MERGED_ELSEWHERE)
    root = subgraphs.stream_root(stored)
    if root is not None and stored.kind is CheckpointKind.LOOP:
        # a child run's step: its node outputs go to the root run's clients first
        publish_step(runtime.executor.notifier, root, runtime.graph_id, stored)
    if result.interruption is not None or decision is None:
        interruption = result.interruption
        assert interruption is not None
        runtime.mark_parked(
            stored,
            Parking(interruption.node_id, interruption.reason, dict(interruption.metadata)),
        )
    else:
        decided = await runtime.advance(
            stored,
            announce=True,
            timer_cleared=not _marks.has_pending(stored),
            decision=decision,
        )
        if decided.error is not None:
            raise decided.error
    if kept:
        runtime.carrier.forget(checkpoint.checkpoint_id)
    return runtime.merged(stored)


@contextlib.contextmanager
def _step_fails_here(
    runtime: GraphRuntime, carried: Carried, writes: Mapping[str, Mapping[str, Any]]
) -> Iterator[None]:
    """A step whose next checkpoint cannot be made (a route, a reducer) or carried or stored
    (the serializer refuses the next state) fails the run at the step's own checkpoint,
    stored first, as in "sync" (where its node's update is kept for a resume, if it can be)."""
    try:
        yield
    except GraphError as error:
        stored = materialize(runtime, carried)
        if stored is not None:
            runtime.step_failed(stored, writes, error)
        raise


def _own_stored(
    runtime: GraphRuntime, carried: Carried, kept: bool, ahead: Carried | None
) -> tuple[bool, str | None]:
    """(async) Make sure the step's own checkpoint is in the store before anything after it
    is sent or stored, and put the next one (``ahead``), if any, in the result backend (one
    round trip).  The task that carried the step's checkpoint signs when it has stored it;
    without the sign (its store is in flight, or its task died) it is stored here, from the
    carried copy (the compare-and-set keeps one).  Whether it is stored (False if another copy
    of the run stored another checkpoint at its step, or another task of a step of several,
    which all may commit it, or another copy of this task, put the next one first: that one
    goes on), and where a client
    cancelled the run (there or at its parent) if it did since this task read it."""
    own = carried.checkpoint
    # (of the tasks or copies that commit the step, the one that takes the right sends on)
    sending = runtime.executor.stalled_after if ahead is not None else None
    if own.checkpoint_id == carried.stored_id:  # read from the store, or a run's first
        if ahead is not None:
            forget = own.checkpoint_id if kept else None
            if not runtime.carrier.put(ahead, forget, sending=sending):
                return False, None  # another task that committed the step goes on
        elif kept:
            runtime.carrier.forget(own.checkpoint_id)
        return True, None
    there, cancelled, sends = runtime.carrier.swap(ahead, own, sending)
    if not sends:
        return False, None  # another copy of the step put the next one first: that one goes on
    if there:
        return True, cancelled
    return materialize(runtime, carried, put=False) is not None, cancelled


def _store_behind(runtime: GraphRuntime, at: Checkpoint, wake: bool) -> TaskResult:
    """(async) Send ``at``'s task (``at`` is in the result backend), then store ``at`` while
    that task runs, and sign that it is stored; the task's result is a stored step's
    (``wake``: no result the backend publishes wakes the thread's followers)."""
    runtime.send(at, carried=True)
    with contextlib.suppress(CheckpointConflictError):  # (the next task stored it: no sign)
        runtime.store_step(at)
        runtime.carrier.stored(at.checkpoint_id)
    runtime.step_stored(at, wake)
    return runtime.merged(at)
