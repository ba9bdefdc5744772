"""Running a saver's statements on DBAPI connections it keeps, outside SQLAlchemy's execution.

Every saver call is one statement in autocommit, and a node task makes two per step.  Going
through a SQLAlchemy ``Connection`` (pool check-out and check-in, execution context, events,
result proxy) cost about four times the CPU of the statement itself on a loopback PostgreSQL
(measured: 460 us against 110 us per read).  So the saver compiles each statement once with the
engine's dialect and runs it on an autocommit DBAPI connection of its own:

* connections come from the engine (its URL, ``connect_args`` and ``connect`` listeners) and are
  then detached from its pool, so they never hold one of the pool's slots;
* idle ones wait in a free list (at most :data:`KEEP_IDLE`); a call takes one, or opens one when
  none is free, so threads never share a connection; at most as many are open at once as the
  engine's pool allows (``pool_size + max_overflow``; :data:`MAX_OPEN` for other pools), and a
  call waits up to the pool's timeout for one, as with the pool itself;
* a disconnect (the server restarted, a backend was terminated) closes every idle connection,
  as SQLAlchemy's pool does, since they are likely dead too, and is raised as SQLAlchemy's
  exception with ``connection_invalidated`` set, so callers handle one kind of error;
* a forked child never touches its parent's connections (their sockets are shared): it keeps
  them referenced, unused, and opens its own.

Bind and result processors of the dialect are applied as SQLAlchemy would (SQLite stores
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

from sqlalchemy import Engine
from sqlalchemy.exc import DBAPIError

__all__ = ["KEEP_IDLE", "MAX_OPEN", "DirectConnections", "DirectStatement", "compile_direct"]

#: Idle connections a saver keeps per process; more are closed when given back.
KEEP_IDLE = 8
#: Connections open at once per saver and process, when the engine's pool sets no such bound.
MAX_OPEN = 16

#: Connections of a parent process, seen by a forked child: kept alive here, never used or
#: closed (closing would end the parent's sessions on the shared sockets).
_INHERITED: list[Any] = []


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
    """Compile ``statement`` for ``engine``'s dialect, taking parameters ``keys``."""
    dialect = engine.dialect
    # (an insert compiled as for many rows: without the RETURNING of its generated key)
    insert = bool(getattr(statement, "is_insert", False))
    compiled = statement.compile(dialect=dialect, column_keys=list(keys), for_executemany=insert)
    fixed = {
        name: bind.value
        for bind, name in compiled.bind_names.items()
        if not bind.required and bind.value is not None
    }
    columns = list(getattr(compiled, "_result_columns", ()) or ())
    row = namedtuple("Row", [column.keyname for column in columns]) if columns else None
    return DirectStatement(
        sql=str(compiled),
        positions=tuple(compiled.positiontup or ()) if compiled.positional else None,
        fixed=fixed,
        bind_processors=dict(compiled._bind_processors),
        row=row,
        result_processors=tuple(
            column.type._cached_result_processor(dialect, None) for column in columns
        ),
    )


