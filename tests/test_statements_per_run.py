"""The checkpoint store's writes of one 2-node run on Celery (issue 12): each run's first
checkpoint is stored with its stall timer and its run's record (running), its last with the
timer's removal and its record (completed), one statement each on PostgreSQL and one
transaction each on SQLite; ``durability="sync"`` adds the middle step's checkpoint.  The
counts are pinned so that a round trip added to the run's path cannot go unnoticed.

The client's and the (embedded) worker's statements are counted together, on a new thread each
run (no claim: a new thread has nothing to claim).  Reads are bounded, not pinned (the read path
changes apart).
"""

from __future__ import annotations

import uuid
from collections import Counter
from collections.abc import Callable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

import pytest
from celery import Celery

from langgraph_celery import (
    END,
    START,
    Channels,
    CompileConfig,
    CompiledGraph,
    RunnableConfig,
    StateGraph,
)
from langgraph_celery.checkpoint import RunStatus, SqlSaver
from langgraph_celery.worker.embedded import embedded_worker_for
from langgraph_celery.worker.executor import CeleryExecutor
from services import unique_table_prefix

RUNS = 3

#: Writes of a run, by statement (a name of ``checkpoint/_statements.py``; ``tx:`` one inside a
#: transaction) and by database; the same for both durabilities but the middle step's ``put``.
WRITES = {
    "postgresql": {"put_arming_timer_recording": 1, "put_clearing_timer_recording": 1},
    "sqlite": {
        "transactions": 2,
        "tx:upsert_run": 2,
        "tx:upsert_timer": 1,
        "tx:put": 2,
        "tx:clear_timer": 1,
    },
}
#: At most this many reads a run (the client's claim and final read, a worker's step reads).
MOST_READS = {"exit": 3, "sync": 5}


class Counting:
    """Counts the statements ``saver`` runs, by name (its own calls, wrapped)."""

    def __init__(self, saver: SqlSaver) -> None:
        sql = saver._sql
        self.names = {id(v): k for k, v in vars(sql).items() if not isinstance(v, dict | tuple)}
        self.counts: Counter[str] = Counter()
        execute: Callable[[Any, Mapping[str, Any]], Any] = saver._execute
        transaction: Callable[[Sequence[tuple[Any, Mapping[str, Any]]]], list[int]] = (
            saver._transaction
        )

        def counted_execute(statement: Any, params: Mapping[str, Any]) -> Any:
            self.counts[self.names.get(id(statement), "?")] += 1
            return execute(statement, params)

        def counted_transaction(statements: Sequence[tuple[Any, Mapping[str, Any]]]) -> list[int]:
            self.counts["transactions"] += 1
            for statement, _ in statements:
                self.counts["tx:" + self.names.get(id(statement), "?")] += 1
            return transaction(statements)

        saver._execute = counted_execute  # type: ignore[method-assign]
        saver._transaction = counted_transaction  # type: ignore[method-assign]

    def split(self, reads: set[str]) -> tuple[dict[str, int], int]:
        """(the writes by name, the number of reads), per run."""
        writes = {k: v // RUNS for k, v in self.counts.items() if k not in reads and v}
        return writes, sum(v for k, v in self.counts.items() if k in reads) // RUNS


def two_nodes(saver: SqlSaver, redis_url: str) -> CompiledGraph:
    app = Celery(f"count-{uuid.uuid4().hex[:8]}", broker="memory://", set_as_current=False)
    app.conf.result_backend = redis_url
    app.conf.task_default_queue = f"count-{uuid.uuid4().hex[:8]}"
    graph = StateGraph({"log": Channels.appender()})
    graph.add_node("a", lambda s: {"log": "a"}).add_node("b", lambda s: {"log": "b"})
    graph.add_edge(START, "a").add_edge("a", "b").add_edge("b", END)
    executor = CeleryExecutor(app)
    return graph.compile(CompileConfig(checkpoint_saver=saver, executor=executor, graph_id="two"))


@pytest.fixture(params=["sqlite", "postgresql"])
def sql_saver(
    request: pytest.FixtureRequest, tmp_path: Path, postgres_url: str
) -> Iterator[SqlSaver]:
    if request.param == "sqlite":
        saver = SqlSaver(f"sqlite:///{tmp_path / 'runs.db'}")
    else:
        saver = SqlSaver(postgres_url, table_prefix=unique_table_prefix())
    saver.setup()
    yield saver
    saver.dispose()


@pytest.mark.parametrize("durability", ["exit", "sync"])
def test_a_two_node_run_writes_its_first_and_last_checkpoint_with_its_record(
    sql_saver: SqlSaver, redis_url: str, durability: str
) -> None:
    graph = two_nodes(sql_saver, redis_url)
    worker = embedded_worker_for(graph)
    assert worker is not None
    worker.start()
    try:
        graph.invoke({"log": "x"}, RunnableConfig(thread_id=f"warm-{uuid.uuid4().hex[:8]}"))
        counting = Counting(sql_saver)
        threads = [f"two-{uuid.uuid4().hex[:8]}" for _ in range(RUNS)]
        for thread in threads:
            config = RunnableConfig(thread_id=thread, durability=durability)  # type: ignore[arg-type]
            assert graph.invoke({"log": "x"}, config).value("log") == ["x", "a", "b"]
    finally:
        worker.stop()
    reads = {
        name
        for name in counting.names.values()
        if name in ("latest", "by_id", "history", "view_latest", "view_by_id", "writes_of")
    }
    writes, read_count = counting.split(reads)
    expected = dict(WRITES[sql_saver.engine.dialect.name])
    if durability == "sync":  # (the middle step's checkpoint, stored alone)
        expected["put"] = 1
    assert writes == expected
    assert read_count <= MOST_READS[durability]
    runs = [r for r in sql_saver.list_runs("two") if r.thread_id in threads]
    assert [r.status for r in runs] == [RunStatus.COMPLETED] * RUNS
