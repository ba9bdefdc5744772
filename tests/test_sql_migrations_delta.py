"""Migration 9 (checkpoints stored as deltas) on tables a release at schema version 8 filled
with whole bodies: every checkpoint reads back unchanged, and the thread runs on, its new
checkpoints stored as deltas of the migrated ones, read back as a run on a fresh store reads."""

from __future__ import annotations

from typing import Any

import pytest
from sqlalchemy import DateTime, Integer, String, Text, inspect, text
from sqlalchemy.sql import column, table

from langgraph_celery import (
    END,
    START,
    Channel,
    Channels,
    CompileConfig,
    RemoveByHash,
    RunnableConfig,
    StateGraph,
)
from langgraph_celery.checkpoint import (
    BaseCheckpointSaver,
    Checkpoint,
    MemorySaver,
    SqlSaver,
    _migrations,
)
from langgraph_celery.checkpoint._migrations import LATEST_VERSION, MIGRATIONS, migrate
from langgraph_celery.graph.compiled import CompiledGraph
from langgraph_celery.serde import JsonSerializer


def _graph(saver: BaseCheckpointSaver) -> CompiledGraph:
    graph = StateGraph(
        {"messages": Channels.appender(), "count": Channel(lambda a, b: a + b, default=lambda: 0)}
    )
    previous = START
    for index in range(4):

        def node(state: Any, config: Any, index: int = index) -> dict[str, Any]:
            update: dict[str, Any] = {"messages": [f"m{index}"], "count": 1, "last": index}
            if index == 2:
                update["messages"] = [RemoveByHash("m0"), "m2"]
            return update

        graph.add_node(f"n{index}", node)
        graph.add_edge(previous, f"n{index}")
        previous = f"n{index}"
    graph.add_edge(previous, END)
    return graph.compile(CompileConfig(checkpoint_saver=saver))


def _conversation(app: CompiledGraph, turns: range) -> None:
    config = RunnableConfig(thread_id="t1")
    for turn in turns:
        app.invoke({"messages": [f"user {turn}"]}, config)


def _store_as_version_8(saver: SqlSaver, checkpoints: list[Checkpoint]) -> None:
    """Insert ``checkpoints`` (oldest first) as a release at schema version 8 stored them:
    whole bodies, no chain columns."""
    prefix, serializer = saver.table_prefix, JsonSerializer()
    rows = table(
        f"{prefix}checkpoints",
        *(column(name, String) for name in ("thread_id", "checkpoint_id", "run_id", "parent_id")),
        column("step", Integer),
        column("created_at", DateTime(timezone=True)),
        column("body", Text),
        column("kind", String),
    )
    with saver.engine.begin() as conn:
        for checkpoint in checkpoints:
            conn.execute(
                rows.insert().values(
                    thread_id=checkpoint.thread_id,
                    checkpoint_id=checkpoint.checkpoint_id,
                    run_id=checkpoint.run_id,
                    parent_id=checkpoint.parent_id,
                    step=checkpoint.step,
                    created_at=checkpoint.created_at,
                    body=serializer.dumps(checkpoint.body()),
                    kind=checkpoint.kind.value,
                )
            )


def test_whole_bodies_of_version_8_read_back_and_the_thread_runs_on_in_deltas(
    sql_saver: SqlSaver, monkeypatch: pytest.MonkeyPatch
) -> None:
    engine, prefix = sql_saver.engine, sql_saver.table_prefix
    with monkeypatch.context() as patched:
        patched.setattr(_migrations, "MIGRATIONS", MIGRATIONS[:8])
        patched.setattr(_migrations, "LATEST_VERSION", 8)
        assert migrate(engine, prefix, JsonSerializer().loads, sql_saver._serial) == 8
    assert "base_id" not in {c["name"] for c in inspect(engine).get_columns(f"{prefix}checkpoints")}
    # the thread as the earlier release left it: three conversation turns, stored whole
    earlier = MemorySaver()
    _conversation(_graph(earlier), range(3))
    old = list(earlier.list("t1"))
    _store_as_version_8(sql_saver, old[::-1])

    sql_saver.setup()

    with engine.connect() as conn:
        versions = conn.execute(text(f"SELECT max(version) FROM {prefix}schema_version")).all()
    assert versions == [(LATEST_VERSION,)]
    assert list(sql_saver.list("t1")) == old
    for checkpoint in old:
        assert sql_saver.get("t1", checkpoint.checkpoint_id) == checkpoint

    # the thread runs on: its next checkpoints are deltas of the migrated whole ones
    _conversation(_graph(sql_saver), range(3, 6))
    with engine.connect() as conn:
        deltas = conn.execute(
            text(f"SELECT count(*) FROM {prefix}checkpoints WHERE base_id IS NOT NULL")
        ).scalar()
    # (15 new checkpoints, each turn an input and four steps; those whose delta outgrows the
    # budget of a state this small are stored whole)
    assert 10 <= deltas <= 15
    fresh = MemorySaver()
    _conversation(_graph(fresh), range(6))
    again = SqlSaver(engine, table_prefix=prefix)  # (a cold cache: chains read from the rows)
    assert [c.values for c in again.list("t1")] == [c.values for c in fresh.list("t1")]
    latest = again.get("t1")
    assert latest is not None and latest.values["count"] == 24
    assert latest.values["messages"][-4:] == ["user 5", "m1", "m2", "m3"]
