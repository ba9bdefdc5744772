"""The checkpoint-saver conformance suite: every test runs on every saver (``saver`` fixture).

A new saver passes this file before anything else uses it.  The end of the file races writers
(threads; for SQL savers also separate processes) and checks a few SqlSaver specifics.
"""

from __future__ import annotations

import dataclasses
import multiprocessing
import queue
import threading
import uuid
from collections.abc import Callable
from datetime import UTC, datetime, timedelta, timezone
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import inspect
from sqlalchemy.exc import IntegrityError

from langgraph_celery.checkpoint import (
    BaseCheckpointSaver,
    Checkpoint,
    CheckpointConflictError,
    CheckpointKind,
    MemorySaver,
    PendingTask,
    PendingWrite,
    SqlSaver,
)
from langgraph_celery.errors import SerializationError

THREAD = "thread-1"


def ckpt(
    step: int = 0,
    *,
    thread: str = THREAD,
    run: str = "run-1",
    checkpoint_id: str | None = None,
    values: dict[str, Any] | None = None,
    **fields: Any,
) -> Checkpoint:
    fields.setdefault("parent_id", "ck-parent")  # (a thread has one checkpoint without a parent)
    return Checkpoint(
        thread_id=thread,
        checkpoint_id=checkpoint_id or f"ck-{uuid.uuid4().hex}",
        run_id=run,
        step=step,
        values={"step": step} if values is None else values,
        **fields,
    )


# -- basic storage ----------------------------------------------------------------------------


def test_unknown_thread_is_empty(saver: BaseCheckpointSaver) -> None:
    assert saver.get("nobody") is None
    assert saver.get("nobody", "ck-missing") is None
    assert list(saver.list("nobody")) == []
    assert list(saver.get_writes("nobody", "ck-missing")) == []
    assert list(saver.release("nobody")) == []


def test_put_then_get_latest_and_by_id(saver: BaseCheckpointSaver) -> None:
    first = ckpt(0, values={"a": 1}, metadata={"source": "input"})
    second = ckpt(
        1,
        values={"a": 2},
        parent_id=first.checkpoint_id,
        node="agent",
        extra={"barrier": ["x", "y"]},
        metadata={"source": "loop", "writes": {"agent": 1}},
        tasks=(PendingTask("t1", "tools"),),
    )
    assert saver.put(first) == first
    assert saver.put(second) == second

    assert saver.get(THREAD) == second
    assert saver.get(THREAD, first.checkpoint_id) == first
    assert saver.get(THREAD, second.checkpoint_id) == second
    assert saver.get(THREAD, "ck-missing") is None
    assert saver.get("other-thread", first.checkpoint_id) is None
    got = saver.get(THREAD)
    assert got is not None
    assert got.parent_id == first.checkpoint_id
    assert got.next == ("tools",)


def test_list_is_newest_stored_first_not_highest_step(saver: BaseCheckpointSaver) -> None:
    stored = [ckpt(5, run="run-a"), ckpt(0, run="run-b"), ckpt(3, run="run-a")]
    for checkpoint in stored:
        saver.put(checkpoint)

    assert [c.checkpoint_id for c in saver.list(THREAD)] == [
        c.checkpoint_id for c in reversed(stored)
    ]
    assert list(saver.list(THREAD)) == list(reversed(stored))
    latest = saver.get(THREAD)
    assert latest is not None and latest.checkpoint_id == stored[-1].checkpoint_id


def test_values_round_trip_with_their_types(saver: BaseCheckpointSaver) -> None:
    moment = datetime(2024, 5, 6, 7, 8, 9, 123456, tzinfo=UTC)
    values: dict[str, Any] = {
        "tuple": (1, "two", (3.5, None)),
        "set": {1, 2, 3},
        "when": moment,
        "bytes": b"\x00\xff",
        "uuid": uuid.UUID(int=7),
        "nested": {"list": [1, {"deep": (True, False)}], "empty": {}},
        "text": "héllo",
        "float": 0.25,
        "none": None,
    }
    saver.put(ckpt(0, values=values))

    got = saver.get(THREAD)
    assert got is not None
    assert got.values == values
    assert type(got.values["tuple"]) is tuple
    assert type(got.values["tuple"][2]) is tuple
    assert type(got.values["set"]) is set
    assert got.values["when"] == moment and got.values["when"].tzinfo is not None
    assert type(got.values["nested"]["list"][1]["deep"]) is tuple


