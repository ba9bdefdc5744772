"""What :meth:`~langgraph_celery.checkpoint.base.BaseCheckpointSaver.prune` reads and removes
through :class:`~langgraph_celery.checkpoint.sql.SqlSaver`: the thread's stored checkpoints as
ids (``stored_refs``), its child threads, and the removal of checkpoints (their state and
writes; their ids stay taken).

:class:`SqlRetention` is a base of ``SqlSaver``, on ``_database.SqlDatabase`` (the statements
are in :mod:`langgraph_celery.checkpoint._statements`).  Deleting and releasing whole threads
stay in ``sql.py`` (``BaseCheckpointSaver.__init_subclass__`` makes the ``delete_thread`` and
``release`` a saver class defines itself check the thread id), as does storing a delta whole
(``make_whole``, which reads the checkpoint).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from datetime import UTC, datetime
from typing import Any

from langgraph_celery.checkpoint._database import SqlDatabase
from langgraph_celery.checkpoint._incremental import Incremental
from langgraph_celery.checkpoint._retention import (
    Removal,
    StoredRef,
    child_prefix,
    is_child_of,
    read_through,
)

__all__ = ["SqlRetention"]

#: Checkpoint ids per statement when pruning (well under every database's bound parameters).
_ID_BATCH = 500


class SqlRetention(SqlDatabase):
    """Pruning in SQL (a base of ``SqlSaver``, before ``BaseCheckpointSaver``: its methods take
    the place of the base class's)."""

    #: set by ``SqlSaver``: what reading checkpoints cached, forgotten as they are removed
    _incremental: Incremental

    def _children_of(self, thread_id: str) -> Sequence[str]:
        with self._engine.connect() as conn:
            return self._child_threads(conn, thread_id)

    def _child_threads(self, conn: Any, thread_id: str) -> Sequence[str]:
        """The ids of ``thread_id``'s child threads (exactly: SQLite's LIKE ignores case)."""
        rows = conn.execute(self._sql.child_threads, {"pattern": child_prefix(thread_id)})
        return sorted(row.thread_id for row in rows if is_child_of(row.thread_id, thread_id))

    def stored_refs(self, thread_id: str) -> Sequence[StoredRef]:
        return _refs(self._read(self._sql.refs, {"thread_id": thread_id}))

    def remove_checkpoints(self, thread_id: str, checkpoint_ids: Sequence[str]) -> int:
        return len(self._remove_unneeded(thread_id, checkpoint_ids).removed)

    def _remove_unneeded(self, thread_id: str, checkpoint_ids: Sequence[str]) -> Removal:
        """One transaction, a batch of ids per statement.  It locks the rows it removes (on
        SQLite, the database) before it reads what is read from them: a delta stored after
        prune's plan either committed before (it is read, its chain left) or is stored after
        (whole: its insert finds the parent pruned; see ``_checkpoint_insert`` in
        ``_statements.py``)."""
        sql, now = self._sql, datetime.now(UTC)
        ids = list(dict.fromkeys(checkpoint_ids))
        batches = [ids[start : start + _ID_BATCH] for start in range(0, len(ids), _ID_BATCH)]
        with self._locking() as conn:
            if self._dialect != "sqlite":  # (SQLite's transaction holds the database)
                for batch in batches:
                    conn.execute(sql.lock_live, {"thread_id": thread_id, "ids": batch})
            refs = _refs(conn.execute(sql.refs, {"thread_id": thread_id}))
            live = {ref.checkpoint_id for ref in refs}
            left = read_through(refs, [c for c in ids if c in live])
            removed = [c for c in ids if c in live and c not in left]
            for start in range(0, len(removed), _ID_BATCH):
                batch = removed[start : start + _ID_BATCH]
                conn.execute(sql.prune, {"b_thread_id": thread_id, "ids": batch, "now": now})
            gone = [c for c in ids if c not in left]  # (and writes left to pruned ones)
            for start in range(0, len(gone), _ID_BATCH):
                batch = gone[start : start + _ID_BATCH]
                conn.execute(sql.prune_writes, {"thread_id": thread_id, "ids": batch})
        self._incremental.forget(thread_id, removed)
        return Removal(frozenset(removed), left)


def _refs(rows: Iterable[Any]) -> list[StoredRef]:
    """Rows of ``refs`` as pruning sees them."""
    return [
        StoredRef(row.checkpoint_id, row.run_id, row.parent_id, whole=row.base_id is None)
        for row in rows
    ]
