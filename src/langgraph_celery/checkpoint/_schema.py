"""The SQL schema of :class:`~langgraph_celery.checkpoint.sql.SqlSaver`, named in this one place.

This module *describes* the tables as the latest migration leaves them (the saver builds its
statements from it); :mod:`langgraph_celery.checkpoint._migrations` *creates* them, one numbered
migration after another.  A test checks that the two agree.  Every table is named
``<table_prefix><name>`` (the prefix is ``lgc_`` by default), and so is every constraint and
index, so that a refused insert is recognised by the name of the constraint it violated.

``<prefix>checkpoints`` (:data:`CHECKPOINTS_TABLE`)
    One row per checkpoint.  ``seq`` is an autoincrement primary key: a thread's latest checkpoint
    is its row with the highest ``seq`` and ``list`` orders by it, so "newest" means "last stored"
    whatever the steps are.  ``thread_id``, ``checkpoint_id``, ``run_id``, ``step``,
    ``parent_id``, ``created_at`` and ``kind`` (a
    :class:`~langgraph_celery.checkpoint.base.CheckpointKind` word) are columns; everything else
    is ``body``, the serializer's text of :meth:`Checkpoint.body()
    <langgraph_celery.checkpoint.base.Checkpoint.body>` (which also holds the kind), or of a
    delta body (see ``base_id`` below).  ``kind`` is
    nullable: a release older than the column, still running during an upgrade, stores rows
    without it, whose kind the saver reads from their body.
    ``pruned_at`` is set when :meth:`~langgraph_celery.checkpoint.BaseCheckpointSaver.prune`
    removed the checkpoint: its ``body`` is then empty and its row stays, a tombstone that keeps
    its id, run and step taken (every read leaves it out; ``delete_thread`` deletes it).
    ``base_id``, ``budget`` and ``depth`` place the row in its chain of deltas (see
    :mod:`langgraph_celery.checkpoint._delta`): a row whose ``base_id`` is set stores a delta
    of its parent (its body has ``"delta"`` instead of ``"values"``), read from the whole value
    ``base_id`` names and the deltas after it; ``budget`` is the bytes its chain may still
    spend on deltas, ``depth`` how many deltas it is after that whole value.  Rows stored
    before these columns are whole (``budget``, ``depth`` filled in by migration 9).  Index
    ``<prefix>ckpt_base_ix`` on ``(thread_id, base_id)`` serves reading a chain.
    ``successor_of`` is ``parent_id`` for a checkpoint computed from the thread's latest (a
    step, a new run, a resume, an ``update_state``: its parent's *successor*) and NULL for a
    *branch* (a fork or time travel from an older checkpoint, which may share its parent) and
    for a thread's first checkpoint; rows stored before migration 10 have it filled in for
    each parent's earliest child, the other children being the forks of their time.
    Four unique rules make concurrent writers safe, each named: ``(thread_id, checkpoint_id)``
    (``<prefix>ckpt_id_uq``), ``(thread_id, run_id, step)`` (``<prefix>ckpt_step_uq``), one
    checkpoint without a parent per thread (``<prefix>ckpt_root_uq``, a partial unique index),
    and one successor per checkpoint, ``(thread_id, successor_of)``
    (``<prefix>ckpt_successor_uq``, a unique index: NULLs are distinct, so branches and roots
    are never refused by it); the database refuses the second writer in the same insert,
    which the saver reports as ``CheckpointConflictError``.  Index
    ``<prefix>ckpt_thread_seq_ix`` on ``(thread_id, seq)`` serves ``get`` and ``list``;
    ``<prefix>ckpt_run_ix`` on ``run_id`` serves ``thread_of_run``.

``<prefix>writes`` (:data:`WRITES_TABLE`)
    One row per pending write, primary key ``(thread_id, checkpoint_id, task_id)``
    (``<prefix>writes_pk``) so the first write of a task wins.  ``node``, ``body`` (the
    serializer's text of the update) and ``created_at`` are columns; ``kind`` says what the write
    is (a :class:`~langgraph_celery.checkpoint.base.WriteKind` word: a task's update, or one of
    the marks a run leaves: interrupt, error, claim, cancel, delivery).  ``seq`` (not unique) orders
    a step's writes by insertion: a nanosecond clock made strictly increasing within the process
    (see :func:`next_write_seq`), which needs no dialect-specific sequence.

``<prefix>timers`` (:data:`TIMERS_TABLE`)
    One row per thread with an active or parked run that the beat reaper must check (``kind``
    ``stall`` or ``deadline``), indexed by ``due_at``.

``<prefix>runs`` (:data:`RUNS_TABLE`)
    One row per run (primary key ``run_id``): its ``thread_id``, ``graph_id``, ``status`` (a
    :class:`~langgraph_celery.checkpoint.index.RunStatus` word, checked by
    ``<prefix>runs_status_ck``), current or pending ``node``, ``created_at`` and ``updated_at``.
    ``<prefix>runs_graph_ix`` and ``<prefix>runs_status_ix`` serve listing a graph's runs newest
    first, all or by status, ``<prefix>runs_created_ix`` and ``<prefix>runs_any_status_ix``
    every graph's; ``<prefix>runs_thread_ix`` serves releasing a thread.
    ``superseded`` is set on a completed run's record once the thread is known to have gone on
    after it (a newer run; see :meth:`~langgraph_celery.checkpoint.RunIndex.completed_runs`),
    and cleared when the record is updated; ``<prefix>runs_expiry_ix`` on ``(graph_id, status,
    superseded, updated_at)`` serves the reaper's ``checkpoint_ttl`` pass, which looks for
    threads whose last run completed long ago.

``<prefix>schema_version`` (:data:`SCHEMA_VERSION_TABLE`)
    One row per migration applied: ``version``, ``description``, ``applied_at``.
"""