def test_stored_values_are_copies(saver: BaseCheckpointSaver) -> None:
    values: dict[str, Any] = {"items": [1, 2], "nested": {"a": [1]}}
    saver.put(ckpt(0, values=values))
    values["items"].append("mutated after put")
    values["nested"]["b"] = "new key"

    got = saver.get(THREAD)
    assert got is not None
    assert got.values == {"items": [1, 2], "nested": {"a": [1]}}
    got.values["items"].append(99)
    got.values["nested"]["a"].append(2)
    got.extra["added"] = True

    again = saver.get(THREAD)
    assert again is not None
    assert again.values == {"items": [1, 2], "nested": {"a": [1]}}
    assert again.extra == {}
    assert saver.list(THREAD)[0].values == {"items": [1, 2], "nested": {"a": [1]}}


def test_created_at_is_tz_aware_and_the_same_instant(saver: BaseCheckpointSaver) -> None:
    plus_two = timezone(timedelta(hours=2))
    when = datetime(2023, 12, 31, 23, 59, 58, 654321, tzinfo=plus_two)
    saver.put(ckpt(0, created_at=when))
    saver.put(ckpt(1))

    for got in saver.list(THREAD):
        assert got.created_at.tzinfo is not None
        assert got.created_at.utcoffset() == timedelta(0)
    oldest = saver.list(THREAD)[-1]
    assert oldest.created_at == when
    assert oldest.created_at.hour == 21  # reported in UTC


def test_pending_tasks_keep_has_arg(saver: BaseCheckpointSaver) -> None:
    tasks = (
        PendingTask("a", "plain"),
        PendingTask("b", "send-none", arg=None, has_arg=True),
        PendingTask("c", "send-value", arg={"k": (1, 2)}, has_arg=True),
        PendingTask("d", "send-zero", arg=0, has_arg=True),
    )
    saver.put(ckpt(0, tasks=tasks))

    got = saver.get(THREAD)
    assert got is not None
    assert got.tasks == tasks
    assert [t.has_arg for t in got.tasks] == [False, True, True, True]
    assert got.tasks[1].arg is None
    assert got.tasks[2].arg == {"k": (1, 2)}
    assert got.next == ("plain", "send-none", "send-value", "send-zero")


def test_every_kind_reads_back(saver: BaseCheckpointSaver) -> None:
    stored = [ckpt(step, kind=kind) for step, kind in enumerate(CheckpointKind)]
    for checkpoint in stored:
        saver.put(checkpoint)
    assert [c.kind for c in saver.list(THREAD)] == [c.kind for c in reversed(stored)]
    for checkpoint in stored:
        got = saver.get(THREAD, checkpoint.checkpoint_id)
        assert got is not None and got.kind is checkpoint.kind
    view = saver.get_with_writes(THREAD)
    assert view.checkpoint is not None and view.checkpoint.kind is stored[-1].kind


# -- uniqueness -------------------------------------------------------------------------------


def test_same_run_and_step_conflicts_and_keeps_the_original(saver: BaseCheckpointSaver) -> None:
    original = ckpt(3, values={"who": "first"})
    saver.put(original)

    with pytest.raises(CheckpointConflictError) as caught:
        saver.put(ckpt(3, values={"who": "second"}))

    message = str(caught.value)
    assert THREAD in message and "run-1" in message and "3" in message
    assert "stored this step first" in message
    assert saver.get(THREAD) == original
    assert list(saver.list(THREAD)) == [original]


