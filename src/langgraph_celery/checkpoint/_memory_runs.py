"""The run-index half of :class:`~langgraph_celery.checkpoint.memory.MemorySaver` (its
:class:`~langgraph_celery.checkpoint.index.RunIndex` methods): the threads' timers, the runs'
records, and the completed runs the reaper's ``checkpoint_ttl`` pass reads.

:class:`MemoryRuns` is a base of ``MemorySaver``, which holds the state it reads (as
``_sql_runs.SqlRuns`` is of ``SqlSaver``).
"""

from __future__ import annotations

import dataclasses
import threading
from collections.abc import Sequence
from datetime import datetime

from langgraph_celery.checkpoint._records import as_utc
from langgraph_celery.checkpoint.base import Timer
from langgraph_celery.checkpoint.index import (
    RunRecord,
    RunStatus,
    check_page,
    check_run_owner,
    run_order,
)

__all__ = ["MemoryRuns"]


class MemoryRuns:
    """Timers and run records in memory (a base of ``MemorySaver``, before
    ``BaseCheckpointSaver``: its methods take the place of the base class's placeholders)."""

    #: set by ``MemorySaver``: the lock every call holds, and what it reads
    _lock: threading.Lock
    _runs: dict[str, str]  # run_id -> thread_id
    _timers: dict[str, Timer]  # thread_id -> its timer
    _run_records: dict[str, RunRecord]  # run_id -> its record
    _superseded: set[str]  # run ids completed_runs leaves out

    # -- timers ------------------------------------------------------------------------------

    def set_timer(
        self, thread_id: str, run_id: str, graph_id: str, kind: str, due_at: datetime
    ) -> None:
        with self._lock:
            self._timers[thread_id] = Timer(thread_id, run_id, graph_id, kind, as_utc(due_at))

    def clear_timer(self, thread_id: str, run_id: str, due_at: datetime | None = None) -> None:
        with self._lock:
            timer = self._timers.get(thread_id)
            if timer is None or timer.run_id != run_id:
                return
            if due_at is None or timer.due_at == as_utc(due_at):
                del self._timers[thread_id]

    def due_timers(self, now: datetime, limit: int = 100) -> Sequence[Timer]:
        now = as_utc(now)
        with self._lock:
            due = [timer for timer in self._timers.values() if timer.due_at <= now]
        return sorted(due, key=lambda timer: timer.due_at)[:limit]

    def thread_of_run(self, run_id: str) -> str | None:
        with self._lock:
            return self._runs.get(run_id)

    # -- run records -------------------------------------------------------------------------

    def upsert_run(self, record: RunRecord) -> bool:
        with self._lock:
            stored = self._run_record_to_store(record)
            if stored is None:
                return False
            self._run_records[stored.run_id] = stored
            self._superseded.discard(stored.run_id)
            return True

    def _run_record_to_store(self, record: RunRecord) -> RunRecord | None:
        """``record`` as :meth:`upsert_run` stores it (``None``: the stored one is newer);
        ``ValueError`` if it is of another thread or graph.  Called holding the lock."""
        record = dataclasses.replace(
            record, created_at=as_utc(record.created_at), updated_at=as_utc(record.updated_at)
        )
        held = self._run_records.get(record.run_id)
        if held is None:
            return record
        check_run_owner(held, record)
        if held.updated_at > record.updated_at:
            return None
        return dataclasses.replace(record, created_at=held.created_at)

    def get_run(self, run_id: str) -> RunRecord | None:
        with self._lock:
            return self._run_records.get(run_id)

    def list_runs(
        self,
        graph_id: str | None = None,
        status: RunStatus | None = None,
        *,
        limit: int = 50,
        before: RunRecord | None = None,
    ) -> Sequence[RunRecord]:
        check_page(limit)
        with self._lock:
            found = [
                record
                for record in self._run_records.values()
                if (graph_id is None or record.graph_id == graph_id)
                and (status is None or record.status == status)
            ]
        if before is not None:
            after = run_order(dataclasses.replace(before, created_at=as_utc(before.created_at)))
            found = [record for record in found if run_order(record) < after]
        return sorted(found, key=run_order, reverse=True)[:limit]

    # -- retention ---------------------------------------------------------------------------

    def _recorded_completed(self, thread_id: str) -> frozenset[str]:
        with self._lock:
            return frozenset(
                r.run_id
                for r in self._run_records.values()
                if r.thread_id == thread_id and r.status is RunStatus.COMPLETED
            )

    def completed_runs(
        self, graph_id: str, before: datetime, *, limit: int = 100
    ) -> Sequence[RunRecord]:
        check_page(limit)
        before = as_utc(before)
        with self._lock:
            records = [r for r in self._run_records.values() if r.run_id not in self._superseded]
            newest: dict[str, RunRecord] = {}
            for record in self._run_records.values():
                held = newest.get(record.thread_id)
                if held is None or run_order(record) > run_order(held):
                    newest[record.thread_id] = record
            found = []
            for record in records:
                if (
                    record.graph_id != graph_id
                    or record.status is not RunStatus.COMPLETED
                    or record.updated_at >= before
                ):
                    continue
                if newest[record.thread_id] is not record:
                    self._superseded.add(record.run_id)
                    continue
                found.append(record)
        found.sort(key=lambda record: (record.updated_at, record.run_id))
        return found[:limit]

    def supersede_run(self, record: RunRecord) -> bool:
        with self._lock:
            held = self._run_records.get(record.run_id)
            if held is None or held.updated_at != as_utc(record.updated_at):
                return False
            self._superseded.add(record.run_id)
            return True
