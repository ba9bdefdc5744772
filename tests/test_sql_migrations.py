"""SqlSaver's schema versions: tables made by earlier releases are migrated by ``setup()`` and
every checkpoint reads back unchanged; migrations are applied once, in order, atomically, also
when processes set up at once; the migrated tables are the ones the saver describes.

The tables of earlier releases are built here from their DDL, copied as those releases emitted
it (SQLAlchemy's output for SQLite and PostgreSQL), and filled as they filled them.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from sqlalchemy import (
    Column,
    DateTime,
    Engine,
    Integer,
    MetaData,
    String,
    Table,
    Text,
    UniqueConstraint,
    inspect,
    text,
)
from sqlalchemy.exc import IntegrityError
from sqlalchemy.sql import column, table

from langgraph_celery.checkpoint import (
    Checkpoint,
    CheckpointConflictError,
    CheckpointKind,
    PendingTask,
    PendingWrite,
    RunStatus,
    SqlSaver,
    Timer,
    _migrations,
)
from langgraph_celery.checkpoint._migrations import (
    LATEST_VERSION,
    MIGRATIONS,
    Migration,
    MigrationContext,
    SchemaError,
)
from langgraph_celery.checkpoint._schema import build_tables
from langgraph_celery.serde import JsonSerializer

# -- the tables of earlier releases -----------------------------------------------------------

#: cf4aa3d (the release before schema versions): what its ``setup()`` emitted.
_RELEASE_CF4AA3D = [
    """CREATE TABLE {p}checkpoints (
        seq {seq} NOT NULL,
        thread_id VARCHAR(255) NOT NULL,
        checkpoint_id VARCHAR(255) NOT NULL,
        run_id VARCHAR(255) NOT NULL,
        step INTEGER NOT NULL,
        parent_id VARCHAR(255),
        created_at {ts} NOT NULL,
        body TEXT NOT NULL,
        PRIMARY KEY (seq),
        CONSTRAINT {p}ckpt_id_uq UNIQUE (thread_id, checkpoint_id),
        CONSTRAINT {p}ckpt_step_uq UNIQUE (thread_id, run_id, step)
    )""",
    "CREATE INDEX {p}ckpt_run_ix ON {p}checkpoints (run_id)",
    "CREATE INDEX {p}ckpt_thread_seq_ix ON {p}checkpoints (thread_id, seq)",
    """CREATE TABLE {p}writes (
        thread_id VARCHAR(255) NOT NULL,
        checkpoint_id VARCHAR(255) NOT NULL,
        task_id VARCHAR(255) NOT NULL,
        node VARCHAR(255) NOT NULL,
        seq BIGINT NOT NULL,
        body TEXT NOT NULL,
        created_at {ts} NOT NULL,
        CONSTRAINT {p}writes_pk PRIMARY KEY (thread_id, checkpoint_id, task_id)
    )""",
    """CREATE TABLE {p}timers (
        thread_id VARCHAR(255) NOT NULL,
        run_id VARCHAR(255) NOT NULL,
        graph_id VARCHAR(255) NOT NULL,
        kind VARCHAR(16) NOT NULL,
        due_at {ts} NOT NULL,
        PRIMARY KEY (thread_id)
    )""",
    "CREATE INDEX {p}timers_due_ix ON {p}timers (due_at)",
    "CREATE UNIQUE INDEX {p}ckpt_root_uq ON {p}checkpoints (thread_id) WHERE parent_id IS NULL",
]

#: eb29c94 (the first release): two tables, no run index, no timers, no first-checkpoint guard.
_RELEASE_EB29C94 = [
    _RELEASE_CF4AA3D[0],
    _RELEASE_CF4AA3D[2],
    _RELEASE_CF4AA3D[3],
]

_RELEASES = {"cf4aa3d": _RELEASE_CF4AA3D, "eb29c94": _RELEASE_EB29C94}
_TYPES = {
    "sqlite": {"seq": "INTEGER", "ts": "DATETIME"},
    "postgresql": {"seq": "BIGSERIAL", "ts": "TIMESTAMP WITH TIME ZONE"},
}

T0 = datetime(2026, 3, 4, 5, 6, 7, 891011, tzinfo=UTC)


def _build_release(engine: Engine, prefix: str, release: str) -> None:
    types = _TYPES[engine.dialect.name]
    with engine.begin() as conn:
        for ddl in _RELEASES[release]:
            conn.execute(text(ddl.format(p=prefix, **types)))


def _old_tables(prefix: str) -> tuple[Any, Any, Any]:
    """Lightweight descriptions of the old tables, with the column types the old release bound
    its values with (SQLite keeps timestamps as text)."""
    checkpoints = table(
        f"{prefix}checkpoints",
        column("thread_id", String),
        column("checkpoint_id", String),
        column("run_id", String),
        column("step", Integer),
        column("parent_id", String),
        column("created_at", DateTime(timezone=True)),
        column("body", Text),
    )
    writes = table(
        f"{prefix}writes",
        column("thread_id", String),
        column("checkpoint_id", String),
        column("task_id", String),
        column("node", String),
        column("seq", Integer),
        column("body", Text),
        column("created_at", DateTime(timezone=True)),
    )
    timers = table(
        f"{prefix}timers",
        column("thread_id", String),
        column("run_id", String),
        column("graph_id", String),
        column("kind", String),
        column("due_at", DateTime(timezone=True)),
    )
    return checkpoints, writes, timers


def _old_body(
    values: dict[str, Any],
    *,
    metadata: dict[str, Any],
    kind: str | None,
    tasks: list[dict[str, Any]] | None = None,
    node: str | None = None,
    extra: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """A body as the old releases' ``Checkpoint.body()`` made it (``kind`` since cf4aa3d)."""
    body: dict[str, Any] = {
        "values": values,
        "tasks": tasks or [],
        "node": node,
        "extra": extra or {},
        "metadata": metadata,
    }
    if kind is not None:
        body["kind"] = kind
    return body


