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
import logging
import threading
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import AbstractContextManager, contextmanager, nullcontext
from datetime import UTC, datetime
from typing import Any

from sqlalchemy import Engine, delete, select
from sqlalchemy.engine import URL
from sqlalchemy.exc import DBAPIError, IntegrityError
from sqlalchemy.pool import SingletonThreadPool, StaticPool

from langgraph_celery.checkpoint._conflicts import (
    Rule,
    constraint_name,
    is_uniqueness_violation,
    rule_of_collision,
)
from langgraph_celery.checkpoint._conflicts import message as conflict_message
from langgraph_celery.checkpoint._direct import DirectConnections, DirectStatement, compile_direct
from langgraph_celery.checkpoint._engines import (  # (SQLITE_BUSY_TIMEOUT: its old home)
    SQLITE_BUSY_TIMEOUT,  # noqa: F401
    create_saver_engine,
    is_sqlite_memory,
)
from langgraph_celery.checkpoint._migrations import migrate
from langgraph_celery.checkpoint._schema import (
    DEFAULT_TABLE_PREFIX,
    as_utc,
    build_tables,
    constraint_names,
    next_write_seq,
)
from langgraph_celery.checkpoint._statements import build_statements
from langgraph_celery.checkpoint.base import (
    BaseCheckpointSaver,
    Checkpoint,
    CheckpointView,
    PendingWrite,
    Timer,
    check_timer_thread,
)
from langgraph_celery.checkpoint.index import RunIndex
from langgraph_celery.errors import CheckpointConflictError
from langgraph_celery.serde import Serializer

__all__ = ["SqlSaver"]

log = logging.getLogger("langgraph_celery.checkpoint")


