"""What a node or resume task returns to Celery's result backend when it does not fail.

A node that fails for good makes its task fail (``FAILURE``, with the error); everything else a
task can end with is one :class:`TaskResult`, stored as JSON.  Clients never read it to follow a
run (the checkpoint store is the source of truth); it is there for Flower, logs and tests.

It stays small: ids, the step and the next nodes; the reduced state only in the result of the
task whose step ended the run (the run's final state, as a Celery chain's last result).  A run
with ``durability="exit"`` or ``"async"`` carries the state its next step needs in the result
backend too, under a key of its own (``worker/carry.py``: one per run at a time).  Every result
expires after the app's ``result_expires`` (one hour unless the app sets it: ``SAFE_SETTINGS``).
"""

from __future__ import annotations

import enum
from dataclasses import dataclass, field
from typing import Any

__all__ = ["TaskResult", "TaskStatus"]


class TaskStatus(enum.StrEnum):
    """How a node or resume task ended."""

    #: the task's update was the last of its step: it stored the next checkpoint
    MERGED = "merged"
    #: (durability "exit") the task's update was the last of its step: the next checkpoint is
    #: carried in the result backend to the next step's task, not stored
    CARRIED = "carried"
    #: the task recorded its update; other tasks of the step have not yet
    WRITTEN = "written"
    #: another writer stored this step's next checkpoint first (its update is in it)
    MERGED_ELSEWHERE = "merged-elsewhere"
    #: the step was already committed: a redelivered or duplicated message
    DUPLICATE = "duplicate"
    #: the node asked to stop (``GraphInterrupt``): the run is parked
    INTERRUPTED = "interrupted"
    #: the step stopped (a sibling parked or failed the run, or it was cancelled)
    STOPPED = "stopped"
    #: the run was cancelled while the previous step was finishing: it stops here
    CANCELLED = "cancelled"
    #: the checkpoint the message names no longer exists (the thread was released)
    STALE = "stale"
    #: the message names a task its checkpoint does not have, or a checkpoint that is not a
    #: pending resume: refused, nothing ran
    REJECTED = "rejected"
    #: (resume task) the resumed checkpoint's work was dispatched
    DISPATCHED = "dispatched"
    #: (a compiled subgraph node's task) its child run was started or resumed; the child's end
    #: commits the step
    CHILD_STARTED = "child-started"


@dataclass(frozen=True)
class TaskResult:
    """A task's result; ``state`` (the final state) only when it committed the run's last
    step."""

    status: TaskStatus
    node: str | None = None
    checkpoint_id: str | None = None
    step: int | None = None
    next: tuple[str, ...] = ()
    state: dict[str, Any] | None = field(default=None, repr=False)

    def to_data(self) -> dict[str, Any]:
        data: dict[str, Any] = {"status": self.status.value}
        if self.node is not None:
            data["node"] = self.node
        if self.checkpoint_id is not None:
            data["checkpoint_id"] = self.checkpoint_id
        if self.step is not None:
            data["step"] = self.step
            data["next"] = list(self.next)
        if self.state is not None:
            data["state"] = self.state
        return data
