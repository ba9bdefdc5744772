"""Checkpoint savers: the two abstract bases (:class:`BaseCheckpointSaver` stores checkpoints,
:class:`RunIndex` indexes runs for the Celery executor), an in-memory saver and a SQL
(SQLite/PostgreSQL) saver, both implementing both."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from langgraph_celery.checkpoint._retention import Keep, Kept, PruneResult
from langgraph_celery.checkpoint.base import (
    BaseCheckpointSaver,
    Checkpoint,
    CheckpointKind,
    CheckpointView,
    PendingTask,
    PendingWrite,
    Timer,
    WriteKind,
)
from langgraph_celery.checkpoint.index import RunIndex, RunRecord, RunStatus
from langgraph_celery.checkpoint.memory import MemorySaver
from langgraph_celery.errors import CheckpointConflictError, SchemaError

if TYPE_CHECKING:
    from langgraph_celery.checkpoint.sql import SqlSaver

__all__ = [
    "BaseCheckpointSaver",
    "Checkpoint",
    "CheckpointConflictError",
    "CheckpointKind",
    "CheckpointView",
    "Keep",
    "Kept",
    "MemorySaver",
    "PendingTask",
    "PendingWrite",
    "PruneResult",
    "RunIndex",
    "RunRecord",
    "RunStatus",
    "SchemaError",
    "SqlSaver",
    "Timer",
    "WriteKind",
]


def __getattr__(name: str) -> Any:
    # SqlSaver imports SQLAlchemy (a third of a second): only a program that uses it pays.
    if name == "SqlSaver":
        from langgraph_celery.checkpoint.sql import SqlSaver

        return SqlSaver
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