def _fill_release(engine: Engine, prefix: str, release: str) -> list[Checkpoint]:
    """Store what a run of the old release stored: checkpoints, a write, a timer.  Returns the
    checkpoints as the new code must read them, newest first."""
    serializer = JsonSerializer()
    checkpoints, writes, timers = _old_tables(prefix)
    since_kinds = release == "cf4aa3d"
    rows = [
        # (checkpoint id, step, parent, kind in the body since cf4aa3d, the metadata, values,
        #  the kind the new code reads)
        ("c0", -1, None, "input", {"source": "input"}, {"m": ["hi"], "when": T0}, "input"),
        ("c1", 0, "c0", "loop", {}, {"m": ["hi", "yo"], "pair": (1, 2)}, "loop"),
        ("c2", 1, "c1", "edges", {"source": "update"}, {"m": ["yo"], "set": {3}}, "edges"),
    ]
    if not since_kinds:  # (before kinds: the metadata's source, else loop)
        rows[2] = (*rows[2][:-1], "update")
    expected = []
    with engine.begin() as conn:
        for index, (checkpoint_id, step, parent, kind, metadata, values, read) in enumerate(rows):
            tasks = [{"id": f"task-{index}", "node": "agent"}]
            if index == 2:
                tasks.append({"id": "send-1", "node": "tool", "arg": {"q": 1}})
            body = _old_body(
                values,
                metadata=metadata,
                kind=kind if since_kinds else None,
                tasks=tasks,
                node=None if index == 0 else "agent",
                extra={"barrier": ["a"]} if index == 1 else None,
            )
            created = T0 + timedelta(seconds=index)
            conn.execute(
                checkpoints.insert().values(
                    thread_id="t1",
                    checkpoint_id=checkpoint_id,
                    run_id="r1",
                    step=step,
                    parent_id=parent,
                    created_at=created,
                    body=serializer.dumps(body),
                )
            )
            expected.append(
                Checkpoint(
                    thread_id="t1",
                    checkpoint_id=checkpoint_id,
                    run_id="r1",
                    step=step,
                    values=values,
                    tasks=tuple(PendingTask.from_data(task) for task in tasks),
                    parent_id=parent,
                    node=body["node"],
                    extra=body["extra"],
                    metadata=metadata,
                    created_at=created,
                    kind=CheckpointKind(read),
                )
            )
        conn.execute(
            writes.insert().values(
                thread_id="t1",
                checkpoint_id="c2",
                task_id="task-2",
                node="agent",
                seq=1,
                body=serializer.dumps({"messages": ["done"]}),
                created_at=T0,
            )
        )
        if since_kinds:
            conn.execute(
                timers.insert().values(
                    thread_id="t1", run_id="r1", graph_id="g", kind="stall", due_at=T0
                )
            )
    return list(reversed(expected))


def _kind_column(engine: Engine, prefix: str) -> dict[str, str | None]:
    with engine.connect() as conn:
        rows = conn.execute(text(f"SELECT checkpoint_id, kind FROM {prefix}checkpoints")).all()
    return {row.checkpoint_id: row.kind for row in rows}


