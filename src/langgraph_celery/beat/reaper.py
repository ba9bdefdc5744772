"""The reaper: the beat job that keeps every active run moving and expires parked approvals.

Each thread with an active run has a *timer* in the checkpoint store (set when a run starts or
resumes, cleared when it completes or fails).  When a timer is due the reaper looks at the
thread's latest checkpoint, which is the source of truth:

- still progressing (its latest checkpoint is younger than ``stalled_after``): the timer is
  pushed back;
- stalled (nothing committed for ``stalled_after`` seconds: the broker lost the message, or a
  worker died after committing and before dispatching): the step is finished if every task has
  written; otherwise, unless a live worker reports one of its tasks as running, reserved or
  scheduled (a node that is merely slow), its tasks are sent again with their deterministic
  task ids.  Both are idempotent: a write is applied once whoever runs the task;
- parked with a deadline that has passed: the run is resumed with a timeout marker under the
  state key :data:`TIMEOUT_KEY`, so the pending node can tell an expired approval from a given
  one;
- completed, failed or parked without a deadline: the timer is removed.

Which tasks are alive is asked of the workers once per pass, after the due timers were read, and
only when a stalled step needs it: one ``inspect`` broadcast (``query_task``) names the tasks of
every such step, and each worker answers with those it holds, running, reserved or scheduled.
A worker that does not answer within a second counts as dead (its tasks are sent again: their
updates still land once).

With ``CeleryExecutor(checkpoint_ttl=seconds)`` each pass then deletes the threads whose run
completed and whose last checkpoint is older than that (``saver.delete_thread``: checkpoints,
writes, timer, run records).  Completed threads have no timer, so the pass finds them in the
run index instead: :meth:`~langgraph_celery.checkpoint.RunIndex.completed_runs` lists, per graph,
the completed runs last updated before ``now - checkpoint_ttl``, oldest first, on an index
(``(graph_id, status, superseded, updated_at)`` with ``SqlSaver``), leaving out the records of
runs a newer run of their thread has superseded (set aside as they are met, so each record is
passed over once, however many runs a thread has had).  For each, the thread's latest checkpoint
decides, as everywhere: completed and older than the TTL, the thread is claimed (as a new run,
a resume or an update claims it: none of them can start on it meanwhile) and deleted; not
completed (a run without a record, an ``update_state``), the record is set aside
(:meth:`~langgraph_celery.checkpoint.RunIndex.supersede_run`) until it is next updated;
completed but younger (an ``update_state`` after the run), it is looked at again later.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Any

from langgraph_celery.checkpoint.base import BaseCheckpointSaver, Checkpoint, Timer
from langgraph_celery.checkpoint.index import RunIndex, RunRecord
from langgraph_celery.errors import GraphError, GraphStateError
from langgraph_celery.graph import _loop
from langgraph_celery.graph._loop import Action, RunStatus
from langgraph_celery.graph._marks import StepMarks
from langgraph_celery.graph._sync import run_sync
from langgraph_celery.graph.config import RunnableConfig
from langgraph_celery.graph.types import GraphInput
from langgraph_celery.worker import _claims, names
from langgraph_celery.worker.client import CelerySource, read_status, status_of

if TYPE_CHECKING:
    from langgraph_celery.worker.executor import CeleryExecutor
    from langgraph_celery.worker.runtime import GraphRuntime

__all__ = ["TIMEOUT_KEY", "ReapReport", "reap"]

log = logging.getLogger("langgraph_celery.beat")

#: The state key a run resumed by an expired interrupt deadline finds its timeout marker under.
TIMEOUT_KEY = "__interrupt_timeout__"


@dataclass
class ReapReport:
    """What one reaper pass did, thread ids by outcome."""

    redispatched: list[str] = field(default_factory=list)
    finished: list[str] = field(default_factory=list)
    alive: list[str] = field(default_factory=list)
    expired: list[str] = field(default_factory=list)
    progressing: list[str] = field(default_factory=list)
    cleared: list[str] = field(default_factory=list)
    #: completed threads older than ``checkpoint_ttl``, deleted
    deleted: list[str] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)

    def to_data(self) -> dict[str, Any]:
        return {name: list(value) for name, value in self.__dict__.items()}


def _savers(executor: CeleryExecutor) -> list[BaseCheckpointSaver]:
    found: dict[int, BaseCheckpointSaver] = {}
    for runtime in executor.runtimes():
        found.setdefault(id(runtime.saver), runtime.saver)
    return list(found.values())


#: How far past ``limit`` a pass reads when due timers belong to graphs it does not know.
_UNKNOWN_FETCH_FACTOR = 50


def _due(
    executor: CeleryExecutor, saver: BaseCheckpointSaver, now: datetime, limit: int
) -> list[Timer]:
    """Due timers, earliest first, with up to ``limit`` of graphs this process knows: timers of
    other graphs (left for the processes that run them) do not take the place of its own."""
    fetch = limit
    while True:
        timers = list(saver.due_timers(now, fetch))
        known = sum(executor.runtime(timer.graph_id) is not None for timer in timers)
        if known >= limit or len(timers) < fetch or fetch >= limit * _UNKNOWN_FETCH_FACTOR:
            return timers
        fetch = min(fetch * 2, limit * _UNKNOWN_FETCH_FACTOR)


@dataclass
class _Stalled:
    """A stalled step whose tasks may still be alive on a worker: decided once the workers have
    said which of ``waiting`` (its tasks' Celery ids) they hold."""

    runtime: GraphRuntime
    checkpoint: Checkpoint
    marks: StepMarks
    waiting: set[str]


def _live_tasks(app: Any, ids: set[str]) -> set[str]:
    """Which of the Celery task ``ids`` a worker holds, running, reserved or scheduled (one
    broadcast, ``query_task``, answered within a second); none when no worker answers."""
    try:
        replies = app.control.inspect(timeout=1.0).query_task(*sorted(ids))
    except Exception as error:  # no answer: every stalled step's tasks count as dead
        log.warning("reaper: the workers did not say which tasks run: %s", error)
        return set()
    return {str(task_id) for reply in (replies or {}).values() for task_id in (reply or {})}


def reap(executor: CeleryExecutor, now: datetime | None = None, limit: int = 100) -> ReapReport:
    """One pass over the due timers of every saver the executor's graphs use."""
    now = now or datetime.now(UTC)
    report = ReapReport()
    stalled: list[_Stalled] = []
    for saver in _savers(executor):
        unknown: dict[str, int] = {}
        for timer in _due(executor, saver, now, limit):
            runtime = executor.runtime(timer.graph_id)
            if runtime is None:
                unknown[timer.graph_id] = unknown.get(timer.graph_id, 0) + 1
                continue
            try:
                _reap_one(executor, runtime, timer, now, report, stalled)
            except Exception:  # one bad thread must not stop the pass
                log.exception("reaper: thread %r could not be handled", timer.thread_id)
                report.errors.append(timer.thread_id)
        if unknown:
            log.warning(
                "reaper: due threads of graphs this process does not know (left for the "
                "processes that run them; import their modules here to handle them): %s",
                unknown,
            )
    if stalled:
        live = _live_tasks(executor.app, set().union(*(step.waiting for step in stalled)))
        for step in stalled:
            try:
                _restart(step, live, report)
            except Exception:
                log.exception("reaper: thread %r could not be handled", step.checkpoint.thread_id)
                report.errors.append(step.checkpoint.thread_id)
    if executor.checkpoint_ttl is not None:
        _expire_threads(executor, now - timedelta(seconds=executor.checkpoint_ttl), limit, report)
    if any(report.to_data().values()):
        log.info("reaper pass: %s", report.to_data())
    return report


def _reap_one(
    executor: CeleryExecutor,
    runtime: GraphRuntime,
    timer: Timer,
    now: datetime,
    report: ReapReport,
    stalled: list[_Stalled],
) -> None:
    """Handle one due timer; a stalled step whose tasks may be alive goes on ``stalled``, for
    :func:`_restart` once the workers have been asked (once a pass)."""
    saver = runtime.saver
    thread_id = timer.thread_id
    latest = saver.get(thread_id)
    status = read_status(runtime, latest)
    if latest is None:
        saver.clear_timer(thread_id, timer.run_id, timer.due_at)
        report.cleared.append(thread_id)
        return
    if status.status is RunStatus.PARKED and timer.kind == names.DEADLINE_TIMER:
        node = status.parking.node_id if status.parking is not None else None
        if _expire(runtime, latest.thread_id, node, timer, now):
            report.expired.append(thread_id)
        return
    if status.status is not RunStatus.RUNNING:
        saver.clear_timer(thread_id, timer.run_id, timer.due_at)
        report.cleared.append(thread_id)
        return
    stalled_after = timedelta(seconds=runtime.executor.stalled_after)
    if now - latest.created_at < stalled_after:
        due = latest.created_at + stalled_after
        saver.set_timer(thread_id, latest.run_id, timer.graph_id, names.STALL_TIMER, due)
        report.progressing.append(thread_id)
        return
    # Re-armed first: what follows may park the run (and set a deadline) or complete it.
    saver.set_timer(
        thread_id, latest.run_id, timer.graph_id, names.STALL_TIMER, now + stalled_after
    )
    marks = StepMarks.of(saver.get_writes(thread_id, latest.checkpoint_id))
    waiting = {
        names.celery_task_id(latest.run_id, latest.checkpoint_id, task.id)
        for task in latest.tasks
        if task.id not in marks.updates
    }
    step = _Stalled(runtime, latest, marks, waiting)
    if waiting:
        stalled.append(step)
    else:
        _restart(step, set(), report)


def _restart(step: _Stalled, live: set[str], report: ReapReport) -> None:
    """A stalled step: left alone if a worker holds one of its tasks (a slow node), else
    finished from its writes or its tasks sent again."""
    latest, thread_id = step.checkpoint, step.checkpoint.thread_id
    if step.waiting & live:
        report.alive.append(thread_id)  # a slow node: its task runs, nothing to send again
        return
    if latest.tasks and _loop.decide_step(latest.tasks, step.marks).action is Action.COMMIT:
        step.runtime.commit(latest, step.marks.updates)
        report.finished.append(thread_id)
    else:
        run_sync(step.runtime.advance(latest))
        report.redispatched.append(thread_id)


def _expire(
    runtime: GraphRuntime,
    thread_id: str,
    node_id: str | None,
    timer: Timer,
    now: datetime,
) -> bool:
    """Resume the parked run with the timeout marker; False if it was resumed meanwhile."""
    update = {
        TIMEOUT_KEY: {
            "node_id": node_id,
            "deadline": timer.due_at.isoformat(),
            "expired_at": now.isoformat(),
        }
    }
    try:
        run_sync(
            CelerySource(runtime).begin(
                GraphInput.resume(update), RunnableConfig(thread_id=thread_id)
            )
        )
    except GraphError as error:  # resumed by someone else meanwhile: nothing to expire
        # The timer is left alone: the resume that won has armed (or is arming) its own timer
        # for the same run, and clearing by run id would remove it; the next pass re-reads.
        log.info("reaper: deadline of thread %r not applied: %s", thread_id, error)
        return False
    return True


# -- checkpoint_ttl -------------------------------------------------------------------------------


def _expire_threads(
    executor: CeleryExecutor, before: datetime, limit: int, report: ReapReport
) -> None:
    """Delete the completed threads of the executor's graphs whose last checkpoint is older
    than ``before`` (see the module's docstring): at most ``limit`` records looked at a graph."""
    for runtime in executor.runtimes():
        saver = runtime.saver
        if not isinstance(saver, RunIndex):  # (refused at compile: a Celery saver indexes runs)
            continue
        try:
            records = saver.completed_runs(runtime.graph_id, before, limit=limit)
        except NotImplementedError as error:
            log.error("reaper: checkpoint_ttl not applied to graph %r: %s", runtime.graph_id, error)
            continue
        for record in records:
            try:
                if _expire_thread(runtime, saver, record, before):
                    report.deleted.append(record.thread_id)
            except Exception:  # one bad thread must not stop the pass
                log.exception("reaper: thread %r could not be expired", record.thread_id)
                report.errors.append(record.thread_id)


def _expire_thread(
    runtime: GraphRuntime, index: RunIndex, record: RunRecord, before: datetime
) -> bool:
    """Delete ``record``'s thread if its run completed and its last checkpoint is older than
    ``before``; whether it was deleted."""
    saver = runtime.saver
    thread_id = record.thread_id
    view = saver.get_with_writes(thread_id)
    latest = view.checkpoint
    if latest is None:  # (only the run records were left)
        saver.delete_thread(thread_id)
        return True
    if status_of(view).status is not RunStatus.COMPLETED:
        index.supersede_run(record)  # the thread went on: back when the record is updated
        return False
    if latest.created_at > before:
        return False  # (stored after the run completed, by an update: later)
    # Claimed as a start, resume or update claims it: none of them starts on it meanwhile.
    try:
        view, claim = _claims.claim_thread(runtime, thread_id)
    except GraphStateError as error:
        log.info("reaper: thread %r not expired: %s", thread_id, error)
        return False
    if view.checkpoint is None or view.checkpoint.checkpoint_id != latest.checkpoint_id:
        _claims.release(
            runtime, view.checkpoint, claim
        )  # (it went on meanwhile: the next pass sees it)
        return False
    saver.delete_thread(thread_id)  # (the claim goes with it)
    log.info("reaper: thread %r deleted (completed at %s)", thread_id, latest.created_at)
    return True
