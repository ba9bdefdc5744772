"""SqlSaver's one-successor rule (``<prefix>ckpt_successor_uq``), beyond the conformance suite
(``langgraph_celery.testing._successors``, run on every saver by
``test_checkpoint_conformance.py``): every statement that inserts a checkpoint writes
``successor_of`` (``put``, and on PostgreSQL the one-statement inserts that also clear or arm the
run's timer and record its run), so the database enforces the rule whichever path stores a
checkpoint; an in-memory SQLite database (run through SQLAlchemy) enforces it too."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
from sqlalchemy import text

from langgraph_celery.checkpoint import (
    Checkpoint,
    CheckpointConflictError,
    RunRecord,
    RunStatus,
    SqlSaver,
    Timer,
)

T0 = datetime(2026, 2, 3, 4, 5, 6, tzinfo=UTC)


def _column(saver: SqlSaver) -> dict[str, str | None]:
    with saver.engine.connect() as conn:
        rows = conn.execute(
            text(f"SELECT checkpoint_id, successor_of FROM {saver.table_prefix}checkpoints")
        ).all()
    return {row.checkpoint_id: row.successor_of for row in rows}


def _record(run: str, status: RunStatus = RunStatus.RUNNING) -> RunRecord:
    return RunRecord(run, "t1", "g", status, None, T0, T0)


def test_every_insert_of_a_checkpoint_writes_successor_of(sql_saver: SqlSaver) -> None:
    stall = Timer("t1", "r1", "g", "stall", T0 + timedelta(seconds=30))
    stored = [
        # (how it is stored, the checkpoint): a run's first with its timer and record, its
        # steps with none, with the timer cleared, with its record; then a fork (a branch)
        ("arming+recording", Checkpoint("t1", "c0", "r1", -1, {}, parent_id=None)),
        ("put", Checkpoint("t1", "c1", "r1", 0, {}, parent_id="c0")),
        ("clearing", Checkpoint("t1", "c2", "r1", 1, {}, parent_id="c1")),
        ("arming", Checkpoint("t1", "c3", "r1", 2, {}, parent_id="c2")),
        ("clearing+recording", Checkpoint("t1", "c4", "r1", 3, {}, parent_id="c3")),
        ("arming", Checkpoint("t1", "f1", "r2", 0, {}, parent_id="c1", branch=True)),
    ]
    for how, checkpoint in stored:
        if how == "put":
            sql_saver.put(checkpoint)
            continue
        timer = stall if how.startswith("arming") else None
        record = _record(checkpoint.run_id) if how.endswith("recording") else None
        sql_saver.put_with_timer(checkpoint, timer, record)
    assert _column(sql_saver) == {
        "c0": None,
        "c1": "c0",
        "c2": "c1",
        "c3": "c2",
        "c4": "c3",
        "f1": None,
    }
    # each way of storing is refused as the second successor of a checkpoint
    for index, (how, _) in enumerate(stored[1:5]):
        late = Checkpoint("t1", f"late-{index}", f"r-late-{index}", 0, {}, parent_id=f"c{index}")
        with pytest.raises(CheckpointConflictError, match="went on from it first"):
            if how == "put":
                sql_saver.put(late)
            else:
                timer = Timer("t1", late.run_id, "g", "stall", T0) if "arming" in how else None
                record = _record(late.run_id) if "recording" in how else None
                sql_saver.put_with_timer(late, timer, record)
    assert [c.checkpoint_id for c in sql_saver.list("t1")] == ["f1", "c4", "c3", "c2", "c1", "c0"]
    assert sql_saver.get_run("r-late-3") is None  # (refused with its checkpoint)


def test_an_in_memory_sqlite_saver_keeps_the_rule() -> None:
    saver = SqlSaver("sqlite://", table_prefix="mem_")
    try:
        saver.put(Checkpoint("t1", "c0", "r1", -1, {}, parent_id=None))
        saver.put(Checkpoint("t1", "c1", "r1", 0, {}, parent_id="c0"))
        with pytest.raises(CheckpointConflictError, match="went on from it first"):
            saver.put(Checkpoint("t1", "n0", "r2", 0, {}, parent_id="c0"))
        saver.put(Checkpoint("t1", "f0", "r3", 0, {}, parent_id="c0", branch=True))
        assert _column(saver) == {"c0": None, "c1": "c0", "f0": None}
    finally:
        saver.dispose()
