"""The steps of :data:`MIGRATIONS`: the history of the schema of
:class:`~langgraph_celery.checkpoint.sql.SqlSaver`'s tables, oldest first, applied by
:func:`~langgraph_celery.checkpoint._migrations.migrate` (whose docstring says how).  Migrations
are history: never edit one that has shipped; add the next.

The steps of the checkpoints, writes and timers tables are here; those of the runs table
(4, 6 and 7) are in :mod:`~langgraph_celery.checkpoint._migration_steps_runs`, and what a step
works with (:class:`MigrationContext`, :class:`Migration`, ``add_column``) in
:mod:`~langgraph_celery.checkpoint._migration_context`.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

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
    func,
    inspect,
    select,
    update,
)
from sqlalchemy.sql import bindparam, column, table

from langgraph_celery.checkpoint._migration_context import Migration, MigrationContext, add_column
from langgraph_celery.checkpoint._migration_steps_runs import (
    add_listing_indexes,
    add_superseded_column,
    create_runs_table,
)
from langgraph_celery.checkpoint._schema import (
    CHECKPOINTS_TABLE,
    ID,
    SEQ,
    TIMERS_TABLE,
    WRITES_TABLE,
    constraint_names,
)
from langgraph_celery.checkpoint.base import kind_of_body
from langgraph_celery.errors import SchemaError

__all__ = ["LATEST_VERSION", "MIGRATIONS", "Migration", "MigrationContext", "SchemaError"]


# -- 1: the tables of the releases before schema versions -------------------------------------


def _tables_v1(prefix: str) -> MetaData:
    """The tables as they were when schema versions were introduced (frozen: never edit).
    Primary keys carry the names PostgreSQL gave them then (``<table>_pkey``)."""
    names = constraint_names(prefix)
    metadata = MetaData()
    Table(
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
        PrimaryKeyConstraint("seq", name=f"{prefix}{CHECKPOINTS_TABLE}_pkey"),
        UniqueConstraint("thread_id", "checkpoint_id", name=names.checkpoint_id),
        UniqueConstraint("thread_id", "run_id", "step", name=names.step),
        Index(f"{prefix}ckpt_thread_seq_ix", "thread_id", "seq"),
        Index(f"{prefix}ckpt_run_ix", "run_id"),
    )
    Table(
        f"{prefix}{WRITES_TABLE}",
        metadata,
        Column("thread_id", ID, nullable=False),
        Column("checkpoint_id", ID, nullable=False),
        Column("task_id", ID, nullable=False),
        Column("node", ID, nullable=False),
        Column("seq", BigInteger, nullable=False),
        Column("body", Text, nullable=False),
        Column("created_at", DateTime(timezone=True), nullable=False),
        PrimaryKeyConstraint("thread_id", "checkpoint_id", "task_id", name=names.write),
    )
    Table(
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
    return metadata


def _create_tables(m: MigrationContext) -> None:
    """Each table that is missing, with its indexes; on a table an earlier release made, the
    indexes it lacks (``create_all`` never added an index to a table that existed)."""
    for frozen in _tables_v1(m.prefix).sorted_tables:
        if not inspect(m.connection).has_table(frozen.name):
            frozen.create(m.connection)
            continue
        for index in frozen.indexes:
            index.create(m.connection, checkfirst=True)


# -- 2: one checkpoint without a parent per thread --------------------------------------------


def _create_root_index(m: MigrationContext) -> None:
    """Of two first runs started on a new thread at once, one is stored: a partial unique index
    on the thread of checkpoints without a parent (PostgreSQL, SQLite; other databases have no
    partial index, and the saver goes without this guard there)."""
    if m.dialect not in ("postgresql", "sqlite"):
        return
    checkpoints = _tables_v1(m.prefix).tables[m.table_name(CHECKPOINTS_TABLE)]
    roots = checkpoints.c.parent_id.is_(None)
    twice = m.connection.execute(
        select(checkpoints.c.thread_id)
        .where(roots)
        .group_by(checkpoints.c.thread_id)
        .having(func.count() > 1)
        .order_by(checkpoints.c.thread_id)
        .limit(5)
    ).all()
    name = constraint_names(m.prefix).root
    if twice:
        threads = ", ".join(repr(row.thread_id) for row in twice)
        raise SchemaError(
            f"cannot add index {name} (one checkpoint without a parent per thread): thread(s) "
            f"{threads} have several, stored by an older release when two first runs raced; "
            f"keep one per thread (or delete the thread: DELETE FROM {checkpoints.name} WHERE "
            "thread_id = ...) and call setup() again"
        )
    index = Index(
        name, checkpoints.c.thread_id, unique=True, postgresql_where=roots, sqlite_where=roots
    )
    index.create(m.connection, checkfirst=True)


# -- 3: a checkpoint's kind in a column of its own ----------------------------------------------

#: Checkpoints read and updated at a time when filling a new column.
_BATCH = 500


def _add_kind_column(m: MigrationContext) -> None:
    """``kind`` (a :class:`CheckpointKind` word), filled in from each stored body: its
    ``"kind"``, else its metadata's ``"source"``.  Nullable: a release older than the column,
    still running while this one upgrades, stores rows without it; the saver reads their kind
    from their body."""
    name = m.table_name(CHECKPOINTS_TABLE)
    add_column(m, name, Column("kind", String(16), nullable=True))
    checkpoints = table(name, column("seq", SEQ), column("body", Text), column("kind", String))
    fill = (
        update(checkpoints)
        .where(checkpoints.c.seq == bindparam("b_seq"))
        .values(kind=bindparam("b_kind"))
    )
    after = None
    while True:
        query = select(checkpoints.c.seq, checkpoints.c.body).order_by(checkpoints.c.seq)
        if after is not None:
            query = query.where(checkpoints.c.seq > after)
        rows = m.connection.execute(query.limit(_BATCH)).all()
        if not rows:
            return
        kinds = [{"b_seq": row.seq, "b_kind": _stored_kind(m, name, row)} for row in rows]
        m.connection.execute(fill, kinds)
        after = rows[-1].seq


def _stored_kind(m: MigrationContext, name: str, row: Any) -> str:
    """The kind of a stored body, read with the saver's serializer; if that cannot read it (a
    value of a type it does not have registered), as plain JSON, which the default serializer
    writes: only top-level words are needed."""
    try:
        body = m.loads(row.body)
    except Exception as error:
        try:
            body = json.loads(row.body)
        except ValueError:
            raise SchemaError(
                f"cannot read the kind of checkpoint seq={row.seq} of {name}: its body is not "
                f"JSON and the saver's serializer refuses it ({error}); call setup() with the "
                "serializer that stored it"
            ) from error
    if not isinstance(body, Mapping):
        raise SchemaError(
            f"checkpoint seq={row.seq} of {name} has a body that is not a mapping; call setup() "
            "with the serializer that stored it"
        )
    return kind_of_body(body).value


# -- 5: a pruned checkpoint's row stays, without its state --------------------------------------


def _add_pruned_at_column(m: MigrationContext) -> None:
    """``pruned_at`` on checkpoints: set (and the body emptied) by ``prune``, so the row keeps
    the checkpoint's id, run and step taken.  Nullable, no fill: every stored checkpoint is
    whole.  A release older than the column reads pruned rows as bodies it cannot parse: upgrade
    every process before pruning."""
    add_column(m, m.table_name(CHECKPOINTS_TABLE), Column("pruned_at", DateTime(timezone=True)))


# -- 8: a write's kind in a column, filled in from the reserved task ids of earlier releases ----

#: The task ids under which earlier releases stored each mark (a delivery's id starts so).
_MARK_IDS = {
    "interrupt": "__interrupt__",
    "error": "__error__",
    "claim": "__claim__",
    "cancel": "__cancel__",
}
_DELIVERY_PREFIX = "__delivery__:"


def _add_write_kind_column(m: MigrationContext) -> None:
    """``kind`` on writes (``update`` by default), filled in for the marks stored before it,
    which were told apart by their reserved task ids."""
    name = m.table_name(WRITES_TABLE)
    add_column(m, name, Column("kind", String(16), nullable=False, server_default="update"))
    writes = Table(name, MetaData(), Column("task_id", ID), Column("kind", String(16)))
    for kind, task_id in _MARK_IDS.items():
        m.connection.execute(writes.update().where(writes.c.task_id == task_id).values(kind=kind))
    m.connection.execute(
        writes.update()
        .where(writes.c.task_id.startswith(_DELIVERY_PREFIX, autoescape=True))
        .values(kind="delivery")
    )


# -- 9: checkpoints stored as deltas of their parent ---------------------------------------------

#: What migration 9 gives a stored whole value to spend on deltas: this many times its size
#: (``_delta.BUDGET_FACTOR`` when it shipped; frozen here).
_BUDGET_FACTOR_V9 = 32


def _add_delta_columns(m: MigrationContext) -> None:
    """``base_id``, ``budget`` and ``depth`` on checkpoints: every stored row is whole (no
    ``base_id``), at depth 0, with a budget for the deltas after it of
    ``_BUDGET_FACTOR_V9`` times its body's length (pruned rows: none)."""
    name = m.table_name(CHECKPOINTS_TABLE)
    add_column(m, name, Column("base_id", ID, nullable=True))
    add_column(m, name, Column("budget", BigInteger, nullable=True))
    add_column(m, name, Column("depth", Integer, nullable=True))
    checkpoints = Table(
        name,
        MetaData(),
        Column("thread_id", ID),
        Column("base_id", ID),
        Column("body", Text),
        Column("pruned_at", DateTime(timezone=True)),
        Column("budget", BigInteger),
        Column("depth", Integer),
    )
    c = checkpoints.c
    m.connection.execute(
        checkpoints.update()
        .where(c.pruned_at.is_(None))
        .values(budget=func.length(c.body) * _BUDGET_FACTOR_V9, depth=0)
    )
    Index(f"{m.prefix}ckpt_base_ix", c.thread_id, c.base_id).create(m.connection)


