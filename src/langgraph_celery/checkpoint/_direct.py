"""Running a saver's statements on DBAPI connections it keeps, outside SQLAlchemy's execution.

Every saver call is one statement in autocommit, and a node task makes two per step.  Going
through a SQLAlchemy ``Connection`` (execution context, events, result proxy) cost about four
times the CPU of the statement itself on a loopback PostgreSQL (measured: 460 us against 110 us
per read).  So the saver compiles each statement once with the engine's dialect and runs it on
an autocommit DBAPI connection of its own.  Only public SQLAlchemy is used:

* connections come from a pool of the saver's own, :meth:`Pool.recreate() <sqlalchemy.pool.Pool.
  recreate>` of the engine's pool: the same class, size, overflow, timeout, creator and
  ``connect`` listeners, so they never hold one of the engine's slots and are at most as many
  per process as the engine allows (an engine whose pool is not a ``QueuePool``, such as
  ``NullPool``: at most :data:`MAX_OPEN`, :data:`KEEP_IDLE` kept open); a call waits up to the
  pool's timeout for one, as with the engine;
* a connection stays checked out of that pool between calls, idle in a free list (at most
  :data:`KEEP_IDLE`), so a call costs a list pop and push rather than a pool check-out and a
  reset; a call takes one, or checks one out when none is free, so threads never share one; one
  given back while another call waits on the pool goes back to the pool, to that call;
* a failure to connect is raised as SQLAlchemy's exception, as SQLAlchemy's ``Connection`` does;
* a disconnect (the server restarted, a backend was terminated) closes every idle connection,
  since they are likely dead too, and those the pool holds are replaced when next checked out
  (a ``checkout`` listener), as SQLAlchemy's own invalidation does; it is raised as SQLAlchemy's
  exception with ``connection_invalidated`` set, so callers handle one kind of error;
* a forked child never touches its parent's connections (their sockets are shared): it keeps
  them and their pool referenced, unused, and opens its own through a new pool.

Bind and result processors of the column types are applied as SQLAlchemy would (SQLite stores
timestamps as text); PostgreSQL with psycopg needs none.
"""

from __future__ import annotations

import contextlib
import os
import threading
from collections import namedtuple
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

from sqlalchemy import Engine, event
from sqlalchemy import exc as sa_exc
from sqlalchemy.pool import ConnectionPoolEntry, PoolProxiedConnection, QueuePool

__all__ = ["KEEP_IDLE", "MAX_OPEN", "DirectConnections", "DirectStatement", "compile_direct"]

#: Idle connections a saver keeps per process in its free list; more go back to its pool.
KEEP_IDLE = 8
#: Connections open at once per saver and process, when the engine's pool sets no such bound.
MAX_OPEN = 16
#: Seconds a call waits for a connection, when the engine's pool sets no such timeout.
WAIT = 30.0

#: Connections (and pools) of a parent process, seen by a forked child: kept alive here, never
#: used or closed (closing would end the parent's sessions on the shared sockets).
_INHERITED: list[Any] = []

#: Key of a connection's ``info``: the saver's epoch when it was opened (see ``_on_connect``).
_EPOCH = "langgraph_celery.epoch"


@dataclass(frozen=True)
class DirectStatement:
    """A statement compiled once for one dialect and one set of parameter names."""

    sql: str
    #: Parameter names in the order a positional paramstyle wants them (``None``: by name).
    positions: tuple[str, ...] | None
    #: Values the statement fixes itself (literals SQLAlchemy turned into parameters).
    fixed: Mapping[str, Any]
    bind_processors: Mapping[str, Callable[[Any], Any]]
    #: The row type of a statement that returns rows (``None``: it returns none).
    row: Any
    result_processors: tuple[Callable[[Any], Any] | None, ...]

    def parameters(self, params: Mapping[str, Any]) -> Any:
        values = {**self.fixed, **params} if self.fixed else dict(params)
        for name, process in self.bind_processors.items():
            if name in values:
                values[name] = process(values[name])
        if self.positions is None:
            return values
        return tuple(values[name] for name in self.positions)

    def rows(self, fetched: Sequence[Sequence[Any]]) -> list[Any]:
        make = self.row._make
        processors = self.result_processors
        if not any(processors):
            return [make(row) for row in fetched]
        return [
            make(
                value if process is None else process(value)
                for process, value in zip(processors, row, strict=True)
            )
            for row in fetched
        ]


