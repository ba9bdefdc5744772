"""A thread as the console shows it: a page of its checkpoints with what each changed, its
tasks (with their Celery task ids) and its runs."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from langgraph_celery.checkpoint.base import BaseCheckpointSaver, Checkpoint, CheckpointView
from langgraph_celery.checkpoint.index import RunIndex
from langgraph_celery.console.catalog import Catalog, CatalogError, GraphEntry
from langgraph_celery.console.diff import Change, diff_states
from langgraph_celery.console.runs import MAX_PAGE, RunView, explained, run_view, saver_of
from langgraph_celery.graph._marks import Extra
from langgraph_celery.worker.names import celery_task_id

__all__ = [
    "THREAD_PAGE",
    "CheckpointRow",
    "TaskRow",
    "ThreadView",
    "entry_of_checkpoint",
    "read_thread",
    "thread_fingerprint",
]


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
    #: a page of them, newest first
    checkpoints: list[CheckpointRow]
    #: the runs of those and the current run, newest first
    runs: list[RunView] = field(default_factory=list)
    #: the thread's latest checkpoint (on the first page, the first of ``checkpoints``)
    latest: Checkpoint | None = None
    #: the ``before`` of the next page of older checkpoints (``None``: this is the last)
    next_before: str | None = None

    @property
    def current(self) -> RunView | None:
        """The run of the thread's latest checkpoint."""
        if self.latest is None:
            return None
        run_id = self.latest.run_id
        return next((run for run in self.runs if run.run_id == run_id), None)

    @property
    def highlight(self) -> str | None:
        """The node to highlight: where the current run is parked, failed or running."""
        # (a cancelled run's record: the node it stopped before, as `status` shows it)
        return self.current.node if self.current is not None else None

    @property
    def visited(self) -> set[str]:
        """The nodes the page's newest checkpoint went through: its own branch's, not those
        of a branch a fork left behind (as far as the page goes)."""
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


#: How many checkpoints a thread's page shows (``read_thread``'s default ``limit``).
THREAD_PAGE = 50


def read_thread(
    catalog: Catalog,
    thread_id: str,
    graph: str | None = None,
    *,
    before: str | None = None,
    limit: int = THREAD_PAGE,
) -> ThreadView:
    """A page of thread ``thread_id``'s checkpoints (newest first; those stored before
    checkpoint ``before`` if given) with their changes and tasks, and their runs.

    It reads the page (and the parents of its checkpoints), never the whole thread: a thread
    of thousands of steps over a large state costs what one page of it costs."""
    entry = _graph_of_thread(catalog, thread_id, graph)
    saver = saver_of(entry)
    limit = max(1, min(limit, MAX_PAGE))
    top = saver.get_with_writes(thread_id)
    if top.checkpoint is None:
        raise CatalogError(f"graph {entry.label} has no thread {thread_id!r}")
    # (values shared with the saver's cache, not copied: this only shows them)
    page = list(saver._shared_page(thread_id, limit + 1, before))
    if not page and before is not None and saver._shared_view(thread_id, before).checkpoint is None:
        raise CatalogError(f"thread {thread_id!r} has no checkpoint {before!r}")
    shown = page[:limit]
    by_id = {c.checkpoint_id: c for c in page}
    rows: list[CheckpointRow] = []
    for checkpoint in shown:
        parent = _parent(saver, checkpoint, by_id)
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
    runs = _runs_of_page(entry, top, shown, first_page=before is None)
    more = shown[-1].checkpoint_id if len(page) > limit else None
    return ThreadView(thread_id, entry, rows, runs, top.checkpoint, more)


def entry_of_checkpoint(
    catalog: Catalog, thread_id: str, checkpoint_id: str, graph: str | None = None
) -> GraphEntry | None:
    """The graph of thread ``thread_id`` when it holds checkpoint ``checkpoint_id``."""
    entry = _graph_of_thread(catalog, thread_id, graph)
    return entry if saver_of(entry).get(thread_id, checkpoint_id) is not None else None


def _parent(
    saver: BaseCheckpointSaver, checkpoint: Checkpoint, by_id: dict[str, Checkpoint]
) -> Checkpoint | None:
    """``checkpoint``'s parent: on the page, or read (a fork's may be far down the thread)."""
    if checkpoint.parent_id is None:
        return None
    parent = by_id.get(checkpoint.parent_id)
    if parent is None:
        parent = saver.get(checkpoint.thread_id, checkpoint.parent_id)
        if parent is not None:
            by_id[parent.checkpoint_id] = parent
    return parent


def _runs_of_page(
    entry: GraphEntry, top: CheckpointView, shown: Sequence[Checkpoint], first_page: bool
) -> list[RunView]:
    """The runs of ``shown`` and the thread's current run (of ``top``), newest first, each
    explained by its latest checkpoint: on the first page a run's newest checkpoint there is
    its latest; elsewhere too, but for the page's first run (it may go on on the page before)."""
    index = entry.index
    assert top.checkpoint is not None
    if index is None:
        return []
    saver = saver_of(entry)
    newest: dict[str, Checkpoint] = {top.checkpoint.run_id: top.checkpoint}
    for checkpoint in shown:
        newest.setdefault(checkpoint.run_id, checkpoint)
    runs: list[RunView] = []
    for run_id, checkpoint in newest.items():
        record = index.get_run(run_id)
        if record is None:
            continue
        if checkpoint is top.checkpoint:
            runs.append(explained(entry, record, top, on_top=True))
        elif first_page or checkpoint is not shown[0]:
            view = saver._shared_view(checkpoint.thread_id, checkpoint.checkpoint_id)
            runs.append(explained(entry, record, view, on_top=False))
        else:
            runs.append(run_view(entry, record))
    return runs


def thread_fingerprint(catalog: Catalog, thread_id: str, graph: str | None = None) -> list[str]:
    """What changes whenever the thread moves: its latest checkpoint and its run's status."""
    entry = _graph_of_thread(catalog, thread_id, graph)
    saver = saver_of(entry)
    latest = saver.get(thread_id)
    if latest is None:
        return []
    index = entry.index
    record = index.get_run(latest.run_id) if index is not None else None
    status = record.status.value if record is not None else ""
    return [latest.checkpoint_id, latest.run_id, status]