def test_same_checkpoint_id_conflicts(saver: BaseCheckpointSaver) -> None:
    original = ckpt(0, checkpoint_id="ck-same", values={"who": "first"})
    saver.put(original)

    with pytest.raises(CheckpointConflictError) as caught:
        saver.put(ckpt(1, run="run-2", checkpoint_id="ck-same", values={"who": "second"}))

    assert THREAD in str(caught.value)
    assert "checkpoint ids must be unique" in str(caught.value)
    assert saver.get(THREAD, "ck-same") == original
    assert list(saver.list(THREAD)) == [original]


def test_different_runs_may_store_the_same_step(saver: BaseCheckpointSaver) -> None:
    a, b = ckpt(2, run="run-a"), ckpt(2, run="run-b")
    saver.put(a)
    saver.put(b)
    assert list(saver.list(THREAD)) == [b, a]


def test_one_checkpoint_without_a_parent_per_thread(saver: BaseCheckpointSaver) -> None:
    first = ckpt(-1, run="run-a", parent_id=None)
    saver.put(first)
    with pytest.raises(CheckpointConflictError, match="another run started on this new thread"):
        saver.put(ckpt(-1, run="run-b", parent_id=None))
    assert list(saver.list(THREAD)) == [first]
    saver.put(ckpt(-1, run="run-c", parent_id=None, thread="other-thread"))
    saver.release(THREAD)
    saver.put(ckpt(-1, run="run-d", parent_id=None))  # a released thread starts anew


#: What a saver tells each refusal by, in its message.
_RULE_WORDS = {
    "id": "checkpoint ids must be unique",
    "step": "stored this step first",
    "root": "another run started on this new thread",
}


@pytest.mark.parametrize("rule", sorted(_RULE_WORDS))
def test_conflicts_name_the_rule_broken_whatever_the_ids_say(
    saver: BaseCheckpointSaver, rule: str
) -> None:
    """Ids that spell the names of columns and constraints do not confuse the saver about which
    rule a refused checkpoint broke."""
    thread = "thread checkpoint_id step parent_id ckpt_id_uq ckpt_step_uq ckpt_root_uq"
    run = "run checkpoint_id ckpt_id_uq ckpt_root_uq"
    first = ckpt(0, thread=thread, run=run, checkpoint_id="ck step ckpt_step_uq", parent_id=None)
    saver.put(first)
    refused = {
        "id": ckpt(1, thread=thread, run=run, checkpoint_id=first.checkpoint_id),
        "step": ckpt(0, thread=thread, run=run, checkpoint_id="ck other ckpt_id_uq"),
        "root": ckpt(0, thread=thread, run="run-2 step", parent_id=None),
    }[rule]
    with pytest.raises(CheckpointConflictError) as caught:
        saver.put(refused)
    message = str(caught.value)
    assert _RULE_WORDS[rule] in message, message
    assert not any(words in message for other, words in _RULE_WORDS.items() if other != rule)
    assert list(saver.list(thread)) == [first]


def test_threads_racing_to_store_a_first_checkpoint_store_one(saver: BaseCheckpointSaver) -> None:
    racers = 8
    for round_ in range(3):
        thread = f"new-thread-{round_}"
        candidates = [
            ckpt(-1, run=f"run-{i}", parent_id=None, thread=thread) for i in range(racers)
        ]

        def put(index: int, candidates: list[Checkpoint] = candidates) -> Checkpoint:
            return saver.put(candidates[index])

        outcomes = _race(racers, put)
        assert sum(isinstance(o, Checkpoint) for o in outcomes) == 1, outcomes
        assert sum(isinstance(o, CheckpointConflictError) for o in outcomes) == racers - 1
        assert len(saver.list(thread)) == 1


def test_delete_write_compares_the_node(saver: BaseCheckpointSaver) -> None:
    saver.put(ckpt(0, checkpoint_id="ck-1"))
    assert saver.put_writes(THREAD, "ck-1", "__claim__", "token-a", {"token": "token-a"})
    assert saver.delete_write(THREAD, "ck-1", "__claim__", "token-b") is False
    assert [w.node for w in saver.get_writes(THREAD, "ck-1")] == ["token-a"]
    assert saver.delete_write(THREAD, "ck-1", "__claim__", "token-a") is True
    assert saver.get_writes(THREAD, "ck-1") == []
    assert saver.delete_write(THREAD, "ck-1", "__claim__", "token-a") is False
    assert saver.put_writes(THREAD, "ck-1", "__claim__", "token-b", {})  # claimable again


