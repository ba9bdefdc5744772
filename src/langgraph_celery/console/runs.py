"""Reading runs for the console: the run index, and the marks on checkpoints (a thread's page is
:mod:`langgraph_celery.console.threads`'s).

A run's status comes from the run index (:class:`RunRecord`), which every executor keeps.  What
explains it, a parked run's interruption (node, reason, metadata and its deadline
``expires_at``) or a failed run's error, is read from the marks on the run's latest checkpoint
with :func:`langgraph_celery.worker.client.status_of`.  The in-process executor stores no marks:
for its runs the console knows the parked or failing node (from the record) but not the reason
or the error.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from langgraph_celery.checkpoint._records import as_utc
from langgraph_celery.checkpoint.base import BaseCheckpointSaver, Checkpoint, CheckpointView
from langgraph_celery.checkpoint.index import RunRecord, RunStatus, run_order
from langgraph_celery.console.catalog import Catalog, CatalogError, GraphEntry
from langgraph_celery.console.redact import redact
from langgraph_celery.graph._loop import run_node
from langgraph_celery.graph._marks import Failure, Parking
from langgraph_celery.worker.cancelling import run_in_history
from langgraph_celery.worker.client import status_of

__all__ = [
    "MAX_PAGE",
    "RunPage",
    "RunView",
    "explained",
    "find_run",
    "list_runs",
    "read_run",
    "run_view",
    "saver_of",
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
    #: the run's latest checkpoint, when it was read (pages show its state without reading it
    #: again)
    checkpoint: Checkpoint | None = field(default=None, repr=False, compare=False)
    #: whether that checkpoint is its thread's latest (only then can the run be resumed)
    on_top: bool = True

    @property
    def checkpoint_id(self) -> str | None:
        return self.checkpoint.checkpoint_id if self.checkpoint is not None else None

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
    def node(self) -> str | None:
        """The node to show the run at: where it parked or failed, else its record's."""
        if self.parking is not None:
            return self.parking.node_id
        if self.failure is not None:
            return self.failure.node_id
        return self.record.node

    @property
    def diagram_node(self) -> str | list[str] | None:
        """:attr:`node` as the diagram finds it: for a run parked inside a compiled subgraph,
        the path to it (its interruption's ``subgraph_path``), which tells apart the child's
        nodes from the parent's of the same id."""
        path = self.metadata.get("subgraph_path")
        if isinstance(path, list) and path and all(isinstance(part, str) for part in path):
            return path
        return self.node

    @property
    def place(self) -> str | None:
        """:attr:`node` as pages name it: inside a compiled subgraph, the path to it
        (``approval`` then ``review``, joined by a right-pointing angle quote)."""
        where = self.diagram_node
        return " \u203a ".join(where) if isinstance(where, list) else where

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


def saver_of(entry: GraphEntry) -> BaseCheckpointSaver:
    saver = entry.saver
    if saver is None:
        raise CatalogError(f"graph {entry.label} has no checkpoint saver: it keeps no runs")
    return saver


def run_view(entry: GraphEntry, record: RunRecord, detail: bool = True) -> RunView:
    """``record`` with what its latest checkpoint's marks say (unless not ``detail``: then
    only a running run's latest checkpoint is read, for where it is now)."""
    if not detail:
        if record.status is RunStatus.RUNNING:
            record = current(record, saver_of(entry).get(record.thread_id))
        return RunView(record, entry)
    saver = saver_of(entry)
    view = saver.get_with_writes(record.thread_id)
    latest = view.checkpoint
    if latest is None or latest.run_id == record.run_id:
        return explained(entry, record, view, on_top=True)
    mine = run_in_history(saver, record.thread_id, record.run_id, latest.checkpoint_id)
    if mine is not None:
        view = saver.get_with_writes(record.thread_id, mine.checkpoint_id)
    return explained(entry, record, view if mine is not None else CheckpointView(None), False)


def current(record: RunRecord, latest: Checkpoint | None) -> RunRecord:
    """A running ``record`` at its thread's ``latest`` checkpoint when that is its run's: the
    index writes a run's record only where it starts, parks, fails or ends (no statement a
    step), so the node a running run is at, and when it got there, are its latest step's."""
    if record.status is not RunStatus.RUNNING or latest is None or latest.run_id != record.run_id:
        return record
    node = run_node(record.status, None, latest) or record.node
    return dataclasses.replace(
        record, node=node, updated_at=max(record.updated_at, as_utc(latest.created_at))
    )


def explained(entry: GraphEntry, record: RunRecord, view: CheckpointView, on_top: bool) -> RunView:
    """``record`` with what ``view`` (of its latest checkpoint) says; ``on_top``: whether that
    is its thread's latest checkpoint."""
    checkpoint = view.checkpoint
    if checkpoint is None:
        return RunView(record, entry, on_top=on_top)
    status = status_of(view)
    parking, failure = status.parking, status.failure
    if on_top:
        record = current(record, checkpoint)
    if record.node is None:  # (a record written before the index kept a cancelled run's node)
        record = dataclasses.replace(record, node=run_node(record.status, None, checkpoint))
    if record.status is RunStatus.PARKED and parking is None:
        parking = Parking(record.node or "?")
    if record.status is not RunStatus.PARKED:
        parking = None
    if record.status is not RunStatus.FAILED:
        failure = None
    if failure is not None:  # errors quote URLs, with their passwords
        failure = Failure(failure.node_id, failure.error_type, redact(failure.message))
    return RunView(record, entry, parking, failure, checkpoint, on_top)


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
    return run_view(entry, record)


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
    views = [run_view(entry, record, detail) for entry, record in page]
    return RunPage(views, page[-1][1].run_id if more and page else None)
