"""What the console's buttons do: approve, reject, retry, cancel and fork runs.

Approve, Reject and Retry resume the run (``GraphInput.resume(update)`` on its thread); Fork
invokes the graph from a checkpoint (``RunnableConfig(thread_id=..., checkpoint_id=...)``, a new
run on the same thread).  On Celery this is ``graph.start(...)``, which returns once the run's
first message is sent.  A graph without an executor runs in the console's process, on a thread
of its own: the console waits up to :data:`IN_PROCESS_WAIT` seconds to report an early error.

Cancel stops a running run with ``RunHandle.cancel()``.  A parked or failed run is cancelled
here (``RunHandle.cancel()`` leaves stopped runs alone): its record becomes ``cancelled`` and its
latest checkpoint gets the cancel mark, so it leaves the approval inbox and its deadline timer
is dropped; like any cancelled run it stays resumable.

Actions on one thread are carried out one at a time: each checks the run's status again once it
has the thread, so of two clicks on the same parked run (a double submit, two tabs) exactly one
resumes it and the other is told what became of the run.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Iterator, Mapping
from concurrent.futures import Future, ThreadPoolExecutor
from concurrent.futures import TimeoutError as FutureTimeout
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

from langgraph_celery.checkpoint.base import WriteKind
from langgraph_celery.checkpoint.index import RunRecord, RunStatus
from langgraph_celery.console.catalog import Catalog, GraphEntry
from langgraph_celery.console.redact import redact
from langgraph_celery.console.runs import RunView, read_run
from langgraph_celery.errors import GraphError, GraphStateError, NodeError
from langgraph_celery.graph._marks import Mark
from langgraph_celery.graph.config import RunnableConfig
from langgraph_celery.graph.types import END, GraphInput

__all__ = ["ActionResult", "Steering", "SteeringError", "reject_update"]

log = logging.getLogger("langgraph_celery.console")

#: Seconds to wait for an in-process run to report an early error.
IN_PROCESS_WAIT = 1.0


class SteeringError(Exception):
    """An action that cannot be done on the run as it is; the message says why."""


@dataclass(frozen=True)
class ActionResult:
    action: str
    thread_id: str
    #: the run acted on, or the new run of a fork (``None`` when not known yet: in process)
    run_id: str | None
    message: str


def reject_update(metadata: Mapping[str, Any]) -> dict[str, Any] | None:
    """What Reject resumes with: the interruption's ``reject_with``; else its ``resume_with``
    with each boolean inverted (``{"approved": true}`` becomes ``{"approved": false}``) when it
    has booleans; else ``None`` (Reject is not offered)."""
    explicit = metadata.get("reject_with")
    if isinstance(explicit, Mapping):
        return dict(explicit)
    suggested = metadata.get("resume_with")
    if isinstance(suggested, Mapping) and any(isinstance(v, bool) for v in suggested.values()):
        return {k: (not v if isinstance(v, bool) else v) for k, v in suggested.items()}
    return None


def _verb(status: RunStatus) -> str:
    return {
        RunStatus.RUNNING: "is running",
        RunStatus.PARKED: "is parked",
        RunStatus.FAILED: "failed",
        RunStatus.COMPLETED: "completed",
        RunStatus.CANCELLED: "was cancelled",
    }[status]


class Steering:
    """Carries out the console's actions on the graphs of ``catalog``."""

    def __init__(self, catalog: Catalog, pool: ThreadPoolExecutor | None = None) -> None:
        self.catalog = catalog
        self.pool = pool or ThreadPoolExecutor(max_workers=4, thread_name_prefix="lgc-console")
        self._guard = threading.Lock()
        self._threads: dict[str, threading.Lock] = {}

    @contextmanager
    def _one_at_a_time(self, thread_id: str) -> Iterator[None]:
        """Hold ``thread_id`` for one action (a check of the run's status and its start)."""
        with self._guard:
            lock = self._threads.setdefault(thread_id, threading.Lock())
        with lock:
            yield

    def close(self) -> None:
        self.pool.shutdown(wait=False, cancel_futures=True)

    # -- resuming -----------------------------------------------------------------------------

    def approve(self, run_id: str, update: Mapping[str, Any] | None) -> ActionResult:
        with self._holding(run_id, "approve", RunStatus.PARKED) as run:
            return self._resume(run, update, "approve", "approved")

    def reject(self, run_id: str, update: Mapping[str, Any] | None = None) -> ActionResult:
        with self._holding(run_id, "reject", RunStatus.PARKED) as run:
            return self._reject(run, update)

    def _reject(self, run: RunView, update: Mapping[str, Any] | None) -> ActionResult:
        run_id = run.run_id
        chosen = dict(update) if update is not None else reject_update(run.metadata)
        if chosen is None:
            raise SteeringError(
                f"run {run_id} names no rejection: its interruption has no 'reject_with' and its "
                "'resume_with' has no yes/no field; approve it with the update you want, or "
                "cancel it"
            )
        return self._resume(run, chosen, "reject", "rejected")

    def retry(self, run_id: str, update: Mapping[str, Any] | None = None) -> ActionResult:
        with self._holding(run_id, "retry", RunStatus.FAILED, RunStatus.CANCELLED) as run:
            return self._resume(run, update, "retry", "resumed")

    @contextmanager
    def _holding(self, run_id: str, action: str, *statuses: RunStatus) -> Iterator[RunView]:
        """The run, checked to be in one of ``statuses`` while its thread is held."""
        run = self._expect(run_id, action, *statuses)
        with self._one_at_a_time(run.thread_id):
            yield self._expect(run_id, action, *statuses)  # (again: another action may have won)

    def _expect(self, run_id: str, action: str, *statuses: RunStatus) -> RunView:
        run = read_run(self.catalog, run_id)
        if run.status not in statuses:
            wanted = " or ".join(s.value for s in statuses)
            raise SteeringError(
                f"cannot {action} run {run_id}: it {_verb(run.status)} (only a {wanted} run can be)"
            )
        if not run.on_top:
            raise SteeringError(
                f"cannot {action} run {run_id}: a later run of thread {run.thread_id!r} "
                "followed it, so it can no longer be resumed; fork from one of its checkpoints "
                "instead"
            )
        return run

    def _resume(
        self, run: RunView, update: Mapping[str, Any] | None, action: str, done: str
    ) -> ActionResult:
        config = RunnableConfig(thread_id=run.thread_id)
        graph_input = GraphInput.resume(dict(update) if update is not None else None)
        started = self._start(run.entry, graph_input, config)
        return ActionResult(action, run.thread_id, run.run_id, f"run {run.run_id} {done}{started}")

    # -- forking ------------------------------------------------------------------------------

    def fork(self, thread_id: str, checkpoint_id: str, graph: str | None = None) -> ActionResult:
        from langgraph_celery.console.threads import entry_of_checkpoint

        entry = entry_of_checkpoint(self.catalog, thread_id, checkpoint_id, graph)
        if entry is None:
            raise SteeringError(f"thread {thread_id!r} has no checkpoint {checkpoint_id!r}")
        config = RunnableConfig(thread_id=thread_id, checkpoint_id=checkpoint_id)
        handle: list[Any] = []
        with self._one_at_a_time(thread_id):
            started = self._start(entry, None, config, handle)
        run_id = handle[0].run_id if handle else None
        return ActionResult(
            "fork",
            thread_id,
            run_id,
            f"forked thread {thread_id!r} from checkpoint {checkpoint_id}"
            + (f": run {run_id}" if run_id else "")
            + started,
        )

    # -- running ------------------------------------------------------------------------------

    def _start(
        self,
        entry: GraphEntry,
        graph_input: GraphInput | None,
        config: RunnableConfig,
        handle: list[Any] | None = None,
    ) -> str:
        """Start (or resume) a run of ``entry``'s graph; a note on where it runs."""
        graph = entry.graph
        if entry.on_celery:
            try:
                started = graph.start(graph_input, config)
            except GraphError as error:
                raise SteeringError(redact(str(error))) from error
            except Exception as error:  # the broker or the store refused
                raise SteeringError(redact(f"{type(error).__name__}: {error}")) from error
            if handle is not None:
                handle.append(started)
            return ""
        future: Future[Any] = self.pool.submit(graph.invoke, graph_input, config)
        future.add_done_callback(_log_failure)
        try:
            future.result(timeout=IN_PROCESS_WAIT)
        except FutureTimeout:
            return "; it runs in the console's process"
        except NodeError as error:
            return f"; the run failed: {redact(str(error))}"
        except GraphStateError as error:
            raise SteeringError(redact(str(error))) from error
        except Exception as error:
            return f"; the run stopped with {redact(f'{type(error).__name__}: {error}')}"
        return _where_it_stopped(graph, config)

    # -- cancelling ---------------------------------------------------------------------------

    def cancel(self, run_id: str) -> ActionResult:
        with self._one_at_a_time(read_run(self.catalog, run_id).thread_id):
            return self._cancel(read_run(self.catalog, run_id))

    def _cancel(self, run: RunView) -> ActionResult:
        run_id = run.run_id
        if run.status in (RunStatus.COMPLETED, RunStatus.CANCELLED):
            raise SteeringError(f"cannot cancel run {run_id}: it {_verb(run.status)}")
        if run.status is RunStatus.RUNNING or (
            run.status is RunStatus.PARKED and run.entry.on_celery
        ):
            return self._cancel_running(run)  # (the executor cancels running and parked runs)
        self._cancel_stopped(run)
        return ActionResult(
            "cancel", run.thread_id, run_id, f"run {run_id} cancelled (it stays resumable)"
        )

    def _cancel_running(self, run: RunView) -> ActionResult:
        if not run.entry.on_celery:
            raise SteeringError(
                f"run {run.run_id} runs in process (graph {run.entry.label} has no executor): "
                "only the process running it can stop it"
            )
        from langgraph_celery.worker.handle import RunHandle

        handle = RunHandle(run.run_id, run.thread_id, run.entry.graph)
        try:
            took = handle.cancel()
        except GraphError as error:
            raise SteeringError(redact(str(error))) from error
        if not took:
            raise SteeringError(
                f"run {run.run_id} stopped before the cancel took effect; reload to see how"
            )
        return ActionResult(
            "cancel",
            run.thread_id,
            run.run_id,
            f"run {run.run_id} cancelled (it stays resumable)",
        )

    def _cancel_stopped(self, run: RunView) -> None:
        entry = run.entry
        saver, index = entry.saver, entry.index
        assert saver is not None and index is not None
        checkpoint = saver.get(run.thread_id, run.checkpoint_id) if run.checkpoint_id else None
        if checkpoint is None:
            raise SteeringError(f"run {run.run_id} has no checkpoint left to cancel")
        index.upsert_run(
            RunRecord(
                run.run_id, run.thread_id, run.record.graph_id, RunStatus.CANCELLED, run.record.node
            )
        )
        data = {"by": "console"}
        runtime = getattr(entry.graph._source, "runtime", None)
        mark: Callable[..., Any] | None = getattr(runtime, "mark", None)
        if mark is not None:  # on Celery: wakes whoever waits for the run
            mark(checkpoint, Mark.CANCEL, END, data)
            index.clear_timer(run.thread_id, run.run_id)
        else:
            saver.put_writes(
                run.thread_id, checkpoint.checkpoint_id, Mark.CANCEL, END, data, WriteKind.CANCEL
            )


def _log_failure(future: Future[Any]) -> None:
    if future.cancelled():
        return
    error = future.exception()
    if error is not None and not isinstance(error, GraphStateError):
        log.info("a run the console started in process stopped: %s", redact(repr(error)))


def _where_it_stopped(graph: Any, config: RunnableConfig) -> str:
    """A note on how a run that returned in process ended: completed, or parked where."""
    try:
        pending = graph.get_state(RunnableConfig(thread_id=config.thread_id)).next
    except Exception:  # (the note only: the run's own page tells)
        return "; the run stopped (see its status)"
    if pending:
        return f"; the run parked at {', '.join(pending)}"
    return "; the run completed"