def _versions(engine: Engine, prefix: str) -> list[int]:
    with engine.connect() as conn:
        rows = conn.execute(
            text(f"SELECT version FROM {prefix}schema_version ORDER BY version")
        ).all()
    return [row.version for row in rows]


# -- upgrading --------------------------------------------------------------------------------


@pytest.mark.parametrize("release", sorted(_RELEASES))
def test_tables_of_an_earlier_release_are_migrated_and_read_back(
    sql_saver: SqlSaver, release: str
) -> None:
    engine, prefix = sql_saver.engine, sql_saver.table_prefix
    _build_release(engine, prefix, release)
    expected = _fill_release(engine, prefix, release)

    sql_saver.setup()

    assert _versions(engine, prefix) == list(range(1, LATEST_VERSION + 1))
    stored = list(sql_saver.list("t1"))
    assert stored == expected
    kinds = ["edges" if release == "cf4aa3d" else "update", "loop", "input"]
    assert [c.kind for c in stored] == kinds
    assert _kind_column(engine, prefix) == dict(zip(["c2", "c1", "c0"], kinds, strict=True))
    assert sql_saver.get("t1", "c0") == expected[-1]
    done = PendingWrite("task-2", "agent", {"messages": ["done"]})
    assert sql_saver.get_writes("t1", "c2") == [done]
    assert sql_saver.thread_of_run("r1") == "t1"
    if release == "cf4aa3d":
        assert sql_saver.due_timers(T0) == [Timer("t1", "r1", "g", "stall", T0)]
    else:
        assert sql_saver.due_timers(T0) == []
    # The migrated tables keep every guard: one first checkpoint per thread, unique steps.
    with pytest.raises(CheckpointConflictError, match="another run started"):
        sql_saver.put(Checkpoint("t1", "c-new-root", "r2", -1, {}, parent_id=None))
    with pytest.raises(CheckpointConflictError, match="stored this step first"):
        sql_saver.put(Checkpoint("t1", "c-again", "r1", 1, {}, parent_id="c1"))
    fresh = sql_saver.put(Checkpoint("t1", "c3", "r1", 2, {"messages": []}, parent_id="c2"))
    assert sql_saver.get("t1") == fresh
    # Another process (a new saver) finds the tables at the latest version and changes nothing.
    again = SqlSaver(engine, table_prefix=prefix)
    again.setup()
    assert list(again.list("t1")) == [fresh, *expected]
    assert _versions(engine, prefix) == list(range(1, LATEST_VERSION + 1))


def test_migrations_build_the_tables_the_saver_describes(sql_saver: SqlSaver) -> None:
    sql_saver.setup()
    described = build_tables(sql_saver.table_prefix)
    inspector = inspect(sql_saver.engine)
    prefix = sql_saver.table_prefix
    assert {n for n in inspector.get_table_names() if n.startswith(prefix)} == set(
        described.metadata.tables
    )
    for name, model in described.metadata.tables.items():
        columns = {c["name"]: c["nullable"] for c in inspector.get_columns(name)}
        assert columns == {c.name: c.nullable for c in model.columns}, name
        primary = inspector.get_pk_constraint(name)
        assert primary["constrained_columns"] == [c.name for c in model.primary_key.columns]
        if sql_saver.engine.dialect.name == "postgresql":  # (SQLite does not name them back)
            assert primary["name"] == model.primary_key.name, name
        uniques = {u["name"]: u["column_names"] for u in inspector.get_unique_constraints(name)}
        assert uniques == {
            u.name: [c.name for c in u.columns]
            for u in model.constraints
            if isinstance(u, UniqueConstraint)
        }, name
        indexes = {  # (PostgreSQL also lists the indexes behind unique constraints)
            i["name"]: (i["column_names"], bool(i["unique"]))
            for i in inspector.get_indexes(name)
            if not i.get("duplicates_constraint")
        }
        assert indexes == {
            i.name: ([c.name for c in i.columns], bool(i.unique)) for i in model.indexes
        }, name


def test_setup_twice_and_by_another_saver_applies_nothing_more(sql_saver: SqlSaver) -> None:
    sql_saver.setup()
    sql_saver.setup()
    other = SqlSaver(sql_saver.engine, table_prefix=sql_saver.table_prefix)
    other.setup()
    assert _versions(sql_saver.engine, sql_saver.table_prefix) == list(range(1, LATEST_VERSION + 1))