def compile_direct(statement: Any, engine: Engine, keys: Sequence[str]) -> DirectStatement:
    """Compile ``statement`` for ``engine``'s dialect, taking parameters ``keys``.

    The rows a statement returns are its ``exported_columns`` (a select's columns, an insert's
    or delete's ``RETURNING``), named by their keys; each value passes through its column type's
    result processor, each parameter through its type's bind processor, for this dialect.
    """
    dialect = engine.dialect
    # (an insert compiled as for many rows: without the RETURNING of its generated key)
    insert = bool(getattr(statement, "is_insert", False))
    compiled: Any = statement.compile(
        dialect=dialect, column_keys=list(keys), for_executemany=insert
    )
    if compiled.literal_execute_params or compiled.post_compile_params:
        raise ValueError(
            f"statement {str(compiled)!r} renders some parameters only when executed (an IN "
            "list, a literal_execute parameter): run it through SQLAlchemy, not compile_direct"
        )
    if getattr(compiled, "implicit_returning", None):
        raise ValueError(
            f"statement {str(compiled)!r} returns generated keys that it does not select: add "
            "them with .returning(), or run it through SQLAlchemy"
        )
    fixed: dict[str, Any] = {}
    bind_processors: dict[str, Callable[[Any], Any]] = {}
    for bind, name in compiled.bind_names.items():
        if not bind.required and bind.effective_value is not None:
            fixed[name] = bind.effective_value
        process = bind.type.dialect_impl(dialect).bind_processor(dialect)
        if process is not None:
            bind_processors[name] = process
    columns = statement.exported_columns
    row = namedtuple("Row", list(columns.keys())) if len(columns) else None
    return DirectStatement(
        sql=str(compiled),
        positions=tuple(compiled.positiontup or ()) if dialect.positional else None,
        fixed=fixed,
        bind_processors=bind_processors,
        row=row,
        result_processors=tuple(
            column.type.dialect_impl(dialect).result_processor(dialect, None) for column in columns
        ),
    )


