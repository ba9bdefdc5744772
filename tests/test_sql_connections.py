"""SqlSaver's own connections (checkpoint/_direct.py): outside the pool, replaced when the server
drops them, left alone by a forked child, and bounded when many threads call at once."""

from __future__ import annotations

import logging
import multiprocessing
import socket
import threading
import time
import uuid
from collections.abc import Iterator
from typing import Any

import pytest
from sqlalchemy import create_engine, func, literal, select, text
from sqlalchemy.exc import OperationalError
from sqlalchemy.pool import NullPool, StaticPool

from langgraph_celery.checkpoint import Checkpoint, SqlSaver
from langgraph_celery.checkpoint._direct import (
    KEEP_IDLE,
    MAX_OPEN,
    DirectConnections,
    compile_direct,
)


def _checkpoint(thread: str, step: int, parent: str | None = "ck-parent") -> Checkpoint:
    return Checkpoint(
        thread_id=thread,
        checkpoint_id=f"ck-{uuid.uuid4().hex}",
        run_id="run-1",
        step=step,
        values={"step": step},
        parent_id=parent,
    )


@pytest.fixture
def pg_saver(postgres_url: str) -> Iterator[SqlSaver]:
    saver = SqlSaver(postgres_url, table_prefix=f"conn_{uuid.uuid4().hex[:8]}_")
    saver.setup()
    yield saver
    saver.dispose()


def _terminate_others(postgres_url: str) -> int:
    """End every other session on the saver's database (as a restart or an operator would)."""
    engine = create_engine(
        postgres_url.replace("postgresql://", "postgresql+psycopg://", 1),
        isolation_level="AUTOCOMMIT",
        poolclass=NullPool,
    )
    try:
        with engine.connect() as conn:
            return len(
                conn.execute(
                    text(
                        "SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
                        "WHERE datname = current_database() AND pid <> pg_backend_pid() "
                        "AND backend_type = 'client backend'"
                    )
                ).all()
            )
    finally:
        engine.dispose()


def _backend_pid(saver: SqlSaver) -> int:
    """The server process of the saver's idle connection, asked without any retry."""
    assert saver._direct is not None
    statement = compile_direct(select(func.pg_backend_pid().label("pid")), saver.engine, ())
    rows = saver._direct.run(statement, {})
    assert isinstance(rows, list)
    return int(rows[0].pid)


def test_calls_from_many_threads_hold_no_pool_connection(sql_saver: SqlSaver) -> None:
    thread = f"t-{uuid.uuid4().hex}"
    sql_saver.put(_checkpoint(thread, 0, parent=None))
    errors: list[BaseException] = []
    barrier = threading.Barrier(KEEP_IDLE + 4)

    def call() -> None:
        try:
            barrier.wait(timeout=30)
            for _ in range(20):
                assert sql_saver.get(thread) is not None
        except BaseException as error:  # reported below
            errors.append(error)

    workers = [threading.Thread(target=call) for _ in range(KEEP_IDLE + 4)]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join(timeout=60)
    assert not errors, errors
    pool: Any = sql_saver.engine.pool
    assert pool.checkedout() == 0
    assert sql_saver._direct is not None
    assert 1 <= len(sql_saver._direct._idle) <= KEEP_IDLE


def test_a_terminated_connection_is_replaced(
    pg_saver: SqlSaver, postgres_url: str, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.WARNING)
    thread = f"t-{uuid.uuid4().hex}"
    first = pg_saver.put(_checkpoint(thread, 0, parent=None))
    before = _backend_pid(pg_saver)
    assert _terminate_others(postgres_url) >= 1

    # a read is repeated on a new connection
    latest = pg_saver.get(thread)
    assert latest is not None and latest.checkpoint_id == first.checkpoint_id
    assert _backend_pid(pg_saver) != before

    # a write is not repeated: it fails as a dropped connection, and the next call works
    _terminate_others(postgres_url)
    second = _checkpoint(thread, 1)
    with pytest.raises(OperationalError) as raised:
        pg_saver.put(second)
    assert raised.value.connection_invalidated
    pg_saver.put(second)
    assert [c.step for c in pg_saver.list(thread)] == [1, 0]
    # a dead connection is closed quietly (no failed rollback logged by the pool)
    assert [r.getMessage() for r in caplog.records if r.levelno >= logging.ERROR] == []


