"""What a step of :data:`~langgraph_celery.checkpoint._migration_steps.MIGRATIONS` works with:
:class:`MigrationContext` (the connection, inside the migration's transaction), :class:`Migration`
(a numbered step) and :func:`add_column`, the DDL a step that adds a column runs.  Used by the
steps (:mod:`~langgraph_celery.checkpoint._migration_steps`,
:mod:`~langgraph_celery.checkpoint._migration_steps_runs`) and by
:func:`~langgraph_celery.checkpoint._migrations.migrate`, which applies them.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from sqlalchemy import Column, Connection, MetaData, Table, inspect, text
from sqlalchemy.schema import CreateColumn

__all__ = ["Migration", "MigrationContext", "add_column"]


@dataclass(frozen=True)
class MigrationContext:
    """What a migration works with: a connection inside the migration's transaction."""

    connection: Connection
    prefix: str
    #: The saver's serializer's ``loads``, for migrations that read stored bodies.
    loads: Callable[[str], Any]

    @property
    def dialect(self) -> str:
        return self.connection.dialect.name

    def table_name(self, name: str) -> str:
        return f"{self.prefix}{name}"

    def has_table(self, name: str) -> bool:
        return bool(inspect(self.connection).has_table(self.table_name(name)))


@dataclass(frozen=True)
class Migration:
    version: int
    description: str
    apply: Callable[[MigrationContext], None]


def add_column(m: MigrationContext, table_name: str, new: Column[Any]) -> None:
    """``ALTER TABLE ... ADD COLUMN`` (SQLAlchemy Core has no construct for it): the column's
    DDL as the dialect writes it for ``CREATE TABLE``."""
    Table(table_name, MetaData(), new)
    dialect = m.connection.dialect
    spec = CreateColumn(new).compile(dialect=dialect)
    quoted = dialect.identifier_preparer.quote(table_name)
    m.connection.execute(text(f"ALTER TABLE {quoted} ADD COLUMN {spec}"))
