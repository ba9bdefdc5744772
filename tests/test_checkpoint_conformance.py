"""The checkpoint-saver conformance suite on our savers, and what is particular to SqlSaver.

``TestSavers`` runs the suite that ships as :mod:`langgraph_celery.testing` (both halves:
storing checkpoints, indexing runs) on every saver of ``conftest.py``'s ``saver_factory``:
memory, sqlite, postgres.  The rest of the file races SQL savers in separate processes and checks
SqlSaver's specifics.
"""

from __future__ import annotations

import dataclasses
import multiprocessing
import queue
import sqlite3
import subprocess
import sys
import threading
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

pytest.register_assert_rewrite("langgraph_celery.testing")

from sqlalchemy import inspect  # noqa: E402
from sqlalchemy.exc import IntegrityError  # noqa: E402

from langgraph_celery.checkpoint import (  # noqa: E402
    BaseCheckpointSaver,
    Checkpoint,
    CheckpointConflictError,
    MemorySaver,
    RunRecord,
    RunStatus,
    SqlSaver,
)
from langgraph_celery.testing import (  # noqa: E402
    THREAD,
    RunIndexConformance,
    SaverConformance,
    race,
)
from langgraph_celery.testing import make_checkpoint as ckpt  # noqa: E402

SaverFactory = Callable[[], BaseCheckpointSaver]


class TestSavers(SaverConformance, RunIndexConformance):
    @pytest.fixture
    def saver_factory(self, saver_factory: SaverFactory) -> SaverFactory:
        """conftest.py's: memory, sqlite and postgres."""
        return saver_factory


def _process_racer(
    url: str,
    prefix: str,
    index: int,
    barrier: Any,
    results: Any,
) -> None:
    """Runs in a spawned process: its own SqlSaver, racing the others for one step and one write."""
    saver = SqlSaver(url, table_prefix=prefix)
    put: str
    try:
        candidate = ckpt(0, checkpoint_id=f"ck-proc-{index}", values={"writer": index})
        barrier.wait(timeout=60)
        try:
            saver.put(candidate)
            put = "stored"
        except CheckpointConflictError:
            put = "conflict"
        except Exception as exc:
            put = f"{type(exc).__name__}: {exc}"
        barrier.wait(timeout=60)
        try:
            wrote: bool | str = saver.put_writes(THREAD, "ck-w", "task", "n", {"writer": index})
        except Exception as exc:
            wrote = f"{type(exc).__name__}: {exc}"
        results.put((index, put, wrote))
    finally:
        saver.dispose()


def test_processes_racing_for_one_step_store_exactly_one(sql_saver: SqlSaver) -> None:
    context = multiprocessing.get_context("spawn")
    racers = 3
    barrier = context.Barrier(racers)
    results = context.Queue()
    url = sql_saver.engine.url.render_as_string(hide_password=False)
    # The tables do not exist yet: the processes also race to create them.
    processes = [
        context.Process(
            target=_process_racer, args=(url, sql_saver.table_prefix, i, barrier, results)
        )
        for i in range(racers)
    ]
    for process in processes:
        process.start()
    outcomes: dict[int, tuple[str, bool | str]] = {}
    try:
        for _ in range(racers):
            index, put, wrote = results.get(timeout=90)
            outcomes[index] = (put, wrote)
    except queue.Empty:
        pytest.fail(f"only {len(outcomes)} of {racers} processes reported: {outcomes}")
    finally:
        for process in processes:
            process.join(timeout=30)
            if process.is_alive():
                process.kill()

    puts = sorted(put for put, _ in outcomes.values())
    assert puts == ["conflict"] * (racers - 1) + ["stored"], outcomes
    writes = [wrote for _, wrote in outcomes.values()]
    assert sorted(writes, key=repr) == [False] * (racers - 1) + [True], outcomes
    put_winner = next(i for i, (put, _) in outcomes.items() if put == "stored")
    write_winner = next(i for i, (_, wrote) in outcomes.items() if wrote is True)
    latest = sql_saver.get(THREAD)
    assert latest is not None and latest.values == {"writer": put_winner}
    assert len(sql_saver.list(THREAD)) == 1
    assert [w.update for w in sql_saver.get_writes(THREAD, "ck-w")] == [{"writer": write_winner}]


# -- SqlSaver specifics -----------------------------------------------------------------------


def test_sql_saver_constructor_does_not_connect_and_picks_psycopg() -> None:
    for url in ("postgresql://nobody@127.0.0.1:9/none", "postgres://nobody@127.0.0.1:9/none"):
        saver = SqlSaver(url)  # port 9 (discard) has no server: connecting would fail
        assert saver.engine.url.drivername == "postgresql+psycopg"
        assert saver.engine.url.database == "none"
        saver.dispose()