def test_threads_are_isolated(saver: BaseCheckpointSaver) -> None:
    one = ckpt(0, thread="t-one", checkpoint_id="ck-1", values={"thread": 1})
    two = ckpt(0, thread="t-two", checkpoint_id="ck-1", values={"thread": 2})
    saver.put(one)
    saver.put(two)  # same id, run and step in another thread: no conflict
    assert saver.put_writes("t-one", "ck-1", "task", "n", {"from": 1}) is True
    assert saver.put_writes("t-two", "ck-1", "task", "n", {"from": 2}) is True

    assert saver.get("t-one") == one and saver.get("t-two") == two
    assert saver.get_writes("t-one", "ck-1") == [PendingWrite("task", "n", {"from": 1})]
    assert saver.release("t-one") == [one]
    assert saver.get("t-one") is None
    assert saver.get("t-two") == two
    assert saver.get_writes("t-two", "ck-1") == [PendingWrite("task", "n", {"from": 2})]


# -- pending writes ---------------------------------------------------------------------------


def test_put_writes_first_wins_in_insertion_order(saver: BaseCheckpointSaver) -> None:
    saver.put(ckpt(0, checkpoint_id="ck-0"))
    update: dict[str, Any] = {"messages": ["b"], "pair": (1, 2)}
    assert saver.put_writes(THREAD, "ck-0", "task-b", "node-b", update) is True
    assert saver.put_writes(THREAD, "ck-0", "task-a", "node-a", {"x": 1}) is True
    assert saver.put_writes(THREAD, "ck-0", "task-c", "node-c", {}) is True
    assert saver.put_writes(THREAD, "ck-0", "task-b", "node-b", {"messages": ["again"]}) is False
    assert saver.put_writes(THREAD, "ck-other", "task-b", "node-b", {"y": 2}) is True
    update["messages"].append("mutated after put_writes")

    expected = [
        PendingWrite("task-b", "node-b", {"messages": ["b"], "pair": (1, 2)}),
        PendingWrite("task-a", "node-a", {"x": 1}),
        PendingWrite("task-c", "node-c", {}),
    ]
    got = list(saver.get_writes(THREAD, "ck-0"))
    assert got == expected
    got[0].update["messages"].append("mutated after get_writes")
    assert list(saver.get_writes(THREAD, "ck-0")) == expected
    assert list(saver.get_writes(THREAD, "ck-other")) == [
        PendingWrite("task-b", "node-b", {"y": 2})
    ]


# -- release ----------------------------------------------------------------------------------


def test_release_returns_and_deletes_everything(saver: BaseCheckpointSaver) -> None:
    stored = [ckpt(step, checkpoint_id=f"ck-{step}") for step in range(3)]
    for checkpoint in stored:
        saver.put(checkpoint)
    saver.put_writes(THREAD, "ck-0", "task", "n", {"v": 0})
    saver.put_writes(THREAD, "ck-2", "task", "n", {"v": 2})
    kept = ckpt(0, thread="kept")
    saver.put(kept)

    released = list(saver.release(THREAD))

    assert released == list(reversed(stored))
    assert saver.get(THREAD) is None
    assert saver.get(THREAD, "ck-1") is None
    assert list(saver.list(THREAD)) == []
    assert list(saver.get_writes(THREAD, "ck-0")) == []
    assert list(saver.get_writes(THREAD, "ck-2")) == []
    assert list(saver.release(THREAD)) == []
    assert saver.get("kept") == kept
    # The thread is really empty: the same ids and steps can be stored again.
    saver.put(stored[0])
    assert saver.put_writes(THREAD, "ck-0", "task", "n", {"v": "again"}) is True
    assert list(saver.list(THREAD)) == [stored[0]]


# -- serialization failures -------------------------------------------------------------------


class _Opaque:
    pass


