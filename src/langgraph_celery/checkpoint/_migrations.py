"""The numbered migrations of :class:`~langgraph_celery.checkpoint.sql.SqlSaver`'s tables.

:data:`MIGRATIONS` is the schema's history, oldest first; migration ``n`` (1-based) takes tables
at version ``n - 1`` to version ``n``.  :func:`migrate` (called by ``SqlSaver.setup()`` and on
first use) applies those not yet applied, in order, each once, and records each in
``<prefix>schema_version`` in the same transaction as its changes:

* PostgreSQL: one transaction per migration, holding a transaction-level advisory lock keyed by
  the table prefix, so processes calling ``setup()`` at once take turns; DDL is transactional,
  so a migration that fails leaves nothing behind.
* SQLite: one ``BEGIN IMMEDIATE`` transaction per migration (SQLite's DDL is transactional too);
  it takes the database's write lock, so processes take turns (waiting up to the busy timeout).
* Other databases: one transaction per migration, without a lock; a migration that a concurrent
  process applied first is noticed when recording it (the version's primary key), and the
  next attempt reads the new version.

Each step re-reads the version under the lock, so a process that waited finds the work done.
Tables recorded at a version newer than this code knows are refused (:class:`SchemaError`):
older code would store rows the newer schema does not expect.

Migrations are history: never edit one that has shipped; add the next.  Migrations 1 and 2
reproduce what the releases before schema versions created on their own (``create_all`` and an
index added when missing), so they create only what is missing: that is how tables made by those
releases are adopted.  From migration 3 on, each runs on tables exactly at the version before.
"""

from __future__ import annotations

import contextlib
import hashlib
import logging
import time
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, contextmanager
from datetime import UTC, datetime
from typing import Any

from sqlalchemy import (
    Column,
    Connection,
    DateTime,
    Engine,
    Integer,
    MetaData,
    PrimaryKeyConstraint,
    String,
    Table,
    func,
    insert,
    select,
)
from sqlalchemy.exc import DBAPIError

from langgraph_celery.checkpoint._migration_steps import (
    LATEST_VERSION,
    MIGRATIONS,
    Migration,
    MigrationContext,
    SchemaError,
)
from langgraph_celery.checkpoint._schema import SCHEMA_VERSION_TABLE

__all__ = [
    "LATEST_VERSION",
    "MIGRATIONS",
    "Migration",
    "MigrationContext",
    "SchemaError",
    "migrate",
]

log = logging.getLogger("langgraph_celery.checkpoint")

#: Attempts at one migration step on a database without a lock (a concurrent process may win).
_UNLOCKED_ATTEMPTS = 5


# -- applying them ----------------------------------------------------------------------------


def migrate(
    engine: Engine,
    prefix: str,
    loads: Callable[[str], Any],
    serial: Callable[[], AbstractContextManager[Any]],
) -> int:
    """Apply the migrations the tables lack, one transaction each; the version reached.

    ``serial`` is held around each transaction (an in-memory SQLite database is one connection
    that threads take turns on)."""
    ledger = _ledger(prefix)
    for attempt in range(1, _UNLOCKED_ATTEMPTS + 1):
        try:
            while True:
                with serial(), _locked_transaction(engine, prefix) as conn:
                    ledger.create(conn, checkfirst=True)
                    current = int(conn.execute(select(func.max(ledger.c.version))).scalar() or 0)
                    if current >= LATEST_VERSION:
                        _refuse_newer(current, prefix)
                        return current
                    migration = MIGRATIONS[current]
                    migration.apply(MigrationContext(conn, prefix, loads))
                    conn.execute(
                        insert(ledger).values(
                            version=migration.version,
                            description=migration.description,
                            applied_at=datetime.now(UTC),
                        )
                    )
                log.info(
                    "tables %s*: schema migration %d applied (%s)",
                    prefix,
                    migration.version,
                    migration.description,
                )
        except DBAPIError:
            # Without a lock, another process may have created a table or applied the migration
            # first; read the version again.  With one, an error is the migration's own.
            if engine.dialect.name in ("postgresql", "sqlite") or attempt == _UNLOCKED_ATTEMPTS:
                raise
            time.sleep(0.05 * attempt)
    raise AssertionError("unreachable")  # (the loop returns or raises)


def _refuse_newer(current: int, prefix: str) -> None:
    if current > LATEST_VERSION:
        raise SchemaError(
            f"tables {prefix}* are at schema version {current}, but this langgraph-celery knows "
            f"versions up to {LATEST_VERSION}: a newer release migrated them; upgrade "
            "langgraph-celery in this process (or use another table_prefix)"
        )


def _ledger(prefix: str) -> Table:
    return Table(
        f"{prefix}{SCHEMA_VERSION_TABLE}",
        MetaData(),
        Column("version", Integer, nullable=False, autoincrement=False),
        Column("description", String(255), nullable=False),
        Column("applied_at", DateTime(timezone=True), nullable=False),
        PrimaryKeyConstraint("version", name=f"{prefix}{SCHEMA_VERSION_TABLE}_pkey"),
    )


def advisory_lock_key(prefix: str) -> int:
    """The PostgreSQL advisory lock of ``prefix``'s migrations: a signed 64-bit number."""
    digest = hashlib.sha256(f"langgraph_celery.schema:{prefix}".encode()).digest()
    return int.from_bytes(digest[:8], "big", signed=True)


@contextmanager
def _locked_transaction(engine: Engine, prefix: str) -> Iterator[Connection]:
    dialect = engine.dialect.name
    if dialect == "sqlite":
        # pysqlite only begins transactions before DML on its own; in autocommit it begins
        # none, and the explicit BEGIN IMMEDIATE makes the DDL transactional and takes the lock.
        with engine.execution_options(isolation_level="AUTOCOMMIT").connect() as conn:
            conn.exec_driver_sql("BEGIN IMMEDIATE")
            try:
                yield conn
            except BaseException:
                with contextlib.suppress(Exception):  # (a dead connection rolled back already)
                    conn.exec_driver_sql("ROLLBACK")
                raise
            conn.exec_driver_sql("COMMIT")
        return
    with engine.begin() as conn:
        if dialect == "postgresql":
            conn.execute(select(func.pg_advisory_xact_lock(advisory_lock_key(prefix))))
        yield conn