# -- 10: one successor per checkpoint -----------------------------------------------------------


def _add_successor_column(m: MigrationContext) -> None:
    """``successor_of`` on checkpoints, and the unique index on ``(thread_id, successor_of)``:
    a checkpoint has at most one successor.  Each stored checkpoint with a parent that is its
    parent's earliest child (lowest ``seq``) is its successor; its parent's later children were
    forks (or a step of a cancelled run stored after a new run's first, the race this rule
    closes) and stay branches (NULL), so the index can be created whatever the tables hold.
    Nullable: a release older than the column, still running during an upgrade, stores rows
    without it, which the rule does not cover."""
    name = m.table_name(CHECKPOINTS_TABLE)
    add_column(m, name, Column("successor_of", ID, nullable=True))
    checkpoints = Table(
        name,
        MetaData(),
        Column("seq", SEQ),
        Column("thread_id", ID),
        Column("parent_id", ID),
        Column("successor_of", ID),
    )
    c = checkpoints.c
    earliest = (
        select(func.min(c.seq)).where(c.parent_id.is_not(None)).group_by(c.thread_id, c.parent_id)
    )
    m.connection.execute(
        checkpoints.update().where(c.seq.in_(earliest)).values(successor_of=c.parent_id)
    )
    unique = constraint_names(m.prefix).successor
    Index(unique, c.thread_id, c.successor_of, unique=True).create(m.connection)


MIGRATIONS: tuple[Migration, ...] = (
    Migration(1, "checkpoints, writes and timers tables", _create_tables),
    Migration(2, "one checkpoint without a parent per thread", _create_root_index),
    Migration(3, "a checkpoint's kind in a column, filled in from stored bodies", _add_kind_column),
    Migration(4, "a record per run: its thread, graph, status, node and times", create_runs_table),
    Migration(5, "a pruned checkpoint keeps its row, without its state", _add_pruned_at_column),
    Migration(6, "run records set aside by the checkpoint_ttl pass", add_superseded_column),
    Migration(7, "indexes for listing every graph's runs, all or by status", add_listing_indexes),
    Migration(8, "a write's kind in a column, filled in from stored marks", _add_write_kind_column),
    Migration(9, "checkpoints stored as deltas of their parent", _add_delta_columns),
    Migration(10, "one successor per checkpoint", _add_successor_column),
)
#: The version of tables all of :data:`MIGRATIONS` have been applied to.
LATEST_VERSION = len(MIGRATIONS)
