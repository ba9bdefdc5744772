"""The run-index half of :class:`~langgraph_celery.checkpoint.sql.SqlSaver` (its
:class:`~langgraph_celery.checkpoint.index.RunIndex` methods): the threads' timers, the runs'
records, and the completed runs the reaper's ``checkpoint_ttl`` pass reads.

:class:`SqlRuns` is a base of ``SqlSaver``, on ``_database.SqlDatabase`` (the statements are
in :mod:`langgraph_celery.checkpoint._statements`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import Any

from sqlalchemy.exc import IntegrityError

from langgraph_celery.checkpoint._conflicts import is_uniqueness_violation
from langgraph_celery.checkpoint._database import SqlDatabase
from langgraph_celery.checkpoint._records import as_utc
from langgraph_celery.checkpoint.base import Timer
from langgraph_celery.checkpoint.index import RunRecord, RunStatus, check_page, check_run_owner

__all__ = ["SqlRuns", "run_row"]


class SqlRuns(SqlDatabase):
    """Timers and run records in SQL (a base of ``SqlSaver``, before ``BaseCheckpointSaver``:
    its methods take the place of the base class's placeholders)."""

    # -- timers ------------------------------------------------------------------------------

    def set_timer(
        self, thread_id: str, run_id: str, graph_id: str, kind: str, due_at: datetime
    ) -> None:
        values = {"run_id": run_id, "graph_id": graph_id, "kind": kind, "due_at": as_utc(due_at)}
        sql = self._sql
        if sql.upsert_timer is not None:
            self._write(sql.upsert_timer, {"thread_id": thread_id, **values})
        elif not self._write(sql.update_timer, {"b_thread_id": thread_id, **values}):
            self._write(sql.insert_timer, {"thread_id": thread_id, **values})

    def clear_timer(self, thread_id: str, run_id: str, due_at: datetime | None = None) -> None:
        params: dict[str, Any] = {"thread_id": thread_id, "run_id": run_id}
        statement = self._sql.clear_timer
        if due_at is not None:
            params["due_at"] = as_utc(due_at)
            statement = self._sql.clear_timer_at
        self._write(statement, params)

    def due_timers(self, now: datetime, limit: int = 100) -> Sequence[Timer]:
        rows = self._read(self._sql.due_timers, {"now": as_utc(now), "limit": limit})
        return [Timer(r.thread_id, r.run_id, r.graph_id, r.kind, as_utc(r.due_at)) for r in rows]

    def thread_of_run(self, run_id: str) -> str | None:
        rows = self._read(self._sql.thread_of_run, {"run_id": run_id})
        return str(rows[0].thread_id) if rows else None

    # -- run records -------------------------------------------------------------------------

    def upsert_run(self, record: RunRecord) -> bool:
        row = run_row(record)
        upsert = self._sql.upsert_run
        if upsert is not None:
            # (row count 0: the stored record is newer, or of another thread or graph)
            changed = self._write(upsert, row) == 1
        else:
            changed = self._upsert_run_in_turn(row)
        if changed:
            return True
        held = self.get_run(record.run_id)
        if held is not None:
            check_run_owner(held, record)
        return False

    def _upsert_run_in_turn(self, row: Mapping[str, Any]) -> bool:
        """A database without upsert: update, else insert, else (inserted meanwhile) update."""
        update = {f"b_{name}": value for name, value in row.items() if name != "created_at"}
        if self._write(self._sql.update_run, update) == 1:
            return True
        try:
            self._write(self._sql.insert_run, row)
        except IntegrityError as exc:
            if is_uniqueness_violation(exc.orig) is False:
                raise
            return self._write(self._sql.update_run, update) == 1
        return True

    def get_run(self, run_id: str) -> RunRecord | None:
        rows = self._read(self._sql.run_by_id, {"run_id": run_id})
        return _run_record(rows[0]) if rows else None

    def list_runs(
        self,
        graph_id: str | None = None,
        status: RunStatus | None = None,
        *,
        limit: int = 50,
        before: RunRecord | None = None,
    ) -> Sequence[RunRecord]:
        check_page(limit)
        params: dict[str, Any] = {"limit": limit}
        if graph_id is not None:
            params["graph_id"] = graph_id
        if status is not None:
            params["status"] = RunStatus(status)
        if before is not None:
            params["b_created_at"] = as_utc(before.created_at)
            params["b_run_id"] = before.run_id
        query = self._sql.runs_page[(graph_id is not None, status is not None, before is not None)]
        return [_run_record(row) for row in self._read(query, params)]

    # -- completed threads (the reaper's checkpoint_ttl pass) --------------------------------

    def _recorded_completed(self, thread_id: str) -> frozenset[str]:
        params = {"thread_id": thread_id, "completed": RunStatus.COMPLETED}
        return frozenset(row.run_id for row in self._read(self._sql.completed_of_thread, params))

    def completed_runs(
        self, graph_id: str, before: datetime, *, limit: int = 100
    ) -> Sequence[RunRecord]:
        """One read (and one update setting aside the runs a newer run of their thread
        superseded), on ``<prefix>runs_expiry_ix``."""
        check_page(limit)
        params = {
            "graph_id": graph_id,
            "completed": RunStatus.COMPLETED,
            "before": as_utc(before),
            "limit": limit,
        }
        rows = self._read(self._sql.completed_runs, params)
        superseded = [row.run_id for row in rows if row.newer]
        if superseded:
            with self._begin() as conn:
                conn.execute(self._sql.supersede_runs, {"ids": superseded})
        return [_run_record(row) for row in rows if not row.newer]

    def supersede_run(self, record: RunRecord) -> bool:
        params = {"b_run_id": record.run_id, "b_updated_at": as_utc(record.updated_at)}
        return self._write(self._sql.supersede_run, params) == 1


def _run_record(row: Any) -> RunRecord:
    return RunRecord(
        run_id=row.run_id,
        thread_id=row.thread_id,
        graph_id=row.graph_id,
        status=RunStatus(row.status),
        node=row.node,
        created_at=as_utc(row.created_at),
        updated_at=as_utc(row.updated_at),
    )


def run_row(record: RunRecord) -> dict[str, Any]:
    """A run's record as the columns of its row."""
    return {
        "run_id": record.run_id,
        "thread_id": record.thread_id,
        "graph_id": record.graph_id,
        "status": record.status,
        "node": record.node,
        "created_at": as_utc(record.created_at),
        "updated_at": as_utc(record.updated_at),
    }