def test_sql_saver_creates_tables_lazily(tmp_path: Path) -> None:
    path = tmp_path / "lazy.db"
    saver = SqlSaver(f"sqlite:///{path}", table_prefix="lazy_")
    try:
        assert not path.exists()
        assert saver.get(THREAD) is None
        assert set(inspect(saver.engine).get_table_names()) == {
            "lazy_checkpoints",
            "lazy_writes",
            "lazy_timers",
            "lazy_runs",
            "lazy_schema_version",
        }
        saver.setup()  # idempotent
        other = SqlSaver(saver.engine, table_prefix="lazy_")
        other.setup()  # tables exist already: checkfirst
        other.dispose()  # not its engine: the saver's pool stays usable
        saver.put(ckpt(0))
        assert len(saver.list(THREAD)) == 1
    finally:
        saver.dispose()


def test_sql_saver_in_memory_sqlite_and_bad_prefix() -> None:
    saver = SqlSaver("sqlite://")
    try:
        outcomes = race(4, lambda i: saver.put(ckpt(i)))
        assert all(isinstance(o, Checkpoint) for o in outcomes), outcomes
        assert len(saver.list(THREAD)) == 4
    finally:
        saver.dispose()
    with pytest.raises(ValueError, match="table_prefix"):
        SqlSaver("sqlite://", table_prefix="bad-prefix; drop")


def test_memory_saver_is_not_shared_across_processes() -> None:
    assert MemorySaver.shared_across_processes is False
    assert SqlSaver.shared_across_processes is True


def test_sql_saver_reports_other_integrity_errors_as_they_are(sql_saver: SqlSaver) -> None:
    """Only a uniqueness refusal is a conflict: a NOT NULL violation is raised as it is, also
    when the refused row would collide with a stored one."""
    stored = ckpt(0, checkpoint_id="ck-0")
    sql_saver.put(stored)
    broken = ckpt(0, checkpoint_id="ck-0", run=None)  # type: ignore[arg-type]
    with pytest.raises(IntegrityError) as caught:
        sql_saver.put(broken)
    assert not isinstance(caught.value, CheckpointConflictError)
    with pytest.raises(IntegrityError):
        sql_saver.put_writes(THREAD, "ck-0", "task", None, {})  # type: ignore[arg-type]
    assert list(sql_saver.list(THREAD)) == [stored]


def test_sql_saver_without_insert_or_ignore_knows_a_taken_write(sql_saver: SqlSaver) -> None:
    """On a database without ``INSERT ... ON CONFLICT`` a write refused by the primary key is
    recognised by the key's name or, where the driver reports none, by the write found there."""
    sql_saver.setup()
    sql_saver._sql = dataclasses.replace(sql_saver._sql, put_write_ignoring=None)
    outcomes = race(6, lambda i: sql_saver.put_writes(THREAD, "ck-0", "task", f"n{i}", {"i": i}))
    assert sorted(outcomes, key=repr) == [False] * 5 + [True], outcomes
    assert len(sql_saver.get_writes(THREAD, "ck-0")) == 1
    assert sql_saver.put_writes(THREAD, "ck-0", "task-2", "n", {}) is True


# -- the shipped suite, used as a saver author uses it ---------------------------------------------

_THIRD_PARTY_TESTS = '''
import pytest

from langgraph_celery.checkpoint import MemorySaver
from langgraph_celery.testing import RunIndexConformance, SaverConformance


class NewestLast(MemorySaver):
    """Lists a thread's checkpoints oldest first: wrong."""

    def list(self, thread_id):
        return list(reversed(super().list(thread_id)))


class TestGood(SaverConformance, RunIndexConformance):
    @pytest.fixture
    def saver_factory(self):
        saver = MemorySaver()
        return lambda: saver


class TestWrongOrder(SaverConformance):
    @pytest.fixture
    def saver_factory(self):
        saver = NewestLast()
        return lambda: saver


class TestForgotTheFactory(SaverConformance):
    pass
'''


def test_the_shipped_suite_runs_in_a_saver_authors_own_tests(tmp_path: Path) -> None:
    """Outside this repository's conftest.py: a correct saver passes, a wrong one fails the
    test that says what is wrong, and a suite without a saver says what to override."""
    (tmp_path / "test_my_saver.py").write_text(_THIRD_PARTY_TESTS)
    completed = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-rfE", "-p", "no:cacheprovider", str(tmp_path)],
        capture_output=True,
        text=True,
        timeout=300,
        cwd=tmp_path,
    )
    out = completed.stdout
    summary = out.strip().splitlines()[-1]
    good = len([line for line in out.splitlines() if "TestGood::" in line and "FAILED" in line])
    assert good == 0, out
    failed = {
        line.split("::")[-1].split(" ")[0]
        for line in out.splitlines()
        if line.startswith("FAILED") and "TestWrongOrder::" in line
    }
    # (among others that read a list: the one named for it)
    assert "test_list_is_newest_stored_first_not_highest_step" in failed, out
    assert "test_put_writes_first_wins_in_insertion_order" not in failed, out
    assert "override the saver_factory fixture" in out
    errors = [line for line in out.splitlines() if line.startswith("ERROR")]
    assert errors and all("TestForgotTheFactory::" in line for line in errors), out
    assert " passed" in summary and " failed" in summary and " error" in summary, summary


