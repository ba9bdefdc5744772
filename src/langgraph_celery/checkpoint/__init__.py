"""Checkpoint savers: the two abstract bases (:class:`BaseCheckpointSaver` stores checkpoints,
:class:`RunIndex` indexes runs for the Celery executor), an in-memory saver and a SQL
(SQLite/PostgreSQL) saver, both implementing both."""

from __future__ import annotations

from langgraph_celery.checkpoint._migrations import SchemaError
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
from langgraph_celery.checkpoint.sql import SqlSaver
from langgraph_celery.errors import CheckpointConflictError

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
