"""The engine a :class:`~langgraph_celery.checkpoint.sql.SqlSaver` builds from a URL."""

from __future__ import annotations

import sqlite3
import time
from typing import Any

from sqlalchemy import Engine, create_engine, event
from sqlalchemy.engine import URL, make_url
from sqlalchemy.pool import StaticPool

__all__ = ["SQLITE_BUSY_TIMEOUT", "create_saver_engine", "is_sqlite_memory"]

#: Seconds a SQLite connection waits for another writer's lock before failing.
SQLITE_BUSY_TIMEOUT = 30.0


def is_sqlite_memory(url: URL) -> bool:
    return url.get_backend_name() == "sqlite" and url.database in (None, "", ":memory:")


def create_saver_engine(url: str | URL) -> Engine:
    """An engine for ``url``: psycopg 3 for a PostgreSQL URL without a driver; for SQLite, one
    shared connection for an in-memory database, else WAL and a busy timeout."""
    if isinstance(url, str):
        for scheme in ("postgresql://", "postgres://"):
            if url.startswith(scheme):
                url = "postgresql+psycopg://" + url[len(scheme) :]
                break
    parsed = make_url(url)
    if parsed.drivername == "postgresql":
        parsed = parsed.set(drivername="postgresql+psycopg")
    if parsed.get_backend_name() != "sqlite":
        return create_engine(parsed)
    if is_sqlite_memory(parsed):
        return create_engine(
            parsed, poolclass=StaticPool, connect_args={"check_same_thread": False}
        )
    engine = create_engine(parsed, connect_args={"timeout": SQLITE_BUSY_TIMEOUT})
    event.listen(engine, "connect", _sqlite_on_connect)
    return engine


def _sqlite_on_connect(dbapi_connection: Any, connection_record: Any) -> None:
    # WAL lets readers proceed while one process writes; writers still queue on the lock and
    # wait up to the busy timeout instead of failing at once.
    cursor = dbapi_connection.cursor()
    try:
        _use_wal(cursor)
        cursor.execute("PRAGMA synchronous=NORMAL")
    finally:
        cursor.close()


def _use_wal(cursor: Any) -> None:
    """Switch the database to WAL.  On a new database file that takes an exclusive lock, for
    which SQLite does not wait (its busy timeout does not apply): when several processes open a
    new database at once, the others get "database is locked" at once.  Wait here instead, as
    long as the busy timeout."""
    deadline = time.monotonic() + SQLITE_BUSY_TIMEOUT
    pause = 0.005
    while True:
        try:
            cursor.execute("PRAGMA journal_mode=WAL")
            return
        except sqlite3.OperationalError as error:
            code = getattr(error, "sqlite_errorcode", None)
            busy = isinstance(code, int) and code & 0xFF == sqlite3.SQLITE_BUSY
            if not busy or time.monotonic() >= deadline:
                raise
        time.sleep(pause)
        pause = min(pause * 2, 0.1)
