"""The SQL schema of :class:`~langgraph_celery.checkpoint.sql.SqlSaver`, named in this one place.

Two tables, both named ``<table_prefix><name>`` (the prefix is ``lgc_`` by default):

``<prefix>checkpoints`` (:data:`CHECKPOINTS_TABLE`)
    One row per checkpoint.  ``seq`` is an autoincrement primary key: a thread's latest checkpoint
    is its row with the highest ``seq`` and ``list`` orders by it, so "newest" means "last stored"
    whatever the steps are.  ``thread_id``, ``checkpoint_id``, ``run_id``, ``step``,
    ``parent_id`` and ``created_at`` are columns; everything else is ``body``, the serializer's
    text of :meth:`Checkpoint.body() <langgraph_celery.checkpoint.base.Checkpoint.body>`.
    Two unique constraints make concurrent writers safe: ``(thread_id, checkpoint_id)``
    (``<prefix>ckpt_id_uq``) and ``(thread_id, run_id, step)`` (``<prefix>ckpt_step_uq``); the
    database refuses the second writer, which the saver reports as ``CheckpointConflictError``.
    Index ``<prefix>ckpt_thread_seq_ix`` on ``(thread_id, seq)`` serves ``get`` and ``list``;
    ``<prefix>ckpt_run_ix`` on ``run_id`` serves ``thread_of_run``.

``<prefix>writes`` (:data:`WRITES_TABLE`)
    One row per pending write, primary key ``(thread_id, checkpoint_id, task_id)`` so the first
    write of a task wins.  ``node``, ``body`` (the serializer's text of the update) and
    ``created_at`` are columns.  ``seq`` (not unique) orders a step's writes by insertion: it is
    a nanosecond clock made strictly increasing within the process (see :func:`next_write_seq`),
    which needs no dialect-specific sequence.
"""

from __future__ import annotations

import re
import threading
import time
from dataclasses import dataclass
from datetime import UTC, datetime

from sqlalchemy import (
    BigInteger,
    Column,
    DateTime,
    Index,
    Integer,
    MetaData,
    PrimaryKeyConstraint,
    String,
    Table,
    Text,
    UniqueConstraint,
)

__all__ = [
    "CHECKPOINTS_TABLE",
    "DEFAULT_TABLE_PREFIX",
    "WRITES_TABLE",
    "Tables",
    "as_utc",
    "build_tables",
    "next_write_seq",
]

#: Default prefix of every table name.
DEFAULT_TABLE_PREFIX = "lgc_"
#: Name (after the prefix) of the checkpoints table.
CHECKPOINTS_TABLE = "checkpoints"
#: Name (after the prefix) of the pending-writes table.
WRITES_TABLE = "writes"
#: Name (after the prefix) of the timers table: one row per thread with an active or parked run
#: that the beat reaper must check (``kind`` ``stall`` or ``deadline``), indexed by ``due_at``.
TIMERS_TABLE = "timers"

# Letters, digits and underscores, starting with a letter or underscore; short enough that the
# longest derived name (constraint/index names) fits PostgreSQL's 63-character identifiers.
_PREFIX_RE = re.compile(r"[A-Za-z_][A-Za-z0-9_]{0,39}")

_ID = String(255)


@dataclass(frozen=True)
class Tables:
    """The saver's tables, bound to one :class:`MetaData`."""

    metadata: MetaData
    checkpoints: Table
    writes: Table
    timers: Table


def build_tables(prefix: str = DEFAULT_TABLE_PREFIX) -> Tables:
    """Describe the tables named with ``prefix`` (validated: an SQL identifier of <= 40 chars)."""
    if not _PREFIX_RE.fullmatch(prefix):
        raise ValueError(
            f"table_prefix {prefix!r} is not valid: use 1-40 letters, digits or underscores, "
            "starting with a letter or underscore"
        )
    metadata = MetaData()
    checkpoints = Table(
        f"{prefix}{CHECKPOINTS_TABLE}",
        metadata,
        Column(
            "seq",
            BigInteger().with_variant(Integer, "sqlite"),
            primary_key=True,
            autoincrement=True,
        ),
        Column("thread_id", _ID, nullable=False),
        Column("checkpoint_id", _ID, nullable=False),
        Column("run_id", _ID, nullable=False),
        Column("step", Integer, nullable=False),
        Column("parent_id", _ID, nullable=True),
        Column("created_at", DateTime(timezone=True), nullable=False),
        Column("body", Text, nullable=False),
        UniqueConstraint("thread_id", "checkpoint_id", name=f"{prefix}ckpt_id_uq"),
        UniqueConstraint("thread_id", "run_id", "step", name=f"{prefix}ckpt_step_uq"),
        Index(f"{prefix}ckpt_thread_seq_ix", "thread_id", "seq"),
        Index(f"{prefix}ckpt_run_ix", "run_id"),
    )
    writes = Table(
        f"{prefix}{WRITES_TABLE}",
        metadata,
        Column("thread_id", _ID, nullable=False),
        Column("checkpoint_id", _ID, nullable=False),
        Column("task_id", _ID, nullable=False),
        Column("node", _ID, nullable=False),
        Column("seq", BigInteger, nullable=False),
        Column("body", Text, nullable=False),
        Column("created_at", DateTime(timezone=True), nullable=False),
        PrimaryKeyConstraint("thread_id", "checkpoint_id", "task_id", name=f"{prefix}writes_pk"),
    )
    timers = Table(
        f"{prefix}{TIMERS_TABLE}",
        metadata,
        Column("thread_id", _ID, primary_key=True),
        Column("run_id", _ID, nullable=False),
        Column("graph_id", _ID, nullable=False),
        Column("kind", String(16), nullable=False),
        Column("due_at", DateTime(timezone=True), nullable=False),
        Index(f"{prefix}timers_due_ix", "due_at"),
    )
    return Tables(metadata=metadata, checkpoints=checkpoints, writes=writes, timers=timers)


def as_utc(value: datetime) -> datetime:
    """``value`` as an aware UTC datetime (a naive one is taken to be UTC already)."""
    if value.tzinfo is None:
        return value.replace(tzinfo=UTC)
    if value.tzinfo is UTC:
        return value
    return value.astimezone(UTC)


_seq_lock = threading.Lock()
_last_seq = 0


def next_write_seq() -> int:
    """A nanosecond timestamp, strictly greater than the previous one returned in this process."""
    global _last_seq
    with _seq_lock:
        _last_seq = max(time.time_ns(), _last_seq + 1)
        return _last_seq