class SqlSaver(BaseCheckpointSaver, RunIndex):
    """Stores checkpoints in a SQL database through SQLAlchemy (SQLite or PostgreSQL).

    ``url_or_engine`` is a URL (``sqlite:///path.db``, ``postgresql://user@host/db``; a
    PostgreSQL URL without a driver uses psycopg 3) or an :class:`~sqlalchemy.Engine`, used as
    is.  ``table_prefix`` names the tables (``<prefix>checkpoints``, ``<prefix>writes``), so
    several savers can share one database.  Statements run on connections the saver opens
    through the engine and keeps (see :mod:`langgraph_celery.checkpoint._direct`).
    """

    shared_across_processes = True

    def __init__(
        self,
        url_or_engine: str | URL | Engine,
        serializer: Serializer | None = None,
        *,
        table_prefix: str = DEFAULT_TABLE_PREFIX,
    ) -> None:
        super().__init__(serializer)
        self._tables = build_tables(table_prefix)
        self._table_prefix = table_prefix
        if isinstance(url_or_engine, Engine):
            self._engine = url_or_engine
            self._owns_engine = False
        else:
            self._engine = create_saver_engine(url_or_engine)
            self._owns_engine = True
        self._autocommit_engine = self._engine.execution_options(isolation_level="AUTOCOMMIT")
        # An in-memory SQLite database is one connection shared by every thread: take turns,
        # through SQLAlchemy.  Any other database: statements run on the saver's own DBAPI
        # connections (see checkpoint/_direct.py).
        memory = is_sqlite_memory(self._engine.url)
        serial_lock = threading.RLock() if memory else None
        # (a pool of one shared connection, as for in-memory SQLite, cannot lend one away)
        shared = isinstance(self._engine.pool, StaticPool | SingletonThreadPool)
        self._direct = None if memory or shared else DirectConnections(self._engine)
        self._compiled: dict[tuple[int, tuple[str, ...]], DirectStatement] = {}
        self._serial: Callable[[], AbstractContextManager[Any]] = (
            nullcontext if serial_lock is None else (lambda: serial_lock)
        )
        self._setup_lock = threading.Lock()
        self._ready = False
        self._dialect = self._engine.dialect.name
        self._sql = build_statements(self._tables, self._dialect)
        names = constraint_names(table_prefix)
        self._rules = {
            names.checkpoint_id: Rule.CHECKPOINT_ID,
            names.step: Rule.STEP,
            names.root: Rule.ROOT,
        }
        self._write_key = names.write
        # (the one-first-checkpoint-per-thread index exists only where partial indexes do)
        self._roots_unique = self._dialect in ("postgresql", "sqlite")

    @property
    def engine(self) -> Engine:
        return self._engine

    @property
    def table_prefix(self) -> str:
        return self._table_prefix

    def __repr__(self) -> str:
        url = self._engine.url.render_as_string(hide_password=True)
        return f"SqlSaver({url!r}, table_prefix={self._table_prefix!r})"

    # -- lifecycle ---------------------------------------------------------------------------

    def setup(self) -> None:
        """Bring the tables to the latest schema version: create them, or apply the numbered
        migrations they lack (see :mod:`langgraph_celery.checkpoint._migrations`), each once,
        safely when several processes set up at once.  Idempotent; also done on first use.

        Raises :class:`~langgraph_celery.checkpoint.SchemaError` if the tables are newer than
        this code, or their data stops a migration (the message says what to fix).
        """
        if self._ready:
            return
        with self._setup_lock:
            if self._ready:
                return
            migrate(self._engine, self._table_prefix, self.serializer.loads, self._serial)
            self._ready = True

    def dispose(self) -> None:
        """Close the saver's idle connections, and the engine's pool if this saver created the
        engine.  The saver stays usable: it connects again when next called."""
        if self._direct is not None:
            self._direct.close()
        if self._owns_engine:
            self._engine.dispose()

    # -- checkpoints -------------------------------------------------------------------------

    def put(self, checkpoint: Checkpoint) -> Checkpoint:
        row = self._checkpoint_row(checkpoint)
        with self._conflicts(checkpoint):
            self._write(self._sql.put, row)
        return self._stored(checkpoint, row)

    def put_with_timer(self, checkpoint: Checkpoint, timer: Timer | None) -> Checkpoint:
        """One statement on PostgreSQL, one transaction on SQLite (see the base class)."""
        sql = self._sql
        if timer is not None:
            check_timer_thread(checkpoint, timer)
        if sql.upsert_timer is None:  # (a dialect without upsert: the calls in turn)
            return super().put_with_timer(checkpoint, timer)
        row = self._checkpoint_row(checkpoint)
        columns: dict[str, Any]
        if timer is None:
            combined = sql.put_clearing_timer
            columns = {"thread_id": checkpoint.thread_id, "run_id": checkpoint.run_id}
        else:
            combined = sql.put_arming_timer
            columns = {
                "thread_id": timer.thread_id,
                "run_id": timer.run_id,
                "graph_id": timer.graph_id,
                "kind": timer.kind,
                "due_at": as_utc(timer.due_at),
            }
        with self._conflicts(checkpoint):
            if combined is not None:
                self._write(combined, {**row, **{f"t_{k}": v for k, v in columns.items()}})
            elif timer is None:
                self._transaction([(sql.put, row), (sql.clear_timer, columns)])
            else:
                self._transaction([(sql.upsert_timer, columns), (sql.put, row)])
        return self._stored(checkpoint, row)

    def _checkpoint_row(self, checkpoint: Checkpoint) -> dict[str, Any]:
        return {
            "thread_id": checkpoint.thread_id,
            "checkpoint_id": checkpoint.checkpoint_id,
            "run_id": checkpoint.run_id,
            "step": checkpoint.step,
            "parent_id": checkpoint.parent_id,
            "created_at": as_utc(checkpoint.created_at),
            "body": self.dump_body(checkpoint),
            "kind": checkpoint.kind.value,
        }

    @staticmethod
    def _stored(checkpoint: Checkpoint, row: Mapping[str, Any]) -> Checkpoint:
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
                }
                stored = self._read(self._sql.colliding, params)
                rule = rule_of_collision(checkpoint, stored, roots_unique=self._roots_unique)
                if rule is None and unique is None:  # nothing collides: not a conflict
                    raise
            raise CheckpointConflictError(conflict_message(checkpoint, rule)) from exc

    def get(self, thread_id: str, checkpoint_id: str | None = None) -> Checkpoint | None:
        if checkpoint_id is None:
            rows = self._read(self._sql.latest, {"thread_id": thread_id})
        else:
            params = {"thread_id": thread_id, "checkpoint_id": checkpoint_id}
            rows = self._read(self._sql.by_id, params)
        return self._load(thread_id, rows[0]) if rows else None

    def list(self, thread_id: str) -> Sequence[Checkpoint]:
        rows = self._read(self._sql.history, {"thread_id": thread_id})
        return [self._load(thread_id, row) for row in rows]

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

    def release(self, thread_id: str) -> Sequence[Checkpoint]:
        checkpoints, writes = self._tables.checkpoints, self._tables.writes
        with self._begin() as conn:
            if self._engine.dialect.delete_returning:
                rows = conn.execute(
                    delete(checkpoints)
                    .where(checkpoints.c.thread_id == thread_id)
                    .returning(*self._checkpoint_columns())
                ).all()
            else:
                rows = conn.execute(
                    select(*self._checkpoint_columns()).where(checkpoints.c.thread_id == thread_id)
                ).all()
                if rows:
                    conn.execute(
                        delete(checkpoints).where(
                            checkpoints.c.thread_id == thread_id,
                            checkpoints.c.seq <= max(row.seq for row in rows),
                        )
                    )
            conn.execute(delete(writes).where(writes.c.thread_id == thread_id))
            timers = self._tables.timers
            conn.execute(delete(timers).where(timers.c.thread_id == thread_id))
        rows = sorted(rows, key=lambda row: row.seq, reverse=True)
        return [self._load(thread_id, row) for row in rows]

    # -- pending writes ----------------------------------------------------------------------

    def put_writes(
        self, thread_id: str, checkpoint_id: str, task_id: str, node: str, update: Mapping[str, Any]
    ) -> bool:
        values = {
            "thread_id": thread_id,
            "checkpoint_id": checkpoint_id,
            "task_id": task_id,
            "node": node,
            "seq": next_write_seq(),
            "body": self.serializer.dumps(dict(update)),
            "created_at": datetime.now(UTC),
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
            if name is None and not self._read(self._sql.write_of_task, values):
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
        if checkpoint_id is None:
            rows = self._read(self._sql.view_latest, {"thread_id": thread_id})
        else:
            params = {"thread_id": thread_id, "checkpoint_id": checkpoint_id}
            rows = self._read(self._sql.view_by_id, params)
        if not rows:
            return CheckpointView(None)
        checkpoint = self._load(thread_id, rows[0])
        own: dict[str, PendingWrite] = {}
        parent: dict[str, PendingWrite] = {}
        loads = self.serializer.loads
        for row in rows:
            if row.w_task_id is None:
                continue
            write = PendingWrite(
                task_id=row.w_task_id, node=row.w_node, update=dict(loads(row.w_body))
            )
            mine = row.w_checkpoint_id == checkpoint.checkpoint_id
            (own if mine else parent)[write.task_id] = write
        return CheckpointView(checkpoint, own, parent, bool(rows[0].w_committed))

    def get_writes(self, thread_id: str, checkpoint_id: str) -> Sequence[PendingWrite]:
        params = {"thread_id": thread_id, "checkpoint_id": checkpoint_id}
        rows = self._read(self._sql.writes_of, params)
        return [
            PendingWrite(
                task_id=row.task_id, node=row.node, update=dict(self.serializer.loads(row.body))
            )
            for row in rows
        ]

    # -- helpers -----------------------------------------------------------------------------

    @contextmanager
    def _begin(self) -> Iterator[Any]:
        self.setup()
        with self._serial(), self._engine.begin() as conn:
            yield conn

    def _execute(self, statement: Any, params: Mapping[str, Any]) -> Any:
        """Run one statement in autocommit (one round trip): its rows if it returns rows, else
        its row count."""
        self.setup()
        direct = self._direct
        if direct is not None:
            return direct.run(self._compile(statement, params), params)
        with self._serial(), self._autocommit_engine.connect() as conn:
            result = conn.execute(statement, params, execution_options={"preserve_rowcount": True})
            return result.all() if result.returns_rows else result.rowcount

    def _transaction(self, statements: Sequence[tuple[Any, Mapping[str, Any]]]) -> None:
        """Run ``statements`` (returning no rows) in one transaction."""
        self.setup()
        direct = self._direct
        if direct is None:
            with self._begin() as conn:
                for statement, params in statements:
                    conn.execute(statement, params)
            return
        direct.run_in_transaction(
            [(self._compile(statement, params), params) for statement, params in statements]
        )

    def _compile(self, statement: Any, params: Mapping[str, Any]) -> DirectStatement:
        key = (id(statement), tuple(params))
        compiled = self._compiled.get(key)
        if compiled is None:
            compiled = compile_direct(statement, self._engine, key[1])
            self._compiled[key] = compiled
        return compiled

    def _write(self, statement: Any, params: Mapping[str, Any]) -> int:
        """Run a statement that returns no rows; its row count."""
        return int(self._execute(statement, params))

    def _read(self, query: Any, params: Mapping[str, Any]) -> Sequence[Any]:
        """Run a read; once more on a new connection if the one used turned out dead (the
        server restarted or killed it), since a read is safe to repeat."""
        try:
            rows: Sequence[Any] = self._execute(query, params)
            return rows
        except DBAPIError as error:
            if not error.connection_invalidated:
                raise
        rows = self._execute(query, params)
        return rows

    def _checkpoint_columns(self) -> tuple[Any, ...]:
        c = self._tables.checkpoints.c
        return (c.seq, c.checkpoint_id, c.run_id, c.step, c.parent_id, c.created_at, c.body, c.kind)

    def _load(self, thread_id: str, row: Any) -> Checkpoint:
        return Checkpoint.from_body(
            self.serializer.loads(row.body),
            thread_id=thread_id,
            checkpoint_id=row.checkpoint_id,
            run_id=row.run_id,
            step=row.step,
            parent_id=row.parent_id,
            created_at=as_utc(row.created_at),
            kind=row.kind,
        )
