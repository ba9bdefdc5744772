"""Which uniqueness rule refused a checkpoint, and what :class:`CheckpointConflictError` says.

A checkpoint is refused when its thread already has one with the same ``checkpoint_id``
(:attr:`Rule.CHECKPOINT_ID`), the same ``(run_id, step)`` (:attr:`Rule.STEP`), or, for a
checkpoint without a parent, one without a parent (:attr:`Rule.ROOT`), or, for a successor of
its parent (not a :attr:`~langgraph_celery.checkpoint.base.Checkpoint.branch`), another
successor of the same parent (:attr:`Rule.SUCCESSOR`: one successor per checkpoint, so that two
writers going on from one checkpoint, such as a late step of a cancelled run and a new run
started after the cancel, never both become the thread's latest).  Savers share the words.

A SQL database refuses the insert with an ``IntegrityError``, which the SQL saver reads without
parsing any message:

* whether it is a uniqueness violation at all, from the driver's error code (PostgreSQL's
  SQLSTATE ``23505``; SQLite's extended result codes ``SQLITE_CONSTRAINT_UNIQUE`` and
  ``SQLITE_CONSTRAINT_PRIMARYKEY``, on :mod:`sqlite3` errors since Python 3.11);
* which rule, from the name of the violated constraint where the driver reports it (psycopg's
  ``diag.constraint_name``: every constraint and index of the schema is named); SQLite reports
  only the columns, so there the saver looks for the stored row the refused one collides with
  (:func:`rule_of_collision`).  Rows are never updated, so that row is still there unless the
  thread was released in between (then the conflict is reported without naming the rule).
"""

from __future__ import annotations

import enum
import sqlite3
from collections.abc import Sequence
from typing import Any

from langgraph_celery.checkpoint.base import Checkpoint, root_conflict_message

__all__ = [
    "Rule",
    "constraint_name",
    "is_uniqueness_violation",
    "message",
    "rule_of_collision",
]

#: SQLite's extended result codes of a refused UNIQUE or PRIMARY KEY constraint.
_SQLITE_UNIQUE = frozenset(
    {
        getattr(sqlite3, "SQLITE_CONSTRAINT_UNIQUE", 2067),
        getattr(sqlite3, "SQLITE_CONSTRAINT_PRIMARYKEY", 1555),
    }
)
#: SQLSTATE of a unique violation (PostgreSQL, and the SQL standard's class 23).
_UNIQUE_VIOLATION = "23505"


class Rule(enum.Enum):
    """A uniqueness rule of a thread's checkpoints."""

    CHECKPOINT_ID = "checkpoint_id"
    STEP = "step"
    ROOT = "root"
    SUCCESSOR = "successor"


def is_uniqueness_violation(orig: BaseException | None) -> bool | None:
    """Whether the driver's error ``orig`` is a uniqueness violation (``None``: the driver does
    not say, as with drivers other than psycopg and sqlite3)."""
    sqlstate = getattr(orig, "sqlstate", None)
    if isinstance(sqlstate, str):
        return sqlstate == _UNIQUE_VIOLATION
    code = getattr(orig, "sqlite_errorcode", None)
    if isinstance(code, int):
        return code in _SQLITE_UNIQUE
    return None


def constraint_name(orig: BaseException | None) -> str | None:
    """The name of the constraint (or unique index) the driver's error ``orig`` reports."""
    name = getattr(getattr(orig, "diag", None), "constraint_name", None)
    return name if isinstance(name, str) and name else None


def rule_of_collision(
    checkpoint: Checkpoint, stored: Sequence[Any], *, roots_unique: bool
) -> Rule | None:
    """The rule ``checkpoint`` breaks, given the ``stored`` rows of its thread (with
    ``checkpoint_id``, ``run_id``, ``step``, ``parent_id``, ``successor_of``) that share its id,
    its run and step, or its parent as successors, or have no parent.  ``roots_unique``: the
    database enforces one row without a parent per thread (else such a row is no collision).
    Of several rules broken, the first of id, root, step, successor is named (as PostgreSQL,
    which checks the constraints in the order they were created, does)."""
    if any(row.checkpoint_id == checkpoint.checkpoint_id for row in stored):
        return Rule.CHECKPOINT_ID
    root = roots_unique and checkpoint.parent_id is None
    if root and any(row.parent_id is None for row in stored):
        return Rule.ROOT
    if any(row.run_id == checkpoint.run_id and row.step == checkpoint.step for row in stored):
        return Rule.STEP
    parent = checkpoint.successor_of
    if parent is not None and any(row.successor_of == parent for row in stored):
        return Rule.SUCCESSOR
    return None


def message(checkpoint: Checkpoint, rule: Rule | None, held_by: str | None = None) -> str:
    """What the :class:`CheckpointConflictError` for ``checkpoint`` says; ``held_by`` names the
    checkpoint that holds the step, when known."""
    thread, run, step = checkpoint.thread_id, checkpoint.run_id, checkpoint.step
    if rule is Rule.ROOT:
        return root_conflict_message(checkpoint)
    if rule is Rule.CHECKPOINT_ID:
        return (
            f"thread {thread!r} already has a checkpoint with id {checkpoint.checkpoint_id!r} "
            f"(storing run {run!r} step {step}): checkpoint ids must be unique within a thread"
        )
    if rule is Rule.STEP:
        held = "" if held_by is None else f" (checkpoint {held_by!r})"
        return (
            f"thread {thread!r} already has a checkpoint for run {run!r} step {step}{held}: "
            "another writer stored this step first"
        )
    if rule is Rule.SUCCESSOR:
        held = "" if held_by is None else f" ({held_by!r})"
        return (
            f"thread {thread!r} already has a checkpoint{held} that goes on from checkpoint "
            f"{checkpoint.parent_id!r} (storing run {run!r} step {step}): another writer went "
            "on from it first, and a checkpoint has one successor; read the thread's latest "
            "checkpoint and start from there, or name the checkpoint as checkpoint_id to fork "
            "a branch from it"
        )
    return (
        f"thread {thread!r} refused checkpoint {checkpoint.checkpoint_id!r} of run {run!r} step "
        f"{step}: another writer stored a checkpoint with the same id, step, first place or "
        "parent, and the thread was released since; read the thread again"
    )