def test_savers_setting_up_at_once_apply_each_migration_once(sql_saver: SqlSaver) -> None:
    url = sql_saver.engine.url.render_as_string(hide_password=False)
    racers = 6
    savers = [SqlSaver(url, table_prefix=sql_saver.table_prefix) for _ in range(racers)]
    barrier = threading.Barrier(racers)
    errors: list[BaseException] = []

    def set_up(saver: SqlSaver) -> None:
        barrier.wait(timeout=30)
        try:
            saver.setup()
        except BaseException as error:
            errors.append(error)

    threads = [threading.Thread(target=set_up, args=(saver,)) for saver in savers]
    try:
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(timeout=60)
        assert errors == []
        assert _versions(sql_saver.engine, sql_saver.table_prefix) == list(
            range(1, LATEST_VERSION + 1)
        )
        savers[0].put(Checkpoint("t1", "c1", "r1", -1, {"a": 1}))
        assert [c.checkpoint_id for c in savers[-1].list("t1")] == ["c1"]
    finally:
        for saver in savers:
            saver.dispose()


# -- a checkpoint's kind in its own column -----------------------------------------------------


def test_kind_is_stored_in_its_column_and_read_from_it(sql_saver: SqlSaver) -> None:
    engine, prefix = sql_saver.engine, sql_saver.table_prefix
    sql_saver.put(Checkpoint("t1", "c0", "r1", -1, {}, kind=CheckpointKind.INPUT))
    sql_saver.put(Checkpoint("t1", "c1", "r1", 0, {}, parent_id="c0", kind=CheckpointKind.FORK))
    assert _kind_column(engine, prefix) == {"c0": "input", "c1": "fork"}
    with engine.begin() as conn:  # (the body still says "fork": reads go by the column)
        conn.execute(text(f"UPDATE {prefix}checkpoints SET kind = 'resume' WHERE seq > 1"))
    for read in (sql_saver.get("t1"), sql_saver.list("t1")[0], sql_saver.get_with_writes("t1")):
        checkpoint = read if isinstance(read, Checkpoint) else read.checkpoint
        assert checkpoint is not None and checkpoint.kind is CheckpointKind.RESUME


def test_rows_without_a_kind_read_it_from_their_body(sql_saver: SqlSaver) -> None:
    """What a release older than the column stores while this one has migrated the tables."""
    engine, prefix = sql_saver.engine, sql_saver.table_prefix
    sql_saver.setup()
    checkpoints, _, _ = _old_tables(prefix)
    body = _old_body({"a": 1}, metadata={"source": "update"}, kind="update")
    with engine.begin() as conn:
        conn.execute(
            checkpoints.insert().values(
                thread_id="t1",
                checkpoint_id="c0",
                run_id="r1",
                step=-1,
                parent_id=None,
                created_at=T0,
                body=JsonSerializer().dumps(body),
            )
        )
    assert _kind_column(engine, prefix) == {"c0": None}
    stored = sql_saver.get("t1")
    assert stored is not None and stored.kind is CheckpointKind.UPDATE
    assert stored.values == {"a": 1}


@dataclass
class _Registered:
    x: int


def test_kinds_are_filled_in_from_bodies_the_serializer_cannot_read(sql_saver: SqlSaver) -> None:
    """The serializer that stored a value of a registered type is not the one setting up: the
    kind is still read, from the body's JSON."""
    engine, prefix = sql_saver.engine, sql_saver.table_prefix
    _build_release(engine, prefix, "cf4aa3d")
    checkpoints, _, _ = _old_tables(prefix)
    body = _old_body({"v": _Registered(1)}, metadata={"source": "resume"}, kind="resume")
    with engine.begin() as conn:
        conn.execute(
            checkpoints.insert().values(
                thread_id="t1",
                checkpoint_id="c0",
                run_id="r1",
                step=-1,
                parent_id=None,
                created_at=T0,
                body=JsonSerializer(types=[_Registered]).dumps(body),
            )
        )
    sql_saver.setup()
    assert _kind_column(engine, prefix) == {"c0": "resume"}


def test_the_database_checks_a_runs_status(sql_saver: SqlSaver) -> None:
    sql_saver.setup()
    insert = text(
        f"INSERT INTO {sql_saver.table_prefix}runs (run_id, thread_id, graph_id, status, "
        "created_at, updated_at) VALUES (:run, 't1', 'g', :status, :at, :at)"
    )
    with sql_saver.engine.begin() as conn:
        conn.execute(insert, {"run": "r1", "status": "parked", "at": T0})
    with pytest.raises(IntegrityError), sql_saver.engine.begin() as conn:
        conn.execute(insert, {"run": "r2", "status": "paused", "at": T0})
    stored = sql_saver.get_run("r1")
    assert stored is not None and stored.status is RunStatus.PARKED
    assert sql_saver.get_run("r2") is None


