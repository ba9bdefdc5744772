"""Migration 10 (one successor per checkpoint) on tables a release at schema version 9 filled,
forks included: every checkpoint reads back unchanged, each parent's earliest child is its
successor (its later children, forks of their time, are branches), and from then on the
database refuses a second successor of a checkpoint while it takes branches."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
from sqlalchemy import BigInteger, DateTime, Integer, String, Text, inspect, text
from sqlalchemy.sql import column, table

from langgraph_celery.checkpoint import (
    Checkpoint,
    CheckpointConflictError,
    CheckpointKind,
    PendingTask,
    SqlSaver,
    _migrations,
)
from langgraph_celery.checkpoint._migrations import LATEST_VERSION, MIGRATIONS, migrate
from langgraph_celery.serde import JsonSerializer

T0 = datetime(2026, 5, 6, 7, 8, 9, tzinfo=UTC)
_TASK = (PendingTask("task-b", "b"),)

#: (checkpoint id, run, step, parent, kind), in the order the release stored them: a run, a
#: fork of its first checkpoint (time travel) and that fork's step, a second fork of it, and
#: another thread's run; c0 ends with three children, the earliest of which is c1.
_ROWS = [
    ("t1", "c0", "r1", -1, None, CheckpointKind.INPUT),
    ("t1", "c1", "r1", 0, "c0", CheckpointKind.LOOP),
    ("t1", "c2", "r1", 1, "c1", CheckpointKind.LOOP),
    ("t1", "f1", "r2", 0, "c0", CheckpointKind.FORK),
    ("t1", "f2", "r2", 1, "f1", CheckpointKind.LOOP),
    ("t1", "g1", "r3", 0, "c0", CheckpointKind.UPDATE),
    ("t2", "c0", "r9", -1, None, CheckpointKind.INPUT),
    ("t2", "c1", "r9", 0, "c0", CheckpointKind.LOOP),
]


def _store_as_version_9(saver: SqlSaver) -> dict[str, list[Checkpoint]]:
    """Insert ``_ROWS`` as a release at schema version 9 stored them (whole bodies, their chain
    columns, no ``successor_of``); the checkpoints by thread, newest first."""
    prefix, serializer = saver.table_prefix, JsonSerializer()
    rows = table(
        f"{prefix}checkpoints",
        *(column(name, String) for name in ("thread_id", "checkpoint_id", "run_id", "parent_id")),
        column("step", Integer),
        column("created_at", DateTime(timezone=True)),
        column("body", Text),
        column("kind", String),
        column("budget", BigInteger),
        column("depth", Integer),
    )
    stored: dict[str, list[Checkpoint]] = {}
    with saver.engine.begin() as conn:
        for index, (thread, checkpoint_id, run, step, parent, kind) in enumerate(_ROWS):
            checkpoint = Checkpoint(
                thread_id=thread,
                checkpoint_id=checkpoint_id,
                run_id=run,
                step=step,
                values={"log": [checkpoint_id] * (index + 1)},
                tasks=_TASK,
                parent_id=parent,
                metadata={"source": kind.value},
                created_at=T0 + timedelta(seconds=index),
                kind=kind,
            )
            body = serializer.dumps(checkpoint.body())
            conn.execute(
                rows.insert().values(
                    thread_id=thread,
                    checkpoint_id=checkpoint_id,
                    run_id=run,
                    parent_id=parent,
                    step=step,
                    created_at=checkpoint.created_at,
                    body=body,
                    kind=kind.value,
                    budget=len(body) * 32,
                    depth=0,
                )
            )
            stored.setdefault(thread, []).insert(0, checkpoint)
    return stored


def _successor_column(saver: SqlSaver) -> dict[tuple[str, str], str | None]:
    with saver.engine.connect() as conn:
        rows = conn.execute(
            text(
                f"SELECT thread_id, checkpoint_id, successor_of FROM {saver.table_prefix}"
                "checkpoints"
            )
        ).all()
    return {(row.thread_id, row.checkpoint_id): row.successor_of for row in rows}


def test_tables_of_version_9_with_forks_migrate_and_keep_one_successor_per_checkpoint(
    sql_saver: SqlSaver, monkeypatch: pytest.MonkeyPatch
) -> None:
    engine, prefix = sql_saver.engine, sql_saver.table_prefix
    with monkeypatch.context() as patched:
        patched.setattr(_migrations, "MIGRATIONS", MIGRATIONS[:9])
        patched.setattr(_migrations, "LATEST_VERSION", 9)
        assert migrate(engine, prefix, JsonSerializer().loads, sql_saver._serial) == 9
    columns = {c["name"] for c in inspect(engine).get_columns(f"{prefix}checkpoints")}
    assert "successor_of" not in columns and "base_id" in columns
    stored = _store_as_version_9(sql_saver)

    sql_saver.setup()

    with engine.connect() as conn:
        versions = conn.execute(text(f"SELECT max(version) FROM {prefix}schema_version")).all()
    assert versions == [(LATEST_VERSION,)] == [(10,)]
    for thread, checkpoints in stored.items():  # every checkpoint reads back unchanged
        assert list(sql_saver.list(thread)) == checkpoints
        for checkpoint in checkpoints:
            assert sql_saver.get(thread, checkpoint.checkpoint_id) == checkpoint
    # each parent's earliest child is its successor; the forks after it are branches
    assert _successor_column(sql_saver) == {
        ("t1", "c0"): None,
        ("t1", "c1"): "c0",
        ("t1", "c2"): "c1",
        ("t1", "f1"): None,
        ("t1", "f2"): "f1",
        ("t1", "g1"): None,
        ("t2", "c0"): None,
        ("t2", "c1"): "c0",
    }

    # from now on the database keeps one successor per checkpoint, and takes branches
    for parent in ("c0", "c1", "f1"):  # (each has its successor)
        late = Checkpoint("t1", f"late-{parent}", "r4", 5, {}, parent_id=parent)
        with pytest.raises(CheckpointConflictError, match="went on from it first"):
            sql_saver.put(late)
    fork = sql_saver.put(Checkpoint("t1", "f3", "r5", 0, {}, parent_id="c0", branch=True))
    assert sql_saver.get("t1") == fork
    step = sql_saver.put(Checkpoint("t1", "c3", "r1", 2, {}, parent_id="c2"))
    with pytest.raises(CheckpointConflictError, match="went on from it first"):
        sql_saver.put(
            Checkpoint("t1", "n0", "r6", 2, {}, parent_id="c2", kind=CheckpointKind.INPUT)
        )
    assert list(sql_saver.list("t1")) == [step, fork, *stored["t1"]]
    assert sql_saver.put(Checkpoint("t2", "c2", "r9", 1, {}, parent_id="c1")).parent_id == "c1"
