"""A saver of the kind a third party writes first: it stores checkpoints and pending writes
(through a MemorySaver) and implements nothing else (no run index, no retention)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from langgraph_celery.checkpoint import (
    BaseCheckpointSaver,
    Checkpoint,
    MemorySaver,
    PendingWrite,
    WriteKind,
)

__all__ = ["StorageOnly"]


class StorageOnly(BaseCheckpointSaver):
    def __init__(self) -> None:
        super().__init__()
        self.inner = MemorySaver()

    def put(self, checkpoint: Checkpoint) -> Checkpoint:
        return self.inner.put(checkpoint)

    def get(self, thread_id: str, checkpoint_id: str | None = None) -> Checkpoint | None:
        return self.inner.get(thread_id, checkpoint_id)

    def list(self, thread_id: str) -> Sequence[Checkpoint]:
        return self.inner.list(thread_id)

    def put_writes(
        self,
        thread_id: str,
        checkpoint_id: str,
        task_id: str,
        node: str,
        update: Any,
        kind: WriteKind = WriteKind.UPDATE,
    ) -> bool:
        return self.inner.put_writes(thread_id, checkpoint_id, task_id, node, update, kind)

    def get_writes(self, thread_id: str, checkpoint_id: str) -> Sequence[PendingWrite]:
        return self.inner.get_writes(thread_id, checkpoint_id)

    def release(self, thread_id: str) -> Sequence[Checkpoint]:
        return self.inner.release(thread_id)