class DirectConnections:
    """The autocommit DBAPI connections one saver keeps (see the module's docstring)."""

    def __init__(self, engine: Engine) -> None:
        self._engine = engine
        self._dialect = engine.dialect
        self._lock = threading.Lock()
        self._idle: list[PoolProxiedConnection] = []  # checked out of the pool, not in use
        self._waiting = 0  # calls waiting on the pool for a connection
        self._epoch = 0  # bumped by a disconnect and by close(): older connections are retired
        self._pid = os.getpid()
        self._pool: QueuePool = self._own_pool()

    def run(self, statement: DirectStatement, params: Mapping[str, Any]) -> list[Any] | int:
        """Execute ``statement``: its rows if it returns rows, else the row count."""
        parameters = statement.parameters(params)
        with self._connection() as fairy:
            cursor = fairy.dbapi_connection.cursor()  # type: ignore[union-attr]
            try:
                cursor.execute(statement.sql, parameters)
                if statement.row is not None:
                    return statement.rows(cursor.fetchall())
                return int(cursor.rowcount)
            except self._dialect.loaded_dbapi.Error as error:
                raise self._translate(error, statement, parameters, fairy, cursor) from error
            finally:
                cursor.close()

    def run_in_transaction(
        self, statements: Sequence[tuple[DirectStatement, Mapping[str, Any]]]
    ) -> list[int]:
        """Execute ``statements`` (returning no rows) in one transaction: all or none.  Their
        row counts."""
        begin = "BEGIN IMMEDIATE" if self._dialect.name == "sqlite" else "BEGIN"
        counts: list[int] = []
        with self._connection() as fairy:
            cursor = fairy.dbapi_connection.cursor()  # type: ignore[union-attr]
            statement, parameters = None, None
            try:
                cursor.execute(begin)
                for statement, params in statements:
                    parameters = statement.parameters(params)
                    cursor.execute(statement.sql, parameters)
                    counts.append(int(cursor.rowcount))
                cursor.execute("COMMIT")
            except BaseException as error:
                with contextlib.suppress(Exception):  # (a dead connection rolled back already)
                    cursor.execute("ROLLBACK")
                if statement is None or not isinstance(error, self._dialect.loaded_dbapi.Error):
                    raise
                raise self._translate(error, statement, parameters, fairy, cursor) from error
            finally:
                cursor.close()
        return counts

    def close(self) -> None:
        """Close the idle connections, through a new pool (those in use close when given
        back)."""
        with self._lock:
            if self._pid != os.getpid():
                self._forked()
                return
            idle, self._idle = self._idle, []
            self._epoch += 1
            retired, self._pool = self._pool, self._pool.recreate()
        for fairy in idle:
            _discard(fairy)
        retired.dispose()

    # -- the pool and the free list -------------------------------------------------------------

    def _own_pool(self) -> QueuePool:
        engine_pool = self._engine.pool
        pool: QueuePool
        if isinstance(engine_pool, QueuePool):
            pool = engine_pool.recreate()
        else:  # (NullPool and the like: no bound of their own, nor idle connections)
            pool = QueuePool(
                self._open_through_engine,
                pool_size=KEEP_IDLE,
                max_overflow=MAX_OPEN - KEEP_IDLE,
                timeout=WAIT,
                dialect=self._dialect,
            )
        # (listeners are carried over by recreate(): after a fork and by close())
        event.listen(pool, "connect", self._on_connect)
        event.listen(pool, "checkout", self._on_checkout)
        return pool

    def _open_through_engine(self) -> Any:
        """A DBAPI connection opened by the engine (its URL, ``connect_args`` and listeners),
        then detached from the engine's pool."""
        fairy = self._engine.raw_connection()
        fairy.detach()
        return fairy.dbapi_connection

    def _on_connect(self, dbapi_connection: Any, record: ConnectionPoolEntry) -> None:
        self._dialect.set_isolation_level(dbapi_connection, "AUTOCOMMIT")
        record.info[_EPOCH] = self._epoch

    def _on_checkout(
        self, dbapi_connection: Any, record: ConnectionPoolEntry, fairy: PoolProxiedConnection
    ) -> None:
        if record.info.get(_EPOCH, -1) < self._epoch:
            # (the pool closes it and opens another in its place)
            raise sa_exc.DisconnectionError(
                "opened before the database dropped a connection of the checkpoint saver"
            )

    @contextmanager
    def _connection(self) -> Iterator[PoolProxiedConnection]:
        fairy = self._take()
        try:
            yield fairy
        except BaseException:
            connection = fairy.dbapi_connection
            if connection is not None:  # (None: invalidated already, as disconnected)
                if _unusable(connection):
                    _discard(fairy)
                else:
                    self._give_back(fairy)
            raise
        self._give_back(fairy)

    def _take(self) -> PoolProxiedConnection:
        with self._lock:
            if self._pid != os.getpid():
                self._forked()
            if self._idle:
                return self._idle.pop()
            self._waiting += 1
            pool = self._pool
        try:
            return pool.connect()
        except sa_exc.TimeoutError as error:
            raise TimeoutError(
                f"all {pool.checkedout()} connections of the checkpoint saver are in use (waited "
                f"{pool.timeout():g} s): raise the engine's pool_size/max_overflow, or use fewer "
                "threads"
            ) from error
        except self._dialect.loaded_dbapi.Error as error:  # (the database refused to connect)
            raise sa_exc.DBAPIError.instance(
                None, None, error, self._dialect.loaded_dbapi.Error, dialect=self._dialect
            ) from error
        finally:
            with self._lock:
                self._waiting -= 1

    def _give_back(self, fairy: PoolProxiedConnection) -> None:
        with self._lock:
            if self._pid != os.getpid():  # (a parent's connection, seen by a forked child)
                _INHERITED.append(fairy)
                return
            if fairy.info.get(_EPOCH, -1) < self._epoch:
                retire = True
            elif not self._waiting and len(self._idle) < KEEP_IDLE:
                self._idle.append(fairy)
                return
            else:
                retire = False
        if retire:
            _discard(fairy)
        else:
            fairy.close()  # back to the pool, to a call waiting for one

    def _forked(self) -> None:
        """In a forked child (with the lock held): leave the parent's connections alone."""
        _INHERITED.append((self._pool, self._idle))
        self._idle = []
        self._waiting = 0
        self._pool = self._pool.recreate()
        self._pid = os.getpid()

    def _translate(
        self,
        error: Any,
        statement: DirectStatement,
        parameters: Any,
        fairy: PoolProxiedConnection,
        cursor: Any,
    ) -> sa_exc.DBAPIError:
        dialect = self._dialect
        disconnected = bool(dialect.is_disconnect(error, fairy.dbapi_connection, cursor))
        if disconnected:
            # Likely every idle connection is dead too (a restart, a wave of terminations).
            with self._lock:
                idle, self._idle = self._idle, []
                self._epoch += 1
            for other in idle:
                _discard(other)
            _discard(fairy)
        translated = sa_exc.DBAPIError.instance(
            statement.sql,
            parameters,
            error,
            dialect.loaded_dbapi.Error,
            connection_invalidated=disconnected,
            dialect=dialect,
        )
        assert isinstance(translated, sa_exc.DBAPIError)
        return translated


def _unusable(connection: Any) -> bool:
    """Whether a DBAPI connection is closed or broken (psycopg says so; sqlite3 never is)."""
    return bool(getattr(connection, "closed", False) or getattr(connection, "broken", False))


def _discard(fairy: PoolProxiedConnection) -> None:
    """Close a connection of ours and give its slot back to the pool, without the pool's reset
    (a rollback, which would fail, and be logged, on a connection the server dropped)."""
    if fairy.dbapi_connection is None:  # (invalidated already)
        return
    with contextlib.suppress(Exception):  # a broken connection: nothing more to do
        fairy.invalidate()
