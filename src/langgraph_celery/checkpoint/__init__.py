"""Checkpoint savers: the abstract base, an in-memory saver and a SQL (SQLite/PostgreSQL) saver."""

from __future__ import annotations

from langgraph_celery.checkpoint._migrations import SchemaError
from langgraph_celery.checkpoint.base import (
    BaseCheckpointSaver,
    Checkpoint,
    CheckpointKind,
    CheckpointView,
    PendingTask,
    PendingWrite,
    Timer,
)
from langgraph_celery.checkpoint.memory import MemorySaver
from langgraph_celery.checkpoint.sql import SqlSaver
from langgraph_celery.errors import CheckpointConflictError

__all__ = [
    "BaseCheckpointSaver",
    "Checkpoint",
    "CheckpointConflictError",
    "CheckpointKind",
    "CheckpointView",
    "MemorySaver",
    "PendingTask",
    "PendingWrite",
    "SchemaError",
    "SqlSaver",
    "Timer",
]