def _in_a_new_process(script: str, printed: str) -> None:
    """Run ``script`` in a new interpreter: it succeeds and prints ``printed``."""
    completed = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=60
    )
    assert completed.returncode == 0, completed.stderr
    assert completed.stdout.strip() == printed


def test_importing_the_library_does_not_import_pytest() -> None:
    script = (
        "import sys\n"
        "import langgraph_celery, langgraph_celery.checkpoint, langgraph_celery.celery\n"
        "assert 'pytest' not in sys.modules, 'pytest was imported'\n"
        "assert 'langgraph_celery.testing' not in sys.modules\n"
        "print('no-pytest')\n"
    )
    _in_a_new_process(script, "no-pytest")


def test_sqlalchemy_is_imported_only_by_a_program_that_uses_sql_saver() -> None:
    """An in-process graph with ``MemorySaver`` does not pay for importing SQLAlchemy (about a
    third of a second); ``SqlSaver`` from ``langgraph_celery.checkpoint`` imports it."""
    script = (
        "import sys\n"
        "import langgraph_celery\n"
        "from langgraph_celery.checkpoint import MemorySaver, SchemaError\n"
        "assert 'sqlalchemy' not in sys.modules, 'sqlalchemy was imported'\n"
        "from langgraph_celery.checkpoint import SqlSaver\n"
        "assert 'sqlalchemy' in sys.modules and SqlSaver.__name__ == 'SqlSaver'\n"
        "print('lazy')\n"
    )
    _in_a_new_process(script, "lazy")
    import langgraph_celery.checkpoint as checkpoint

    with pytest.raises(AttributeError, match="has no attribute 'SqlSavers'"):
        _ = checkpoint.SqlSavers  # type: ignore[attr-defined]


def test_sql_saver_without_upsert_keeps_run_records_the_same_way(sql_saver: SqlSaver) -> None:
    """A database without ``INSERT ... ON CONFLICT``: update, else insert (the same rules)."""
    sql_saver.setup()
    sql_saver._sql = dataclasses.replace(sql_saver._sql, upsert_run=None)
    t0 = datetime(2026, 1, 1, tzinfo=UTC)
    later = t0 + timedelta(seconds=5)
    assert sql_saver.upsert_run(RunRecord("r1", "t1", "g", RunStatus.RUNNING, "a", t0, t0))
    assert sql_saver.upsert_run(RunRecord("r1", "t1", "g", RunStatus.PARKED, "b", later, later))
    assert not sql_saver.upsert_run(RunRecord("r1", "t1", "g", RunStatus.FAILED, None, t0, t0))
    with pytest.raises(ValueError, match="'t1'"):
        sql_saver.upsert_run(RunRecord("r1", "t9", "g", RunStatus.FAILED, None, t0, later))
    assert sql_saver.get_run("r1") == RunRecord("r1", "t1", "g", RunStatus.PARKED, "b", t0, later)
    outcomes = race(
        6,
        lambda i: sql_saver.upsert_run(
            RunRecord(f"new-{i % 2}", "t2", "g", RunStatus.RUNNING, f"n{i}", t0, t0)
        ),
    )
    assert all(outcome is True for outcome in outcomes), outcomes
    assert {r.run_id for r in sql_saver.list_runs("g")} == {"r1", "new-0", "new-1"}


def test_sql_saver_opening_a_new_sqlite_file_another_process_locks_waits(tmp_path: Path) -> None:
    """Switching a new SQLite file to WAL needs an exclusive lock that SQLite does not wait for:
    the saver waits itself (up to the busy timeout) instead of failing with "database is
    locked"."""
    path = tmp_path / "new.db"
    holder = sqlite3.connect(path, isolation_level=None, check_same_thread=False)
    holder.execute("CREATE TABLE other (x INTEGER)")
    holder.execute("BEGIN IMMEDIATE")  # (as another process setting the file up would)
    saver = SqlSaver(f"sqlite:///{path}")
    release = threading.Timer(0.5, lambda: holder.execute("COMMIT"))
    release.start()
    try:
        saver.put(ckpt(0))
        assert len(saver.list(THREAD)) == 1
    finally:
        release.join()
        holder.close()
        saver.dispose()