def _child_uses_saver(saver: SqlSaver, thread: str, parents: int, done: Any) -> None:
    try:
        saver.put(_checkpoint(thread, 1))
        mine = _backend_pid(saver)
        done.put("ok" if mine != parents else "the child used its parent's connection")
    except BaseException as error:  # reported to the parent
        done.put(repr(error))


def test_a_forked_child_leaves_the_parents_connections_alone(pg_saver: SqlSaver) -> None:
    thread = f"t-{uuid.uuid4().hex}"
    pg_saver.put(_checkpoint(thread, 0, parent=None))
    before = _backend_pid(pg_saver)
    context = multiprocessing.get_context("fork")
    done = context.Queue()
    child = context.Process(target=_child_uses_saver, args=(pg_saver, thread, before, done))
    child.start()
    assert done.get(timeout=60) == "ok"
    child.join(timeout=30)
    assert child.exitcode == 0
    # the parent's connection is the same session, alive (no retry hides a closed one here)
    assert _backend_pid(pg_saver) == before
    assert [c.step for c in pg_saver.list(thread)] == [1, 0]


def test_no_more_connections_open_at_once_than_the_engines_pool_allows(postgres_url: str) -> None:
    engine = create_engine(
        postgres_url.replace("postgresql://", "postgresql+psycopg://", 1),
        pool_size=2,
        max_overflow=0,
        pool_timeout=0.3,
    )
    saver = SqlSaver(engine, table_prefix=f"conn_{uuid.uuid4().hex[:8]}_")
    assert saver._direct is not None
    slow = compile_direct(select(func.pg_sleep(1.5).label("slept")), engine, ())
    barrier = threading.Barrier(3)
    outcomes: list[str] = []

    def call() -> None:
        barrier.wait(timeout=10)
        try:
            saver._direct.run(slow, {})  # type: ignore[union-attr]
            outcomes.append("ran")
        except TimeoutError as error:
            assert "2 connections" in str(error)
            outcomes.append("timed out")

    threads = [threading.Thread(target=call) for _ in range(3)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=30)
    saver.dispose()
    engine.dispose()
    assert sorted(outcomes) == ["ran", "ran", "timed out"]


def test_an_engine_with_one_shared_connection_is_used_through_sqlalchemy(tmp_path: Any) -> None:
    engine = create_engine(f"sqlite:///{tmp_path / 'one.db'}", poolclass=StaticPool)
    saver = SqlSaver(engine)
    assert saver._direct is None  # (its one connection cannot be lent away)
    stored = saver.put(_checkpoint("t1", 0, parent=None))
    latest = saver.get("t1")
    assert latest is not None and latest.checkpoint_id == stored.checkpoint_id
    saver.put_with_timer(_checkpoint("t1", 1), None)
    assert [c.step for c in saver.list("t1")] == [1, 0]
    engine.dispose()


def _slow_calls(saver: SqlSaver, engine: Any, count: int, seconds: float) -> list[str]:
    """``count`` threads each run one statement of ``seconds`` at once; what each one did."""
    assert saver._direct is not None
    direct = saver._direct
    slow = compile_direct(select(func.pg_sleep(seconds).label("slept")), engine, ())
    barrier = threading.Barrier(count)
    outcomes: list[str] = []

    def call() -> None:
        barrier.wait(timeout=10)
        try:
            direct.run(slow, {})
            outcomes.append("ran")
        except TimeoutError:
            outcomes.append("timed out")

    threads = [threading.Thread(target=call) for _ in range(count)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=30)
    return sorted(outcomes)


