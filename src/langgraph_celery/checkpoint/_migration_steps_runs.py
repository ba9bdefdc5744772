"""The steps of :data:`~langgraph_celery.checkpoint._migration_steps.MIGRATIONS` that make and
index ``<prefix>runs``, the run records of :class:`~langgraph_celery.checkpoint.sql.SqlSaver`'s run
index (migrations 4, 6 and 7); the others are in
:mod:`~langgraph_celery.checkpoint._migration_steps`, which lists them all.  Migrations are
history: never edit one that has shipped; add the next.
"""

from __future__ import annotations

from sqlalchemy import (
    Boolean,
    Column,
    DateTime,
    Enum,
    Index,
    MetaData,
    PrimaryKeyConstraint,
    String,
    Table,
    false,
)

from langgraph_celery.checkpoint._migration_context import MigrationContext, add_column
from langgraph_celery.checkpoint._schema import ID, RUNS_TABLE

__all__ = ["add_listing_indexes", "add_superseded_column", "create_runs_table"]


# -- 4: a record per run ------------------------------------------------------------------------


def create_runs_table(m: MigrationContext) -> None:
    """One row per run: thread, graph, status (checked), current or pending node, times."""
    Table(
        m.table_name(RUNS_TABLE),
        MetaData(),
        Column("run_id", ID, nullable=False),
        Column("thread_id", ID, nullable=False),
        Column("graph_id", ID, nullable=False),
        Column(
            "status",
            Enum(
                *("running", "parked", "failed", "completed", "cancelled"),
                native_enum=False,
                create_constraint=True,
                length=16,
                name=f"{m.prefix}runs_status_ck",
            ),
            nullable=False,
        ),
        Column("node", ID, nullable=True),
        Column("created_at", DateTime(timezone=True), nullable=False),
        Column("updated_at", DateTime(timezone=True), nullable=False),
        PrimaryKeyConstraint("run_id", name=f"{m.prefix}{RUNS_TABLE}_pkey"),
        Index(f"{m.prefix}runs_graph_ix", "graph_id", "created_at", "run_id"),
        Index(f"{m.prefix}runs_status_ix", "graph_id", "status", "created_at", "run_id"),
        Index(f"{m.prefix}runs_thread_ix", "thread_id"),
    ).create(m.connection)


# -- 6: finding threads whose last run completed long ago --------------------------------------


def add_superseded_column(m: MigrationContext) -> None:
    """``superseded`` on runs (false for every stored record: the reaper's ``checkpoint_ttl``
    pass sets it as it finds threads that went on), and the index that pass reads."""
    name = m.table_name(RUNS_TABLE)
    add_column(m, name, Column("superseded", Boolean, nullable=False, server_default=false()))
    runs = Table(
        name,
        MetaData(),
        Column("graph_id", ID),
        Column("status", String(16)),
        Column("superseded", Boolean),
        Column("updated_at", DateTime(timezone=True)),
    )
    Index(
        f"{m.prefix}runs_expiry_ix",
        runs.c.graph_id,
        runs.c.status,
        runs.c.superseded,
        runs.c.updated_at,
    ).create(m.connection)


# -- 7: listing every graph's runs, all or by status, stays fast as the table grows ------------


def add_listing_indexes(m: MigrationContext) -> None:
    """Indexes for ``list_runs`` without a graph: newest first, all or by status (with a graph
    the indexes of migration 4 serve)."""
    runs = Table(
        m.table_name(RUNS_TABLE),
        MetaData(),
        Column("run_id", ID),
        Column("status", String(16)),
        Column("created_at", DateTime(timezone=True)),
    )
    Index(f"{m.prefix}runs_created_ix", runs.c.created_at, runs.c.run_id).create(m.connection)
    Index(f"{m.prefix}runs_any_status_ix", runs.c.status, runs.c.created_at, runs.c.run_id).create(
        m.connection
    )
