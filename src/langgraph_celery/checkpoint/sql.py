"""A checkpoint saver on SQLAlchemy Core, for SQLite and PostgreSQL, safe with many processes.

Every call goes to the database (no cache of rows that could go stale when another process
writes); uniqueness is enforced by the database's constraints (see
:mod:`langgraph_celery.checkpoint._schema`), so two writers racing for the same step of a thread
end with one checkpoint and one :class:`CheckpointConflictError`.

Tables are created by :meth:`SqlSaver.setup` or on first use, never by the constructor, which
does not connect.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from typing import Any

from sqlalchemy import Engine, delete, select
from sqlalchemy.engine import URL
from sqlalchemy.exc import IntegrityError

from langgraph_celery.checkpoint._conflicts import (
    Rule,
    constraint_name,
    is_uniqueness_violation,
    rule_of_collision,
)
from langgraph_celery.checkpoint._conflicts import message as conflict_message
from langgraph_celery.checkpoint._delta import Chain
from langgraph_celery.checkpoint._engines import (  # (SQLITE_BUSY_TIMEOUT: its old home)
    SQLITE_BUSY_TIMEOUT,  # noqa: F401
)
from langgraph_celery.checkpoint._incremental import Encoded, Incremental
from langgraph_celery.checkpoint._records import as_utc
from langgraph_celery.checkpoint._rows import RowReader, reread_if_pruned
from langgraph_celery.checkpoint._schema import DEFAULT_TABLE_PREFIX, constraint_names
from langgraph_celery.checkpoint._sql_retention import SqlRetention
from langgraph_celery.checkpoint._sql_runs import SqlRuns, run_row
from langgraph_celery.checkpoint._sql_writes import SqlWrites
from langgraph_celery.checkpoint.base import (
    BaseCheckpointSaver,
    Checkpoint,
    PagedReads,
    Timer,
    check_run_of,
    check_timer_thread,
)
from langgraph_celery.checkpoint.index import RunIndex, RunRecord
from langgraph_celery.errors import CheckpointConflictError
from langgraph_celery.serde import Serializer

__all__ = ["SqlSaver"]


class SqlSaver(SqlWrites, SqlRuns, SqlRetention, PagedReads, BaseCheckpointSaver, RunIndex):
    """Stores checkpoints in a SQL database through SQLAlchemy (SQLite or PostgreSQL).

    ``url_or_engine`` is a URL (``sqlite:///path.db``, ``postgresql://user@host/db``; a
    PostgreSQL URL without a driver uses psycopg 3) or an :class:`~sqlalchemy.Engine`, used as
    is.  ``table_prefix`` names the tables (``<prefix>checkpoints``, ``<prefix>writes``,
    ``<prefix>timers``, ``<prefix>runs``, ``<prefix>schema_version``: see
    :mod:`langgraph_celery.checkpoint._schema`), so several savers can share one database.
    Statements run on connections the saver opens through the engine and keeps (see
    :mod:`langgraph_celery.checkpoint._direct`).  It is both halves of the saver contract: a
    :class:`BaseCheckpointSaver` and a :class:`RunIndex`.  Checkpoints, and deleting threads,
    are here; pending writes are :class:`~langgraph_celery.checkpoint._sql_writes.SqlWrites`'s,
    timers and run records :class:`~langgraph_celery.checkpoint._sql_runs.SqlRuns`'s, and what
    ``prune`` reads and removes
    :class:`~langgraph_celery.checkpoint._sql_retention.SqlRetention`'s (its bases).
    """

    shared_across_processes = True

    def __init__(
        self,
        url_or_engine: str | URL | Engine,
        serializer: Serializer | None = None,
        *,
        table_prefix: str = DEFAULT_TABLE_PREFIX,
    ) -> None:
        BaseCheckpointSaver.__init__(self, serializer)
        self._connect(url_or_engine, table_prefix)
        names = constraint_names(table_prefix)
        self._rules = {
            names.checkpoint_id: Rule.CHECKPOINT_ID,
            names.step: Rule.STEP,
            names.root: Rule.ROOT,
            names.successor: Rule.SUCCESSOR,
        }
        self._write_key = names.write
        # (the one-first-checkpoint-per-thread index exists only where partial indexes do)
        self._roots_unique = self._dialect in ("postgresql", "sqlite")
        self._incremental = Incremental(self.serializer, self.dump_body)
        self._rows = RowReader(self.serializer, self._incremental, self._read, self._sql)

    def __repr__(self) -> str:
        url = self._engine.url.render_as_string(hide_password=True)
        return f"SqlSaver({url!r}, table_prefix={self._table_prefix!r})"

    # -- checkpoints -------------------------------------------------------------------------

    def put(self, checkpoint: Checkpoint) -> Checkpoint:
        row, encoded = self._checkpoint_row(checkpoint)
        with self._conflicts(checkpoint):
            if not self._write(self._sql.put, row):  # (a delta of a parent pruned meanwhile)
                row, encoded = self._checkpoint_row(checkpoint, whole=True)
                self._write(self._sql.put, row)
        return self._stored(checkpoint, row, encoded)

    def put_with_timer(
        self, checkpoint: Checkpoint, timer: Timer | None, run: RunRecord | None = None
    ) -> Checkpoint:
        """One statement on PostgreSQL, one transaction on SQLite (see the base class)."""
        sql = self._sql
        if timer is not None:
            check_timer_thread(checkpoint, timer)
        if run is not None:
            check_run_of(checkpoint, run)
        if sql.upsert_timer is None or sql.upsert_run is None:  # (no upsert: calls in turn)
            return super().put_with_timer(checkpoint, timer, run)
        row, encoded = self._checkpoint_row(checkpoint)
        if not self._put_with(checkpoint, row, timer, run):
            # (a delta of a parent pruned meanwhile: the timer and record changes are made
            # again, as they were, with the whole row)
            row, encoded = self._checkpoint_row(checkpoint, whole=True)
            self._put_with(checkpoint, row, timer, run)
        return self._stored(checkpoint, row, encoded)

    def _put_with(
        self,
        checkpoint: Checkpoint,
        row: Mapping[str, Any],
        timer: Timer | None,
        run: RunRecord | None,
    ) -> bool:
        """Store ``row`` with the timer change and run record (see :meth:`put_with_timer`);
        whether it was stored (not: a delta whose parent is pruned)."""
        sql = self._sql
        columns: dict[str, Any]
        if timer is None:
            combined = sql.put_clearing_timer if run is None else sql.put_clearing_timer_recording
            columns = {"thread_id": checkpoint.thread_id, "run_id": checkpoint.run_id}
        else:
            combined = sql.put_arming_timer if run is None else sql.put_arming_timer_recording
            columns = {
                "thread_id": timer.thread_id,
                "run_id": timer.run_id,
                "graph_id": timer.graph_id,
                "kind": timer.kind,
                "due_at": as_utc(timer.due_at),
            }
        record = run_row(run) if run is not None else None
        with self._conflicts(checkpoint):
            if combined is not None:
                params = {**row, **{f"t_{k}": v for k, v in columns.items()}}
                if record is not None:
                    params.update({f"r_{k}": v for k, v in record.items()})
                return bool(self._write(combined, params))
            # the record first (as whoever sees the checkpoint finds it: one transaction)
            statements: list[tuple[Any, Mapping[str, Any]]] = []
            if record is not None:
                statements.append((sql.upsert_run, record))
            if timer is not None:
                statements.append((sql.upsert_timer, columns))
            put_at = len(statements)
            statements.append((sql.put, row))
            if timer is None:
                statements.append((sql.clear_timer, columns))
            return bool(self._transaction(statements)[put_at])

    def _checkpoint_row(
        self, checkpoint: Checkpoint, whole: bool = False
    ) -> tuple[dict[str, Any], Encoded]:
        """``checkpoint``'s row: a delta of its parent where it may be (see ``_delta.py``), or
        (and with ``whole``) its whole state."""
        thread_id = checkpoint.thread_id
        encoded = self._incremental.encode(
            checkpoint, lambda parent_id: self._chain(thread_id, parent_id), whole=whole
        )
        row = {
            "thread_id": thread_id,
            "checkpoint_id": checkpoint.checkpoint_id,
            "run_id": checkpoint.run_id,
            "step": checkpoint.step,
            "parent_id": checkpoint.parent_id,
            "created_at": as_utc(checkpoint.created_at),
            "body": encoded.text,
            "kind": checkpoint.kind.value,
            "base_id": encoded.chain.base_id,
            "budget": encoded.chain.budget,
            "depth": encoded.chain.depth,
            "successor_of": checkpoint.successor_of,
        }
        return row, encoded

    def _chain(self, thread_id: str, checkpoint_id: str) -> Chain | None:
        """A stored checkpoint's place in its chain (``None``: not stored, or pruned)."""
        params = {"thread_id": thread_id, "checkpoint_id": checkpoint_id}
        rows = self._read(self._sql.chain_of, params)
        return _chain_of(rows[0]) if rows else None

    def _stored(
        self, checkpoint: Checkpoint, row: Mapping[str, Any], encoded: Encoded
    ) -> Checkpoint:
        self._incremental.stored(checkpoint, encoded)
        created_at = row["created_at"]
        if created_at is checkpoint.created_at:
            return checkpoint
        return dataclasses.replace(checkpoint, created_at=created_at)

    @contextmanager
    def _conflicts(self, checkpoint: Checkpoint) -> Iterator[None]:
        """Report a refused insert of ``checkpoint`` as :class:`CheckpointConflictError`, naming
        the rule it broke: by the violated constraint's name where the database reports it,
        else by the stored row it collides with (see ``checkpoint/_conflicts.py``)."""
        try:
            yield
        except IntegrityError as exc:
            unique = is_uniqueness_violation(exc.orig)
            if unique is False:
                raise
            name = constraint_name(exc.orig)
            if name is not None:
                rule = self._rules.get(name)
                if rule is None:  # (a constraint that guards no checkpoint rule)
                    raise
            else:
                params = {
                    "thread_id": checkpoint.thread_id,
                    "checkpoint_id": checkpoint.checkpoint_id,
                    "run_id": checkpoint.run_id,
                    "step": checkpoint.step,
                    "successor_of": checkpoint.successor_of,
                }
                stored = self._read(self._sql.colliding, params)
                rule = rule_of_collision(checkpoint, stored, roots_unique=self._roots_unique)
                if rule is None and unique is None:  # nothing collides: not a conflict
                    raise
            raise CheckpointConflictError(conflict_message(checkpoint, rule)) from exc

    def get(self, thread_id: str, checkpoint_id: str | None = None) -> Checkpoint | None:
        return reread_if_pruned(lambda: self._get(thread_id, checkpoint_id))

    def _get(self, thread_id: str, checkpoint_id: str | None) -> Checkpoint | None:
        if checkpoint_id is None:
            rows = self._read(self._sql.latest, {"thread_id": thread_id})
        else:
            params = {"thread_id": thread_id, "checkpoint_id": checkpoint_id}
            rows = self._read(self._sql.by_id, params)
        return self._load(thread_id, rows[0]) if rows else None

    def list(self, thread_id: str) -> Sequence[Checkpoint]:
        def read() -> Sequence[Checkpoint]:
            rows = self._read(self._sql.history, {"thread_id": thread_id})
            return self._load_all(thread_id, rows)

        return reread_if_pruned(read)

    def _page(
        self, thread_id: str, limit: int, before: str | None, copy: bool
    ) -> Sequence[Checkpoint]:
        params: dict[str, Any] = {"thread_id": thread_id, "limit": max(limit, 0)}
        statement = self._sql.recent
        if before is not None:
            statement = self._sql.recent_before
            params["checkpoint_id"] = before

        def read() -> Sequence[Checkpoint]:
            return self._rows.load_all(thread_id, self._read(statement, params), copy)

        return reread_if_pruned(read)

    def release(self, thread_id: str) -> Sequence[Checkpoint]:
        checkpoints, writes = self._tables.checkpoints, self._tables.writes
        with self._begin() as conn:
            if self._engine.dialect.delete_returning:
                rows = conn.execute(
                    delete(checkpoints)
                    .where(checkpoints.c.thread_id == thread_id)
                    .returning(*self._checkpoint_columns(), checkpoints.c.pruned_at)
                ).all()
            else:
                rows = conn.execute(
                    select(*self._checkpoint_columns(), checkpoints.c.pruned_at).where(
                        checkpoints.c.thread_id == thread_id
                    )
                ).all()
                if rows:
                    conn.execute(
                        delete(checkpoints).where(
                            checkpoints.c.thread_id == thread_id,
                            checkpoints.c.seq <= max(row.seq for row in rows),
                        )
                    )
            conn.execute(delete(writes).where(writes.c.thread_id == thread_id))
            timers, runs = self._tables.timers, self._tables.runs
            conn.execute(delete(timers).where(timers.c.thread_id == thread_id))
            conn.execute(delete(runs).where(runs.c.thread_id == thread_id))
            children = self._child_threads(conn, thread_id)
            for child in children:  # (they go with it)
                for sql in self._sql.delete_thread:
                    conn.execute(sql, {"thread_id": child})
        rows = sorted(rows, key=lambda row: row.seq, reverse=True)
        released = self._load_all(thread_id, [row for row in rows if row.pruned_at is None])
        for thread in [thread_id, *children]:
            self._incremental.forget(thread)  # (what reading them cached)
        return released

    # -- retention (what prune reads and removes is SqlRetention's) ----------------------------

    def delete_thread(self, thread_id: str) -> int:
        """One transaction, with the child threads; reads no checkpoint (see the base
        class)."""
        deleted = 0
        with self._begin() as conn:
            threads = [thread_id, *self._child_threads(conn, thread_id)]
            for thread in threads:
                params = {"thread_id": thread}
                counts = [conn.execute(sql, params).rowcount for sql in self._sql.delete_thread]
                deleted += int(counts[1])
        for thread in threads:
            self._incremental.forget(thread)
        return deleted

    def make_whole(self, thread_id: str, checkpoint_ids: Sequence[str]) -> None:
        """One statement a checkpoint; the deltas after it still name their old base (a read
        finds the rest of their chain one row at a time)."""
        for checkpoint_id in checkpoint_ids:
            checkpoint = self.get(thread_id, checkpoint_id)
            if checkpoint is None:
                continue
            text = self.dump_body(checkpoint)
            chain = Chain.whole(len(text))
            params = {
                "b_thread_id": thread_id,
                "b_checkpoint_id": checkpoint_id,
                "body": text,
                "budget": chain.budget,
                "depth": chain.depth,
            }
            self._write(self._sql.make_whole, params)
            self._incremental.forget(thread_id, [checkpoint_id])

    # -- helpers -----------------------------------------------------------------------------

    def _checkpoint_columns(self) -> tuple[Any, ...]:
        c = self._tables.checkpoints.c
        return (
            *(c.seq, c.checkpoint_id, c.run_id, c.step, c.parent_id, c.created_at, c.body, c.kind),
            *(c.base_id, c.budget, c.depth),
        )

    def _load_all(self, thread_id: str, rows: Sequence[Any]) -> Sequence[Checkpoint]:
        return self._rows.load_all(thread_id, rows)

    def _load(self, thread_id: str, row: Any) -> Checkpoint:
        return self._rows.load(thread_id, row)


def _chain_of(row: Any) -> Chain | None:
    if row.budget is None:  # (a row a release before migration 9 stored during an upgrade)
        return None
    return Chain(row.base_id, int(row.budget), int(row.depth or 0))