def test_after_a_disconnect_the_connections_idle_in_the_pool_are_replaced_too(
    postgres_url: str, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.WARNING)
    engine = create_engine(
        postgres_url.replace("postgresql://", "postgresql+psycopg://", 1),
        pool_size=KEEP_IDLE + 4,
        max_overflow=0,
    )
    saver = SqlSaver(engine, table_prefix=f"conn_{uuid.uuid4().hex[:8]}_")
    try:
        thread = f"t-{uuid.uuid4().hex}"
        first = saver.put(_checkpoint(thread, 0, parent=None))
        # KEEP_IDLE connections end in the saver's free list, the 4 others idle in its pool
        assert _slow_calls(saver, engine, KEEP_IDLE + 4, 0.3) == ["ran"] * (KEEP_IDLE + 4)
        assert saver._direct is not None and len(saver._direct._idle) == KEEP_IDLE
        assert _terminate_others(postgres_url) >= KEEP_IDLE + 4

        # the read's one repeat takes a connection from the pool: a new one, not a dead one
        latest = saver.get(thread)
        assert latest is not None and latest.checkpoint_id == first.checkpoint_id
        assert [r.getMessage() for r in caplog.records if r.levelno >= logging.ERROR] == []
    finally:
        saver.dispose()
        engine.dispose()


def test_an_engine_without_a_bounded_pool_gets_a_bounded_one_that_keeps_connections(
    postgres_url: str,
) -> None:
    engine = create_engine(
        postgres_url.replace("postgresql://", "postgresql+psycopg://", 1), poolclass=NullPool
    )
    saver = SqlSaver(engine, table_prefix=f"conn_{uuid.uuid4().hex[:8]}_")
    try:
        saver.setup()
        # kept between calls (a NullPool would open one per call)
        assert _backend_pid(saver) == _backend_pid(saver)
        # and no more than MAX_OPEN at once: one call of MAX_OPEN + 1 waits for another's end
        started = time.monotonic()
        assert _slow_calls(saver, engine, MAX_OPEN + 1, 0.5) == ["ran"] * (MAX_OPEN + 1)
        assert time.monotonic() - started >= 1.0
    finally:
        saver.dispose()
        engine.dispose()


def test_dispose_closes_the_idle_connections_and_the_saver_stays_usable(postgres_url: str) -> None:
    name = f"lgc-{uuid.uuid4().hex[:12]}"
    url = postgres_url.replace("postgresql://", "postgresql+psycopg://", 1)
    engine = create_engine(
        url, pool_size=KEEP_IDLE + 2, max_overflow=0, connect_args={"application_name": name}
    )
    probe = create_engine(url, isolation_level="AUTOCOMMIT", poolclass=NullPool)

    def sessions() -> int:
        with probe.connect() as conn:
            query = text("SELECT count(*) FROM pg_stat_activity WHERE application_name = :name")
            return int(conn.execute(query, {"name": name}).scalar_one())

    saver = SqlSaver(engine, table_prefix=f"conn_{uuid.uuid4().hex[:8]}_")
    try:
        saver.setup()
        engine.dispose()  # (the connection that created the tables)
        thread = f"t-{uuid.uuid4().hex}"
        saver.put(_checkpoint(thread, 0, parent=None))
        # KEEP_IDLE connections idle in the saver's free list, 2 in its pool
        assert _slow_calls(saver, engine, KEEP_IDLE + 2, 1.0) == ["ran"] * (KEEP_IDLE + 2)
        assert sessions() == KEEP_IDLE + 2
        saver.dispose()
        # (a closed connection's server process ends a moment later: wait for it, boundedly)
        deadline = time.monotonic() + 10
        while sessions() and time.monotonic() < deadline:
            time.sleep(0.05)
        assert sessions() == 0
        assert [c.step for c in saver.list(thread)] == [0]
        assert sessions() == 1
    finally:
        saver.dispose()
        engine.dispose()
        probe.dispose()


def test_a_database_that_refuses_connections_is_sqlalchemys_error() -> None:
    with socket.socket() as probe:  # a port nothing listens on
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    engine = create_engine(f"postgresql+psycopg://postgres@127.0.0.1:{port}/nothing")
    connections = DirectConnections(engine)
    statement = compile_direct(select(literal(1).label("one")), engine, ())
    with pytest.raises(OperationalError) as raised:
        connections.run(statement, {})
    assert not raised.value.connection_invalidated
    connections.close()
    engine.dispose()