from __future__ import annotations

import re
import threading
import time
from dataclasses import dataclass

from sqlalchemy import (
    BigInteger,
    Boolean,
    Column,
    DateTime,
    Enum,
    Index,
    Integer,
    MetaData,
    PrimaryKeyConstraint,
    String,
    Table,
    Text,
    UniqueConstraint,
    false,
)

from langgraph_celery.checkpoint.index import RunStatus

__all__ = [
    "CHECKPOINTS_TABLE",
    "DEFAULT_TABLE_PREFIX",
    "RUNS_TABLE",
    "SCHEMA_VERSION_TABLE",
    "TIMERS_TABLE",
    "WRITES_TABLE",
    "Tables",
    "build_tables",
    "check_prefix",
    "constraint_names",
    "next_write_seq",
]

#: Default prefix of every table name.
DEFAULT_TABLE_PREFIX = "lgc_"
#: Name (after the prefix) of the checkpoints table.
CHECKPOINTS_TABLE = "checkpoints"
#: Name (after the prefix) of the pending-writes table.
WRITES_TABLE = "writes"
#: Name (after the prefix) of the timers table.
TIMERS_TABLE = "timers"
#: Name (after the prefix) of the runs table.
RUNS_TABLE = "runs"
#: Name (after the prefix) of the table recording the migrations applied.
SCHEMA_VERSION_TABLE = "schema_version"

# Letters, digits and underscores, starting with a letter or underscore; short enough that the
# longest derived name (constraint/index names) fits PostgreSQL's 63-character identifiers.
_PREFIX_RE = re.compile(r"[A-Za-z_][A-Za-z0-9_]{0,39}")

ID = String(255)
#: The type of ``seq``: a 64-bit autoincrement (SQLite's INTEGER is its rowid, already 64-bit).
SEQ = BigInteger().with_variant(Integer, "sqlite")


@dataclass(frozen=True)
class Tables:
    """The saver's tables, bound to one :class:`MetaData`."""

    metadata: MetaData
    checkpoints: Table
    writes: Table
    timers: Table
    runs: Table
    schema_version: Table


@dataclass(frozen=True)
class ConstraintNames:
    """The names of the unique rules a refused insert may have violated."""

    checkpoint_id: str
    step: str
    root: str
    successor: str
    write: str


def check_prefix(prefix: str) -> str:
    """``prefix`` if it is valid (an SQL identifier of at most 40 characters), else ValueError."""
    if not _PREFIX_RE.fullmatch(prefix):
        raise ValueError(
            f"table_prefix {prefix!r} is not valid: use 1-40 letters, digits or underscores, "
            "starting with a letter or underscore"
        )
    return prefix


def constraint_names(prefix: str) -> ConstraintNames:
    return ConstraintNames(
        checkpoint_id=f"{prefix}ckpt_id_uq",
        step=f"{prefix}ckpt_step_uq",
        root=f"{prefix}ckpt_root_uq",
        successor=f"{prefix}ckpt_successor_uq",
        write=f"{prefix}writes_pk",
    )


