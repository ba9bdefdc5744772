"""The pending writes of :class:`~langgraph_celery.checkpoint.sql.SqlSaver`: node updates,
markers and claims recorded at a checkpoint, and a checkpoint read with its writes in one
statement.

:class:`SqlWrites` is a base of ``SqlSaver``, on ``_database.SqlDatabase`` (the statements are
in :mod:`langgraph_celery.checkpoint._statements`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import UTC, datetime
from typing import Any

from sqlalchemy.exc import IntegrityError

from langgraph_celery.checkpoint._conflicts import constraint_name, is_uniqueness_violation
from langgraph_celery.checkpoint._database import SqlDatabase
from langgraph_celery.checkpoint._rows import RowReader, reread_if_pruned
from langgraph_celery.checkpoint._schema import next_write_seq
from langgraph_celery.checkpoint.base import CheckpointView, PendingWrite, WriteKind

__all__ = ["SqlWrites"]


class SqlWrites(SqlDatabase):
    """Pending writes in SQL (a base of ``SqlSaver``, before ``BaseCheckpointSaver``)."""

    #: set by ``SqlSaver``: the name of the writes' primary key, and how rows are read
    _write_key: str
    _rows: RowReader

    def put_writes(
        self,
        thread_id: str,
        checkpoint_id: str,
        task_id: str,
        node: str,
        update: Mapping[str, Any],
        kind: WriteKind = WriteKind.UPDATE,
    ) -> bool:
        values = {
            "thread_id": thread_id,
            "checkpoint_id": checkpoint_id,
            "task_id": task_id,
            "node": node,
            "seq": next_write_seq(),
            "body": self.serializer.dumps(dict(update)),
            "created_at": datetime.now(UTC),
            "kind": WriteKind(kind).value,
        }
        ignoring = self._sql.put_write_ignoring
        if ignoring is not None:
            # the row count is 0 when the key was there already (the statement did nothing)
            return self._write(ignoring, values) == 1
        try:
            self._write(self._sql.put_write, values)
        except IntegrityError as exc:
            # (a database without INSERT ... ON CONFLICT: refused by the primary key, known by
            # its name or, where the driver does not report it, by the write found there)
            if is_uniqueness_violation(exc.orig) is False:
                raise
            name = constraint_name(exc.orig)
            if name is not None and name != self._write_key:
                raise
            if name is None:
                key = {"thread_id": thread_id, "checkpoint_id": checkpoint_id, "task_id": task_id}
                if not self._read(self._sql.write_of_task, key):
                    raise
            return False
        return True

    def delete_write(self, thread_id: str, checkpoint_id: str, task_id: str, node: str) -> bool:
        params = {
            "thread_id": thread_id,
            "checkpoint_id": checkpoint_id,
            "task_id": task_id,
            "node": node,
        }
        return self._write(self._sql.delete_write, params) == 1

    def get_with_writes(self, thread_id: str, checkpoint_id: str | None = None) -> CheckpointView:
        """One statement: the checkpoint joined with its writes and its parent's markers."""
        return self._view(thread_id, checkpoint_id, copy=True)

    def _shared_view(self, thread_id: str, checkpoint_id: str) -> CheckpointView:
        return self._view(thread_id, checkpoint_id, copy=False)

    def _view(self, thread_id: str, checkpoint_id: str | None, copy: bool) -> CheckpointView:
        return reread_if_pruned(lambda: self._view_once(thread_id, checkpoint_id, copy))

    def _view_once(self, thread_id: str, checkpoint_id: str | None, copy: bool) -> CheckpointView:
        if checkpoint_id is None:
            rows = self._read(self._sql.view_latest, {"thread_id": thread_id})
        else:
            params = {"thread_id": thread_id, "checkpoint_id": checkpoint_id}
            rows = self._read(self._sql.view_by_id, params)
        if not rows:
            return CheckpointView(None)
        checkpoint = self._rows.load(thread_id, rows[0], copy=copy)
        own: dict[str, PendingWrite] = {}
        parent: dict[str, PendingWrite] = {}
        loads = self.serializer.loads
        for row in rows:
            if row.w_task_id is None:
                continue
            write = PendingWrite(
                row.w_task_id, row.w_node, dict(loads(row.w_body)), _kind(row.w_kind)
            )
            mine = row.w_checkpoint_id == checkpoint.checkpoint_id
            (own if mine else parent)[write.task_id] = write
        return CheckpointView(checkpoint, own, parent, bool(rows[0].w_committed))

    def get_writes(self, thread_id: str, checkpoint_id: str) -> Sequence[PendingWrite]:
        params = {"thread_id": thread_id, "checkpoint_id": checkpoint_id}
        rows = self._read(self._sql.writes_of, params)
        return [
            PendingWrite(
                row.task_id, row.node, dict(self.serializer.loads(row.body)), _kind(row.kind)
            )
            for row in rows
        ]


_KINDS = {kind.value: kind for kind in WriteKind}


def _kind(word: str | None) -> WriteKind:
    """A stored write's kind (a row written by a process of the release before migration 8,
    during an upgrade, has the column's default)."""
    return _KINDS.get(word or "update", WriteKind.UPDATE)
