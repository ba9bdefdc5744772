"""How :class:`~langgraph_celery.checkpoint.sql.SqlSaver` reaches its database: the engine, the
connections it keeps, setting the tables up, and running one statement (or a transaction).

:class:`SqlDatabase` is a base of ``SqlSaver``; what the saver stores is in ``sql.py``
(checkpoints), ``_sql_writes.py`` (pending writes), ``_sql_runs.py`` (timers, runs) and
``_sql_retention.py`` (pruning).  Every statement goes through :meth:`SqlDatabase._execute` (one
statement in autocommit, one round trip; the bench counts them there): on the saver's own DBAPI
connections (:mod:`langgraph_celery.checkpoint._direct`), or through SQLAlchemy for an in-memory
SQLite database (one connection that threads take turns on).
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import AbstractContextManager, contextmanager, nullcontext, suppress
from typing import Any

from sqlalchemy import Engine, inspect
from sqlalchemy.engine import URL
from sqlalchemy.exc import DBAPIError
from sqlalchemy.pool import SingletonThreadPool, StaticPool

from langgraph_celery.checkpoint._direct import DirectConnections, DirectStatement, compile_direct
from langgraph_celery.checkpoint._engines import create_saver_engine, is_sqlite_memory
from langgraph_celery.checkpoint._migrations import migrate
from langgraph_celery.checkpoint._schema import build_tables
from langgraph_celery.checkpoint._statements import build_statements
from langgraph_celery.serde import Serializer

__all__ = ["SqlDatabase"]


class SqlDatabase:
    """The database side of a SQL saver (a base class: ``SqlSaver`` calls :meth:`_connect`)."""

    serializer: Serializer

    def _connect(self, url_or_engine: str | URL | Engine, table_prefix: str) -> None:
        """Describe the tables and prepare the engine; connects to nothing."""
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

    @property
    def engine(self) -> Engine:
        return self._engine

    @property
    def table_prefix(self) -> str:
        return self._table_prefix

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

    def _holds_tables(self) -> bool:
        """Whether the database has this saver's tables (set up here or by any process),
        checked without creating them: the command line's reads read nothing where it has
        none."""
        if self._ready:
            return True
        with self._serial(), self._engine.connect() as conn:
            return inspect(conn).has_table(self._tables.checkpoints.name)

    def dispose(self) -> None:
        """Close the saver's idle connections, and the engine's pool if this saver created the
        engine.  The saver stays usable: it connects again when next called."""
        if self._direct is not None:
            self._direct.close()
        if self._owns_engine:
            self._engine.dispose()

    # -- running statements ------------------------------------------------------------------

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

    @contextmanager
    def _locking(self) -> Iterator[Any]:
        """A transaction (a SQLAlchemy connection) that writes after what it reads, with no
        other writer's commit between: SQLite's starts with the database's write lock (``BEGIN
        IMMEDIATE``); PostgreSQL's is ``READ COMMITTED``, each statement reading what was
        committed when it starts, so it locks the rows it writes first, then reads."""
        self.setup()
        begin = {
            "sqlite": "BEGIN IMMEDIATE",
            "postgresql": "BEGIN ISOLATION LEVEL READ COMMITTED",
        }.get(self._dialect, "BEGIN")
        with self._serial(), self._autocommit_engine.connect() as conn:
            conn.exec_driver_sql(begin)
            try:
                yield conn
            except BaseException:
                with suppress(Exception):  # (a dead connection rolled back already)
                    conn.exec_driver_sql("ROLLBACK")
                raise
            conn.exec_driver_sql("COMMIT")

    def _transaction(self, statements: Sequence[tuple[Any, Mapping[str, Any]]]) -> list[int]:
        """Run ``statements`` (returning no rows) in one transaction; their row counts."""
        self.setup()
        direct = self._direct
        if direct is None:
            counted = {"preserve_rowcount": True}
            with self._begin() as conn:
                return [
                    int(conn.execute(statement, params, execution_options=counted).rowcount)
                    for statement, params in statements
                ]
        return direct.run_in_transaction(
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
