"""Migrations 5 and 6 (retention) on tables a release at schema version 4 filled: every
checkpoint and run record reads back unchanged, none is pruned or set aside, and the migrated
thread can be pruned and found by the ``checkpoint_ttl`` pass."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
from sqlalchemy import DateTime, Integer, String, Text, inspect, text
from sqlalchemy.sql import column, table

from langgraph_celery.checkpoint import (
    Checkpoint,
    CheckpointConflictError,
    Keep,
    PendingTask,
    PendingWrite,
    RunRecord,
    RunStatus,
    SqlSaver,
    WriteKind,
    _migrations,
)
from langgraph_celery.checkpoint._migrations import LATEST_VERSION, MIGRATIONS, migrate
from langgraph_celery.serde import JsonSerializer

T0 = datetime(2026, 3, 4, 5, 6, 7, tzinfo=UTC)


def _fill_version_4(saver: SqlSaver) -> list[Checkpoint]:
    """Rows as a release at schema version 4 stored them (no ``pruned_at``, no
    ``superseded``): a run that completed, then one that stopped before ``b``."""
    prefix, serializer = saver.table_prefix, JsonSerializer()
    checkpoints = table(
        f"{prefix}checkpoints",
        *(column(name, String) for name in ("thread_id", "checkpoint_id", "run_id", "parent_id")),
        column("step", Integer),
        column("created_at", DateTime(timezone=True)),
        column("body", Text),
        column("kind", String),
    )
    writes = table(
        f"{prefix}writes",
        *(column(name, String) for name in ("thread_id", "checkpoint_id", "task_id", "node")),
        column("seq", Integer),
        column("body", Text),
        column("created_at", DateTime(timezone=True)),
    )
    runs = table(
        f"{prefix}runs",
        *(column(name, String) for name in ("run_id", "thread_id", "graph_id", "status", "node")),
        column("created_at", DateTime(timezone=True)),
        column("updated_at", DateTime(timezone=True)),
    )
    stored = []
    parent = None
    rows = [("c0", "r1", 0, False), ("c1", "r1", 1, False), ("c2", "r2", 2, True)]
    with saver.engine.begin() as conn:
        for index, (checkpoint_id, run_id, step, pending) in enumerate(rows):
            checkpoint = Checkpoint(
                thread_id="t1",
                checkpoint_id=checkpoint_id,
                run_id=run_id,
                step=step,
                values={"log": ["a"] * index},
                tasks=(PendingTask("task-b", "b"),) if pending else (),
                parent_id=parent,
                created_at=T0 + timedelta(seconds=index),
            )
            conn.execute(
                checkpoints.insert().values(
                    thread_id="t1",
                    checkpoint_id=checkpoint_id,
                    run_id=run_id,
                    step=step,
                    parent_id=parent,
                    created_at=checkpoint.created_at,
                    body=serializer.dumps(checkpoint.body()),
                    kind=checkpoint.kind.value,
                )
            )
            stored.append(checkpoint)
            parent = checkpoint_id
        conn.execute(
            writes.insert().values(
                thread_id="t1",
                checkpoint_id="c2",
                task_id="__interrupt__",
                node="b",
                seq=1,
                body=serializer.dumps({"node_id": "b"}),
                created_at=T0,
            )
        )
        for run_id, thread_id, status in (
            ("r1", "t1", "completed"),
            ("r2", "t1", "parked"),
            ("r3", "t2", "completed"),  # (a thread of its own, whose checkpoints are elsewhere)
        ):
            at = T0 + timedelta(seconds=int(run_id[1]))
            conn.execute(
                runs.insert().values(
                    run_id=run_id,
                    thread_id=thread_id,
                    graph_id="g",
                    status=status,
                    node=None,
                    created_at=at,
                    updated_at=at,
                )
            )
    return stored[::-1]


def test_tables_at_version_4_are_migrated_and_pruned(
    sql_saver: SqlSaver, monkeypatch: pytest.MonkeyPatch
) -> None:
    engine, prefix = sql_saver.engine, sql_saver.table_prefix
    with monkeypatch.context() as patched:
        patched.setattr(_migrations, "MIGRATIONS", MIGRATIONS[:4])
        patched.setattr(_migrations, "LATEST_VERSION", 4)
        serial = sql_saver._serial
        assert migrate(engine, prefix, JsonSerializer().loads, serial) == 4
    assert "pruned_at" not in {
        c["name"] for c in inspect(engine).get_columns(f"{prefix}checkpoints")
    }
    expected = _fill_version_4(sql_saver)

    sql_saver.setup()

    with engine.connect() as conn:
        versions = conn.execute(text(f"SELECT version FROM {prefix}schema_version")).all()
        flags = conn.execute(text(f"SELECT superseded FROM {prefix}runs")).all()
    assert (
        sorted(v for (v,) in versions)
        == list(range(1, LATEST_VERSION + 1))
        == [1, 2, 3, 4, 5, 6, 7, 8, 9, 10]
    )
    assert [bool(flag) for (flag,) in flags] == [False, False, False]
    assert list(sql_saver.list("t1")) == expected
    # (migration 8 reads the mark stored under its reserved task id as an interrupt)
    interrupt = PendingWrite("__interrupt__", "b", {"node_id": "b"}, WriteKind.INTERRUPT)
    assert sql_saver.get_writes("t1", "c2") == [interrupt]
    assert sql_saver.get_run("r1") == RunRecord(
        "r1",
        "t1",
        "g",
        RunStatus.COMPLETED,
        None,
        T0 + timedelta(seconds=1),
        T0 + timedelta(seconds=1),
    )
    # r1 was superseded by r2 (newer, parked): the ttl pass finds only t2's run
    assert [r.run_id for r in sql_saver.completed_runs("g", T0 + timedelta(days=1))] == ["r3"]

    result = sql_saver.prune("t1", keep_last=1)
    assert [(k.checkpoint_id, k.reason) for k in result.kept] == [
        ("c2", Keep.LAST),
        ("c1", Keep.PARENT),
    ]
    assert result.deleted == ("c0",)
    assert list(sql_saver.list("t1")) == expected[:2]
    with pytest.raises(CheckpointConflictError):
        sql_saver.put(Checkpoint("t1", "c0", "r9", 0, {}, parent_id="c2"))