class DirectConnections:
    """The autocommit DBAPI connections one saver keeps (see the module's docstring)."""

    def __init__(self, engine: Engine) -> None:
        self._engine = engine
        self._dialect = engine.dialect
        self._lock = threading.Lock()
        self._idle: list[Any] = []  # (pool fairy) connections not in use, newest last
        self._pid = os.getpid()
        pool: Any = engine.pool
        size, overflow = getattr(pool, "size", None), getattr(pool, "_max_overflow", None)
        if callable(size) and isinstance(overflow, int):
            self._max_open = max(1, size() + max(overflow, 0))
        else:
            self._max_open = MAX_OPEN
        self._wait = float(getattr(pool, "_timeout", 30.0) or 30.0)
        self._slots = threading.BoundedSemaphore(self._max_open)

    def run(self, statement: DirectStatement, params: Mapping[str, Any]) -> list[Any] | int:
        """Execute ``statement``: its rows if it returns rows, else the row count."""
        parameters = statement.parameters(params)
        with self._connection() as fairy:
            cursor = fairy.dbapi_connection.cursor()
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
    ) -> None:
        """Execute ``statements`` (returning no rows) in one transaction: all or none."""
        begin = "BEGIN IMMEDIATE" if self._dialect.name == "sqlite" else "BEGIN"
        with self._connection() as fairy:
            cursor = fairy.dbapi_connection.cursor()
            statement, parameters = None, None
            try:
                cursor.execute(begin)
                for statement, params in statements:
                    parameters = statement.parameters(params)
                    cursor.execute(statement.sql, parameters)
                cursor.execute("COMMIT")
            except BaseException as error:
                with contextlib.suppress(Exception):  # (a dead connection rolled back already)
                    cursor.execute("ROLLBACK")
                if statement is None or not isinstance(error, self._dialect.loaded_dbapi.Error):
                    raise
                raise self._translate(error, statement, parameters, fairy, cursor) from error
            finally:
                cursor.close()

    def close(self) -> None:
        """Close the idle connections (those in use close when given back)."""
        with self._lock:
            idle, self._idle = self._idle, []
            if self._pid != os.getpid():
                _INHERITED.extend(idle)
                return
        for fairy in idle:
            _close(fairy)

    @contextmanager
    def _connection(self) -> Iterator[Any]:
        with self._lock:
            if self._pid != os.getpid():  # a forked child: the parent's connections stay its own
                _INHERITED.extend(self._idle)
                self._idle = []
                self._pid = os.getpid()
                self._slots = threading.BoundedSemaphore(self._max_open)
            slots = self._slots
        if not slots.acquire(timeout=self._wait):
            raise TimeoutError(
                f"all {self._max_open} connections of the checkpoint saver are in use (waited "
                f"{self._wait:g} s): raise the engine's pool_size/max_overflow, or use fewer "
                "threads"
            )
        try:
            with self._lock:
                fairy = self._idle.pop() if self._idle else None
            if fairy is None:
                fairy = self._open()
            try:
                yield fairy
            except BaseException:
                connection = fairy.dbapi_connection
                if connection is not None:  # (None: closed already, as disconnected)
                    if _unusable(connection):
                        _close(fairy)
                    else:
                        self._give_back(fairy)
                raise
            self._give_back(fairy)
        finally:
            slots.release()

    def _open(self) -> Any:
        fairy = self._engine.raw_connection()
        fairy.detach()  # ours from now on: not returned to (nor counted by) the pool
        connection: Any = fairy.dbapi_connection
        try:
            self._dialect.set_isolation_level(connection, "AUTOCOMMIT")
        except BaseException:
            _close(fairy)
            raise
        return fairy

    def _give_back(self, fairy: Any) -> None:
        with self._lock:
            if self._pid == os.getpid() and len(self._idle) < KEEP_IDLE:
                self._idle.append(fairy)
                return
        _close(fairy)

    def _translate(
        self,
        error: Any,
        statement: DirectStatement,
        parameters: Any,
        fairy: Any,
        cursor: Any,
    ) -> DBAPIError:
        dialect = self._dialect
        disconnected = bool(dialect.is_disconnect(error, fairy.dbapi_connection, cursor))
        if disconnected:
            # Likely every idle connection is dead too (a restart, a wave of terminations).
            self.close()
            _close(fairy)
        translated = DBAPIError.instance(
            statement.sql,
            parameters,
            error,
            dialect.loaded_dbapi.Error,
            connection_invalidated=disconnected,
            dialect=dialect,
        )
        assert isinstance(translated, DBAPIError)
        return translated


def _unusable(connection: Any) -> bool:
    """Whether a DBAPI connection is closed or broken (psycopg says so; sqlite3 never is)."""
    return bool(getattr(connection, "closed", False) or getattr(connection, "broken", False))


def _close(fairy: Any) -> None:
    """Close a connection of ours: the DBAPI connection itself (in autocommit there is nothing to
    roll back; the pool's reset would fail, and log it, on a connection the server dropped), then
    the pool's wrapper, which forgets it."""
    connection = fairy.dbapi_connection
    if connection is None:
        return
    with contextlib.suppress(Exception):  # a broken connection: nothing more to do
        connection.close()
    with contextlib.suppress(Exception):
        fairy.invalidate()