def test_non_serializable_value_fails_and_stores_nothing(saver: BaseCheckpointSaver) -> None:
    with pytest.raises(SerializationError) as caught:
        saver.put(ckpt(0, values={"fine": 1, "bad_key": _Opaque()}))
    assert "bad_key" in str(caught.value) and "_Opaque" in str(caught.value)
    assert saver.get(THREAD) is None
    assert list(saver.list(THREAD)) == []

    with pytest.raises(SerializationError):
        saver.put_writes(THREAD, "ck-0", "task", "n", {"bad_key": _Opaque()})
    assert list(saver.get_writes(THREAD, "ck-0")) == []
    assert saver.put_writes(THREAD, "ck-0", "task", "n", {"good": 1}) is True

    # The failed put did not reserve its step: the same run and step can be stored.
    good = ckpt(0, values={"fine": 1})
    saver.put(good)
    assert saver.get(THREAD) == good


# -- several handles and writers --------------------------------------------------------------


def test_every_handle_sees_the_latest_data(
    saver_factory: Callable[[], BaseCheckpointSaver],
) -> None:
    a, b = saver_factory(), saver_factory()
    first = ckpt(0)
    a.put(first)
    assert b.get(THREAD) == first
    second = ckpt(1)
    b.put(second)
    assert a.get(THREAD) == second
    assert a.put_writes(THREAD, first.checkpoint_id, "task", "n", {"v": 1}) is True
    assert b.put_writes(THREAD, first.checkpoint_id, "task", "n", {"v": 2}) is False
    with pytest.raises(CheckpointConflictError):
        b.put(ckpt(1))
    assert list(b.release(THREAD)) == [second, first]
    assert a.get(THREAD) is None


def _race(count: int, action: Callable[[int], Any]) -> list[Any]:
    """Run ``action(i)`` in ``count`` threads released together; outcomes (result or error)."""
    barrier = threading.Barrier(count)
    outcomes: list[Any] = [None] * count

    def run(index: int) -> None:
        barrier.wait(timeout=30)
        try:
            outcomes[index] = action(index)
        except Exception as exc:
            outcomes[index] = exc

    threads = [threading.Thread(target=run, args=(i,)) for i in range(count)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=60)
    return outcomes


def test_threads_racing_for_one_step_store_exactly_one(saver: BaseCheckpointSaver) -> None:
    racers, rounds = 8, 4
    for step in range(rounds):
        candidates = [ckpt(step, values={"writer": i}) for i in range(racers)]

        def put(index: int, candidates: list[Checkpoint] = candidates) -> Checkpoint:
            return saver.put(candidates[index])

        outcomes = _race(racers, put)

        winners = [i for i, o in enumerate(outcomes) if isinstance(o, Checkpoint)]
        assert len(winners) == 1, outcomes
        assert all(
            isinstance(o, CheckpointConflictError)
            for i, o in enumerate(outcomes)
            if i != winners[0]
        ), outcomes
        assert saver.get(THREAD) == candidates[winners[0]]
    assert len(saver.list(THREAD)) == rounds


def test_threads_racing_put_writes_one_wins(saver: BaseCheckpointSaver) -> None:
    racers = 8
    outcomes = _race(
        racers, lambda i: saver.put_writes(THREAD, "ck-0", "task", f"node-{i}", {"writer": i})
    )

    assert sorted(outcomes, key=repr) == [False] * (racers - 1) + [True], outcomes
    winner = outcomes.index(True)
    assert list(saver.get_writes(THREAD, "ck-0")) == [
        PendingWrite("task", f"node-{winner}", {"writer": winner})
    ]


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
        outcomes = _race(4, lambda i: saver.put(ckpt(i)))
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
    outcomes = _race(6, lambda i: sql_saver.put_writes(THREAD, "ck-0", "task", f"n{i}", {"i": i}))
    assert sorted(outcomes, key=repr) == [False] * 5 + [True], outcomes
    assert len(sql_saver.get_writes(THREAD, "ck-0")) == 1
    assert sql_saver.put_writes(THREAD, "ck-0", "task-2", "n", {}) is True
