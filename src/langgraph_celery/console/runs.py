"""Reading runs and threads for the console: the run index, and the marks on checkpoints.

A run's status comes from the run index (:class:`RunRecord`), which every executor keeps.  What
explains it, a parked run's interruption (node, reason, metadata and its deadline
``expires_at``) or a failed run's error, is read from the marks on the run's latest checkpoint
with :func:`langgraph_celery.worker.client.status_of`.  The in-process executor stores no marks:
for its runs the console knows the parked or failing node (from the record) but not the reason
or the error.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from langgraph_celery.checkpoint.base import BaseCheckpointSaver, Checkpoint, CheckpointView
from langgraph_celery.checkpoint.index import RunIndex, RunRecord, RunStatus, run_order
from langgraph_celery.console.catalog import Catalog, CatalogError, GraphEntry
from langgraph_celery.console.diff import Change, diff_states
from langgraph_celery.console.redact import redact
from langgraph_celery.graph._marks import Extra, Failure, Parking
from langgraph_celery.worker.client import status_of
from langgraph_celery.worker.names import celery_task_id

__all__ = [
    "CheckpointRow",
    "RunPage",
    "RunView",
    "TaskRow",
    "ThreadView",
    "find_run",
    "list_runs",
    "read_run",
    "read_thread",
    "thread_fingerprint",
]

#: The most runs one page lists.
MAX_PAGE = 200


@dataclass(frozen=True)
class RunView:
    """A run as the console shows it."""

    record: RunRecord
    entry: GraphEntry
    parking: Parking | None = None
    failure: Failure | None = None
    #: the run's latest checkpoint
    checkpoint_id: str | None = None
    #: whether that checkpoint is its thread's latest (only then can the run be resumed)
    on_top: bool = True

    @property
    def run_id(self) -> str:
        return self.record.run_id

    @property
    def thread_id(self) -> str:
        return self.record.thread_id

    @property
    def status(self) -> RunStatus:
        return self.record.status

    @property
    def metadata(self) -> Mapping[str, Any]:
        return self.parking.metadata if self.parking is not None else {}

    @property
    def deadline(self) -> datetime | None:
        """When a parked run expires (its interruption's ``expires_at``), if it does."""
        value = self.metadata.get("expires_at")
        if not isinstance(value, str):
            return None
        try:
            return datetime.fromisoformat(value)
        except ValueError:
            return None


@dataclass(frozen=True)
class RunPage:
    runs: list[RunView]
    #: pass as ``before`` for the next page (``None``: this is the last)
    next_before: str | None = None


def _saver_of(entry: GraphEntry) -> BaseCheckpointSaver:
    saver = entry.saver
    if saver is None:
        raise CatalogError(f"graph {entry.label} has no checkpoint saver: it keeps no runs")
    return saver


def _run_view(entry: GraphEntry, record: RunRecord, detail: bool = True) -> RunView:
    """``record`` with what its latest checkpoint's marks say (unless not ``detail``)."""
    if not detail:
        return RunView(record, entry)
    saver = _saver_of(entry)
    view = saver.get_with_writes(record.thread_id)
    on_top = True
    latest = view.checkpoint
    if latest is not None and latest.run_id != record.run_id:
        on_top = False
        mine = next((c for c in saver.list(record.thread_id) if c.run_id == record.run_id), None)
        view = (
            saver.get_with_writes(record.thread_id, mine.checkpoint_id)
            if mine is not None
            else CheckpointView(None)
        )
    checkpoint = view.checkpoint
    if checkpoint is None:
        return RunView(record, entry, on_top=on_top)
    status = status_of(view)
    parking, failure = status.parking, status.failure
    if record.status is RunStatus.PARKED and parking is None:
        parking = Parking(record.node or (checkpoint.next[0] if checkpoint.next else "?"))
    if record.status is not RunStatus.PARKED:
        parking = None
    if record.status is not RunStatus.FAILED:
        failure = None
    if failure is not None:  # errors quote URLs, with their passwords
        failure = Failure(failure.node_id, failure.error_type, redact(failure.message))
    return RunView(record, entry, parking, failure, checkpoint.checkpoint_id, on_top)


def _record(catalog: Catalog, run_id: str) -> tuple[GraphEntry, RunRecord] | None:
    for entry in catalog.indexed():
        index = entry.index
        assert index is not None
        record = index.get_run(run_id)
        if record is not None and record.graph_id == entry.key:
            return entry, record
    return None


def find_run(catalog: Catalog, run_id: str) -> tuple[GraphEntry, RunRecord]:
    found = _record(catalog, run_id)
    if found is None:
        raise CatalogError(
            f"no run {run_id!r} in the run index of the graphs served here; list them on the "
            "runs page"
        )
    return found


def read_run(catalog: Catalog, run_id: str) -> RunView:
    """Run ``run_id`` with its interruption or error (``CatalogError`` if unknown)."""
    entry, record = find_run(catalog, run_id)
    return _run_view(entry, record)


def list_runs(
    catalog: Catalog,
    graph: str | None = None,
    status: RunStatus | None = None,
    *,
    limit: int = 50,
    before: str | None = None,
    detail: bool = True,
) -> RunPage:
    """Runs of ``graph`` (every served graph's if ``None``) with ``status``, newest first, a
    page of ``limit``; ``before`` is the ``next_before`` of the previous page."""
    limit = max(1, min(limit, MAX_PAGE))
    anchor: RunRecord | None = None
    if before is not None:
        anchor = find_run(catalog, before)[1]
    records: list[tuple[GraphEntry, RunRecord]] = []
    for entry in catalog.indexed(graph):
        index = entry.index
        assert index is not None
        for record in index.list_runs(entry.key, status, limit=limit + 1, before=anchor):
            records.append((entry, record))
    records.sort(key=lambda pair: run_order(pair[1]), reverse=True)
    page = records[:limit]
    more = len(records) > limit
    views = [_run_view(entry, record, detail) for entry, record in page]
    return RunPage(views, page[-1][1].run_id if more and page else None)


# -- threads ------------------------------------------------------------------------------------


@dataclass(frozen=True)
class TaskRow:
    """A node task that runs from a checkpoint, with its Celery task id (on Celery)."""

    task_id: str
    node: str
    celery_id: str | None


@dataclass(frozen=True)
class CheckpointRow:
    checkpoint: Checkpoint
    #: what changed since the parent checkpoint
    changes: list[Change]
    #: the updates recorded on the checkpoint: ``(node, update)``, one per task (a step), or the
    #: input's, resume's or update_state's
    updates: list[tuple[str, Any]]
    #: the tasks that run from it
    tasks: list[TaskRow]


@dataclass(frozen=True)
class ThreadView:
    thread_id: str
    entry: GraphEntry
    #: newest first
    checkpoints: list[CheckpointRow]
    #: the thread's runs, newest first
    runs: list[RunView] = field(default_factory=list)

    @property
    def current(self) -> RunView | None:
        """The run of the thread's latest checkpoint."""
        if not self.checkpoints:
            return None
        run_id = self.checkpoints[0].checkpoint.run_id
        return next((run for run in self.runs if run.run_id == run_id), None)

    @property
    def highlight(self) -> str | None:
        """The node to highlight: where the current run is parked, failed or running."""
        run = self.current
        if run is None:
            return None
        if run.parking is not None:
            return run.parking.node_id
        if run.failure is not None:
            return run.failure.node_id
        if run.record.node is not None or run.status is RunStatus.COMPLETED:
            return run.record.node
        # (a cancelled run: the node it stopped before, as `langgraph-celery status` shows it)
        latest = self.checkpoints[0].checkpoint
        return latest.next[0] if latest.next else None

    @property
    def visited(self) -> set[str]:
        """The nodes the thread's latest checkpoint went through: its own branch's, not those
        of a branch a fork left behind."""
        by_id = {row.checkpoint.checkpoint_id: row.checkpoint for row in self.checkpoints}
        nodes: set[str] = set()
        checkpoint = self.checkpoints[0].checkpoint if self.checkpoints else None
        while checkpoint is not None:
            if checkpoint.node:
                nodes.add(checkpoint.node)
            parent = checkpoint.parent_id
            checkpoint = by_id.pop(parent, None) if parent is not None else None
        return nodes


def _updates(checkpoint: Checkpoint) -> list[tuple[str, Any]]:
    metadata = checkpoint.metadata
    writes = metadata.get("writes")
    if isinstance(writes, Mapping) and writes:
        return [(str(task).split("#", 1)[0], update) for task, update in writes.items()]
    update = metadata.get("update")
    if update:
        return [(str(metadata.get("source") or checkpoint.kind.value), update)]
    return []


def _graph_of_thread(catalog: Catalog, thread_id: str, graph: str | None) -> GraphEntry:
    if graph is not None:
        return catalog.get(graph)
    for saver in catalog.savers():
        latest = saver.get(thread_id)
        if latest is None:
            continue
        owner = latest.extra.get(Extra.GRAPH_ID)
        if isinstance(owner, str) and owner in catalog.entries:
            return catalog.entries[owner]
        if isinstance(saver, RunIndex):
            record = saver.get_run(latest.run_id)
            if record is not None and record.graph_id in catalog.entries:
                return catalog.entries[record.graph_id]
        candidates = [entry for entry in catalog if entry.saver is saver]
        if len(candidates) == 1:
            return candidates[0]
    raise CatalogError(
        f"no thread {thread_id!r} in the checkpoint stores of the graphs served here"
    )


def read_thread(catalog: Catalog, thread_id: str, graph: str | None = None) -> ThreadView:
    """Thread ``thread_id``'s checkpoints (newest first) with their changes and tasks, and its
    runs."""
    entry = _graph_of_thread(catalog, thread_id, graph)
    saver = _saver_of(entry)
    checkpoints: Sequence[Checkpoint] = saver.list(thread_id)
    if not checkpoints:
        raise CatalogError(f"graph {entry.label} has no thread {thread_id!r}")
    by_id = {c.checkpoint_id: c for c in checkpoints}
    rows: list[CheckpointRow] = []
    for checkpoint in checkpoints:
        parent = by_id.get(checkpoint.parent_id) if checkpoint.parent_id else None
        changes = diff_states(parent.values if parent is not None else {}, checkpoint.values)
        tasks = [
            TaskRow(
                task.id,
                task.node,
                celery_task_id(checkpoint.run_id, checkpoint.checkpoint_id, task.id)
                if entry.on_celery
                else None,
            )
            for task in checkpoint.tasks
        ]
        rows.append(CheckpointRow(checkpoint, changes, _updates(checkpoint), tasks))
    runs: list[RunView] = []
    index = entry.index
    if index is not None:
        seen: list[str] = []
        for checkpoint in checkpoints:
            if checkpoint.run_id not in seen:
                seen.append(checkpoint.run_id)
        for run_id in seen:
            record = index.get_run(run_id)
            if record is not None:
                runs.append(_run_view(entry, record))
    return ThreadView(thread_id, entry, rows, runs)


def thread_fingerprint(catalog: Catalog, thread_id: str, graph: str | None = None) -> list[str]:
    """What changes whenever the thread moves: its latest checkpoint and its run's status."""
    entry = _graph_of_thread(catalog, thread_id, graph)
    saver = _saver_of(entry)
    latest = saver.get(thread_id)
    if latest is None:
        return []
    index = entry.index
    record = index.get_run(latest.run_id) if index is not None else None
    status = record.status.value if record is not None else ""
    return [latest.checkpoint_id, latest.run_id, status]