def build_tables(prefix: str = DEFAULT_TABLE_PREFIX) -> Tables:
    """Describe the tables named with ``prefix``, as the latest migration leaves them."""
    check_prefix(prefix)
    names = constraint_names(prefix)
    metadata = MetaData()
    checkpoints = Table(
        f"{prefix}{CHECKPOINTS_TABLE}",
        metadata,
        Column("seq", SEQ, autoincrement=True),
        Column("thread_id", ID, nullable=False),
        Column("checkpoint_id", ID, nullable=False),
        Column("run_id", ID, nullable=False),
        Column("step", Integer, nullable=False),
        Column("parent_id", ID, nullable=True),
        Column("created_at", DateTime(timezone=True), nullable=False),
        Column("body", Text, nullable=False),
        Column("kind", String(16), nullable=True),
        Column("pruned_at", DateTime(timezone=True), nullable=True),
        Column("base_id", ID, nullable=True),
        Column("budget", BigInteger, nullable=True),
        Column("depth", Integer, nullable=True),
        Column("successor_of", ID, nullable=True),
        PrimaryKeyConstraint("seq", name=f"{prefix}{CHECKPOINTS_TABLE}_pkey"),
        UniqueConstraint("thread_id", "checkpoint_id", name=names.checkpoint_id),
        UniqueConstraint("thread_id", "run_id", "step", name=names.step),
        Index(f"{prefix}ckpt_thread_seq_ix", "thread_id", "seq"),
        Index(f"{prefix}ckpt_run_ix", "run_id"),
        Index(f"{prefix}ckpt_base_ix", "thread_id", "base_id"),
        Index(names.successor, "thread_id", "successor_of", unique=True),
    )
    Index(
        names.root,
        checkpoints.c.thread_id,
        unique=True,
        postgresql_where=checkpoints.c.parent_id.is_(None),
        sqlite_where=checkpoints.c.parent_id.is_(None),
    )
    writes = Table(
        f"{prefix}{WRITES_TABLE}",
        metadata,
        Column("thread_id", ID, nullable=False),
        Column("checkpoint_id", ID, nullable=False),
        Column("task_id", ID, nullable=False),
        Column("node", ID, nullable=False),
        Column("seq", BigInteger, nullable=False),
        Column("body", Text, nullable=False),
        Column("created_at", DateTime(timezone=True), nullable=False),
        Column("kind", String(16), nullable=False, server_default="update"),
        PrimaryKeyConstraint("thread_id", "checkpoint_id", "task_id", name=names.write),
    )
    timers = Table(
        f"{prefix}{TIMERS_TABLE}",
        metadata,
        Column("thread_id", ID, nullable=False),
        Column("run_id", ID, nullable=False),
        Column("graph_id", ID, nullable=False),
        Column("kind", String(16), nullable=False),
        Column("due_at", DateTime(timezone=True), nullable=False),
        PrimaryKeyConstraint("thread_id", name=f"{prefix}{TIMERS_TABLE}_pkey"),
        Index(f"{prefix}timers_due_ix", "due_at"),
    )
    runs = Table(
        f"{prefix}{RUNS_TABLE}",
        metadata,
        Column("run_id", ID, nullable=False),
        Column("thread_id", ID, nullable=False),
        Column("graph_id", ID, nullable=False),
        Column("status", run_status_type(prefix), nullable=False),
        Column("node", ID, nullable=True),
        Column("created_at", DateTime(timezone=True), nullable=False),
        Column("updated_at", DateTime(timezone=True), nullable=False),
        Column("superseded", Boolean, nullable=False, server_default=false()),
        PrimaryKeyConstraint("run_id", name=f"{prefix}{RUNS_TABLE}_pkey"),
        Index(f"{prefix}runs_graph_ix", "graph_id", "created_at", "run_id"),
        Index(f"{prefix}runs_status_ix", "graph_id", "status", "created_at", "run_id"),
        Index(f"{prefix}runs_thread_ix", "thread_id"),
        Index(f"{prefix}runs_expiry_ix", "graph_id", "status", "superseded", "updated_at"),
        Index(f"{prefix}runs_created_ix", "created_at", "run_id"),
        Index(f"{prefix}runs_any_status_ix", "status", "created_at", "run_id"),
    )
    schema_version = Table(
        f"{prefix}{SCHEMA_VERSION_TABLE}",
        metadata,
        Column("version", Integer, nullable=False, autoincrement=False),
        Column("description", String(255), nullable=False),
        Column("applied_at", DateTime(timezone=True), nullable=False),
        PrimaryKeyConstraint("version", name=f"{prefix}{SCHEMA_VERSION_TABLE}_pkey"),
    )
    return Tables(metadata, checkpoints, writes, timers, runs, schema_version)


def run_status_type(prefix: str) -> Enum:
    """``status``: a :class:`RunStatus` bound and read as the enum's member, stored as its word
    and checked by a named constraint (not a PostgreSQL enum type, which would be one more thing
    to create and alter outside the table)."""
    return Enum(
        RunStatus,
        values_callable=lambda statuses: [status.value for status in statuses],
        validate_strings=True,
        native_enum=False,
        create_constraint=True,
        length=16,
        name=f"{prefix}runs_status_ck",
    )


_seq_lock = threading.Lock()
_last_seq = 0


def next_write_seq() -> int:
    """A nanosecond timestamp, strictly greater than the previous one returned in this process."""
    global _last_seq
    with _seq_lock:
        _last_seq = max(time.time_ns(), _last_seq + 1)
        return _last_seq