# -- refusals ---------------------------------------------------------------------------------


def test_tables_newer_than_this_code_are_refused(sql_saver: SqlSaver) -> None:
    sql_saver.setup()
    prefix = sql_saver.table_prefix
    with sql_saver.engine.begin() as conn:
        conn.execute(
            text(
                f"INSERT INTO {prefix}schema_version (version, description, applied_at) "
                "VALUES (:v, 'from the future', :at)"
            ),
            {"v": LATEST_VERSION + 1, "at": T0},
        )
    newer = SqlSaver(sql_saver.engine, table_prefix=prefix)
    with pytest.raises(SchemaError) as caught:
        newer.get("t1")
    message = str(caught.value)
    assert f"schema version {LATEST_VERSION + 1}" in message
    assert f"up to {LATEST_VERSION}" in message and "upgrade langgraph-celery" in message


def test_a_failing_migration_leaves_nothing_and_is_applied_once_fixed(
    sql_saver: SqlSaver, monkeypatch: pytest.MonkeyPatch
) -> None:
    sql_saver.setup()
    engine, prefix = sql_saver.engine, sql_saver.table_prefix
    broken = {"yes": True}

    def add_table_then_maybe_fail(m: MigrationContext) -> None:
        Table(f"{m.prefix}extra", MetaData(), Column("x", Integer)).create(m.connection)
        m.connection.execute(text(f"INSERT INTO {m.prefix}extra (x) VALUES (1)"))
        if broken["yes"]:
            raise RuntimeError("migration failed half way")

    extra = Migration(LATEST_VERSION + 1, "an extra table", add_table_then_maybe_fail)
    monkeypatch.setattr(_migrations, "MIGRATIONS", (*MIGRATIONS, extra))
    monkeypatch.setattr(_migrations, "LATEST_VERSION", LATEST_VERSION + 1)

    with pytest.raises(RuntimeError, match="half way"):
        SqlSaver(engine, table_prefix=prefix).setup()
    assert f"{prefix}extra" not in inspect(engine).get_table_names()
    assert _versions(engine, prefix) == list(range(1, LATEST_VERSION + 1))

    broken["yes"] = False
    SqlSaver(engine, table_prefix=prefix).setup()
    assert _versions(engine, prefix) == list(range(1, LATEST_VERSION + 2))
    with engine.connect() as conn:
        assert conn.execute(text(f"SELECT x FROM {prefix}extra")).all() == [(1,)]


def test_two_first_checkpoints_of_an_old_release_stop_setup_until_fixed(
    sql_saver: SqlSaver,
) -> None:
    """The first release had no one-first-checkpoint guard: two first runs racing on a new
    thread could both be stored.  The migration adding the guard says which threads to fix, and
    nothing is half done: the tables stay usable by the old release."""
    engine, prefix = sql_saver.engine, sql_saver.table_prefix
    _build_release(engine, prefix, "eb29c94")
    checkpoints, _, _ = _old_tables(prefix)
    body = JsonSerializer().dumps(_old_body({}, metadata={"source": "input"}, kind=None))
    with engine.begin() as conn:
        for run in ("run-a", "run-b"):
            conn.execute(
                checkpoints.insert().values(
                    thread_id="twice",
                    checkpoint_id=f"c-{run}",
                    run_id=run,
                    step=-1,
                    parent_id=None,
                    created_at=T0,
                    body=body,
                )
            )
    with pytest.raises(SchemaError) as caught:
        sql_saver.setup()
    message = str(caught.value)
    assert f"{prefix}ckpt_root_uq" in message and "'twice'" in message
    assert f"DELETE FROM {prefix}checkpoints" in message
    assert _versions(engine, prefix) == [1]  # migration 1 applied, 2 not
    assert f"{prefix}ckpt_root_uq" not in {
        i["name"] for i in inspect(engine).get_indexes(f"{prefix}checkpoints")
    }

    with engine.begin() as conn:
        conn.execute(text(f"DELETE FROM {prefix}checkpoints WHERE checkpoint_id = 'c-run-b'"))
    sql_saver.setup()
    assert _versions(engine, prefix) == list(range(1, LATEST_VERSION + 1))
    assert [c.checkpoint_id for c in sql_saver.list("twice")] == ["c-run-a"]
    with pytest.raises(CheckpointConflictError, match="another run started"):
        sql_saver.put(Checkpoint("twice", "c-run-c", "run-c", -1, {}, parent_id=None))
