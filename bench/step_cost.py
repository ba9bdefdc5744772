"""Step cost and storage as the state grows (issue 12): langgraph_celery against LangGraph.

Side by side in one process, on SQLite (a file each) and PostgreSQL (database ``test``, a schema
of its own per run, dropped at the end):

* **step cost**: a 20-node chain, each node appending one message (``{"role", "content"}``, ~100
  bytes) to ``messages`` (our ``Channels.appender()``, LangGraph's ``operator.add``; and
  ``ours typed``: ours on LangGraph's own schema, the ``TypedDict`` with
  ``Annotated[list, operator.add]``), run on a
  thread whose state holds ``small`` (10) and ``large`` (10,000) messages.  A round is one
  invoke of the chain on the thread (its input adds one message, then the 20 steps) and one of
  the same graph cut to its first node; a step's own cost is the difference of their fastest
  rounds over 19, in wall-clock time and in this process's CPU time (one library after the
  other; for each, both threads are made first, then the sizes are timed in turn twice,
  ``rounds / 2`` rounds each time, the better figure kept); ``µs/invoke`` is what an invoke
  costs besides its steps (reading the thread's state, the input, the result: in the size of
  the state, for both libraries).  The *growth* is the large step's cost over the small one's
  (target ours ≤ 2), LangGraph's printed beside.
  Checkpointers: our ``SqlSaver``; LangGraph's ``SqliteSaver`` / ``PostgresSaver``.
* **bytes per step**: what the timed rounds added to the store (our checkpoints' and writes'
  bodies; LangGraph's checkpoints, blobs and writes), over the steps: for both sizes, target
  within 2x of each other.
* **conversation**: 500 turns on one thread, each an invoke whose input is a 1 KB user message
  and whose one node appends a 1 KB reply: 1,000 messages, 1,000 steps.  The database's size
  (SQLite: the file, after a WAL checkpoint; PostgreSQL: ``pg_total_relation_size`` of the
  saver's tables) over the JSON size of the final state: target ≤ 3.  Ours only (LangGraph
  stores the whole message list at every step: about 500 MB here).

Run ``python -m bench.step_cost`` (``--quick``: fewer rounds and turns; ``--profile``: a
cProfile of our large-state invoke on SQLite; ``--no-postgres``).
"""

from __future__ import annotations

import argparse
import cProfile
import gc
import json
import operator
import os
import pstats
import sqlite3
import statistics
import tempfile
import time
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any, TypedDict

import psycopg
from langgraph.checkpoint.postgres import PostgresSaver
from langgraph.checkpoint.sqlite import SqliteSaver
from langgraph.graph import END as LG_END
from langgraph.graph import START as LG_START
from langgraph.graph import StateGraph as LGStateGraph
from sqlalchemy import text

from langgraph_celery import END, START, Channels, CompileConfig, RunnableConfig, StateGraph
from langgraph_celery.checkpoint import SqlSaver

CHAIN = 20
SIZES = {"small": 10, "large": 10_000}
PG_URL = os.environ.get("LGC_BENCH_PG_STEP_URL", "postgresql://postgres@127.0.0.1:5432/test")
TARGET_GROWTH = 2.0
TARGET_BYTES = 2.0
TARGET_STORAGE = 3.0


class LGState(TypedDict):
    messages: Annotated[list[Any], operator.add]


def _message(index: int, size: int = 100) -> dict[str, str]:
    content = f"message {index} "
    return {"role": "ai", "content": content + "x" * max(0, size - len(content) - 30)}


def _chain_node(index: int) -> Callable[..., dict[str, Any]]:
    def node(state: Any, *_: Any) -> dict[str, Any]:
        return {"messages": [_message(index)]}

    return node


NODES = [(f"n{i}", _chain_node(i)) for i in range(CHAIN)]


# -- the two libraries --------------------------------------------------------------------------


@dataclass
class Side:
    """One library on one store: ``invoke(input, thread)``, ``stored()`` bytes in its tables."""

    name: str
    invoke: Callable[[dict[str, Any], str], Any]
    stored: Callable[[], int]
    #: the same graph with one node, on the same store
    invoke_one: Callable[[dict[str, Any], str], Any]


def _ours(
    saver: SqlSaver, nodes: list[tuple[str, Any]], typed: bool = False
) -> Callable[[dict[str, Any], str], Any]:
    graph = StateGraph(LGState) if typed else StateGraph({"messages": Channels.appender()})
    previous = START
    for name, fn in nodes:
        graph.add_node(name, fn)
        graph.add_edge(previous, name)
        previous = name
    graph.add_edge(previous, END)
    app = graph.compile(CompileConfig(checkpoint_saver=saver, recursion_limit=1_000))
    return lambda value, thread: app.invoke(value, RunnableConfig(thread_id=thread))


def _theirs(
    checkpointer: Any, nodes: list[tuple[str, Any]]
) -> Callable[[dict[str, Any], str], Any]:
    graph = LGStateGraph(LGState)
    previous = LG_START
    for name, fn in nodes:
        graph.add_node(name, fn)
        graph.add_edge(previous, name)
        previous = name
    graph.add_edge(previous, LG_END)
    app = graph.compile(checkpointer=checkpointer)
    return lambda value, thread: app.invoke(
        value, {"configurable": {"thread_id": thread}, "recursion_limit": 1_000}
    )


def _ours_typed(saver: SqlSaver) -> Side:
    """Ours on LangGraph's schema (``operator.add``, a reducer of the user's), same store."""
    return Side(
        "ours typed",
        _ours(saver, NODES, typed=True),
        lambda: _our_bytes(saver),
        _ours(saver, NODES[:1], typed=True),
    )


def _our_bytes(saver: SqlSaver) -> int:
    prefix = saver.table_prefix
    with saver.engine.connect() as conn:
        total = 0
        for name in ("checkpoints", "writes"):
            total += int(
                conn.execute(
                    text(f"SELECT coalesce(sum(length(body)), 0) FROM {prefix}{name}")
                ).scalar_one()
            )
    return total


_LG_SQLITE_BYTES = (
    "SELECT (SELECT coalesce(sum(length(checkpoint) + length(metadata)), 0) FROM checkpoints)"
    " + (SELECT coalesce(sum(length(value)), 0) FROM writes)"
)
_LG_PG_BYTES = (
    "SELECT (SELECT coalesce(sum(octet_length(checkpoint::text) + octet_length(metadata::text)),"
    " 0) FROM checkpoints) + (SELECT coalesce(sum(octet_length(blob)), 0) FROM checkpoint_blobs)"
    " + (SELECT coalesce(sum(octet_length(blob)), 0) FROM checkpoint_writes)"
)


@contextmanager
def sqlite_sides(directory: Path) -> Iterator[list[Side]]:
    ours = SqlSaver(f"sqlite:///{directory / 'ours.db'}")
    ours.setup()
    connection = sqlite3.connect(directory / "langgraph.db", check_same_thread=False)
    theirs = SqliteSaver(connection)
    theirs.setup()

    def their_bytes() -> int:
        return int(connection.execute(_LG_SQLITE_BYTES).fetchone()[0])

    try:
        yield [
            Side("ours", _ours(ours, NODES), lambda: _our_bytes(ours), _ours(ours, NODES[:1])),
            _ours_typed(ours),
            Side("langgraph", _theirs(theirs, NODES), their_bytes, _theirs(theirs, NODES[:1])),
        ]
    finally:
        ours.dispose()
        connection.close()


@contextmanager
def postgres_schema() -> Iterator[str]:
    """A schema of its own in database ``test``, dropped at the end."""
    schema = f"bench_step_{uuid.uuid4().hex[:8]}"
    with psycopg.connect(PG_URL, autocommit=True) as conn:
        conn.execute(f"CREATE SCHEMA {schema}")
    try:
        yield schema
    finally:
        with psycopg.connect(PG_URL, autocommit=True) as conn:
            conn.execute(f"DROP SCHEMA {schema} CASCADE")


@contextmanager
def postgres_sides(schema: str) -> Iterator[list[Side]]:
    url = f"{PG_URL}?options=-csearch_path%3D{schema}"
    ours = SqlSaver(url.replace("postgresql://", "postgresql+psycopg://"), table_prefix="ours_")
    ours.setup()
    connection = psycopg.connect(url, autocommit=True, prepare_threshold=0)
    theirs = PostgresSaver(connection)  # type: ignore[arg-type]
    theirs.setup()

    def their_bytes() -> int:
        row = connection.execute(_LG_PG_BYTES).fetchone()
        return int(row[0]) if row else 0

    try:
        yield [
            Side("ours", _ours(ours, NODES), lambda: _our_bytes(ours), _ours(ours, NODES[:1])),
            _ours_typed(ours),
            Side("langgraph", _theirs(theirs, NODES), their_bytes, _theirs(theirs, NODES[:1])),
        ]
    finally:
        ours.dispose()
        connection.close()


# -- step cost ----------------------------------------------------------------------------------


@dataclass
class StepFigures:
    #: a step's own cost: (20-node invoke - 1-node invoke) / 19, wall clock
    us_per_step: float
    #: the same in this process's CPU time (SQLite's work included, PostgreSQL's server not)
    cpu_us_per_step: float
    #: what an invoke costs besides its steps (reading the thread, the input, the result)
    us_per_invoke: float
    bytes_per_step: float


def prepare(side: Side, size: int) -> str:
    """A thread of ``size`` messages, warmed by one invoke of each graph."""
    thread = f"{side.name}-{size}-{uuid.uuid4().hex[:6]}"
    side.invoke({"messages": [_message(i) for i in range(size - CHAIN)]}, thread)
    side.invoke({"messages": [_message(-1)]}, thread)
    side.invoke_one({"messages": [_message(-1)]}, thread)
    return thread


def measure(side: Side, thread: str, rounds: int) -> StepFigures:
    """``rounds`` rounds on ``thread``, each a timed invoke of the chain and one of the one-node
    graph (alternating which goes first)."""
    chain: list[tuple[float, float]] = []
    one: list[tuple[float, float]] = []
    written = 0
    for index in range(rounds):
        runs = [(side.invoke, chain), (side.invoke_one, one)]
        for invoke, times in runs if index % 2 else runs[::-1]:
            before = side.stored()
            gc.collect()  # (outside the timed region: neither pays for the other's garbage)
            start, cpu = time.perf_counter(), time.process_time()
            invoke({"messages": [_message(-1)]}, thread)
            times.append((time.perf_counter() - start, time.process_time() - cpu))
            if times is chain:
                written += side.stored() - before
    # (the fastest round: on a shared machine the others also measure the machine's other work)
    wall = (min(t for t, _ in chain) - min(t for t, _ in one)) / (CHAIN - 1)
    cpu = (min(c for _, c in chain) - min(c for _, c in one)) / (CHAIN - 1)
    invoke_alone = min(t for t, _ in one) - wall
    return StepFigures(wall * 1e6, cpu * 1e6, invoke_alone * 1e6, written / (rounds * CHAIN))


def step_cost(sides: list[Side], rounds: int) -> dict[str, dict[str, StepFigures]]:
    """One library after the other (LangGraph's writes of whole states keep the database server
    busy after they return, which would land on our timings if interleaved).  For each, both
    threads are made before either is timed (the same heap for both sizes), then the sizes are
    timed in turn, small, large, small, large, half the rounds each time."""
    figures: dict[str, dict[str, StepFigures]] = {}
    for side in sides:
        threads = {label: prepare(side, size) for label, size in SIZES.items()}
        samples: dict[str, list[StepFigures]] = {label: [] for label in SIZES}
        for _ in range(2):
            for label, thread in threads.items():
                samples[label].append(measure(side, thread, max(1, rounds // 2)))
        figures[side.name] = {
            label: StepFigures(
                min(f.us_per_step for f in found),
                min(f.cpu_us_per_step for f in found),
                min(f.us_per_invoke for f in found),
                statistics.fmean(f.bytes_per_step for f in found),
            )
            for label, found in samples.items()
        }
    return figures


def report_steps(store: str, figures: dict[str, dict[str, StepFigures]]) -> list[str]:
    lines = [f"step cost on {store} (a 20-node chain, one message appended per step)"]
    lines.append(
        f"  {'':10} {'µs/step 10':>11} {'µs/step 10k':>12} {'growth':>7} {'CPU growth':>11}"
        f" {'µs/invoke 10':>13} {'µs/invoke 10k':>14}"
        f" {'B/step 10':>10} {'B/step 10k':>11} {'bytes ratio':>12}"
    )
    for name, by_size in figures.items():
        small, large = by_size["small"], by_size["large"]
        growth = large.us_per_step / small.us_per_step
        cpu_growth = large.cpu_us_per_step / small.cpu_us_per_step
        ratio = large.bytes_per_step / max(small.bytes_per_step, 1.0)
        lines.append(
            f"  {name:10} {small.us_per_step:11.0f} {large.us_per_step:12.0f} {growth:7.2f}"
            f" {cpu_growth:11.2f} {small.us_per_invoke:13.0f} {large.us_per_invoke:14.0f}"
            f" {small.bytes_per_step:10.0f} {large.bytes_per_step:11.0f} {ratio:12.2f}"
        )
    ours = figures["ours"]
    growth = ours["large"].us_per_step / ours["small"].us_per_step
    ratio = ours["large"].bytes_per_step / max(ours["small"].bytes_per_step, 1.0)
    lines.append(
        f"  targets: ours growth {growth:.2f} ≤ {TARGET_GROWTH} "
        f"{'ok' if growth <= TARGET_GROWTH else 'MISSED'}; bytes ratio {ratio:.2f} ≤ "
        f"{TARGET_BYTES} {'ok' if ratio <= TARGET_BYTES else 'MISSED'}"
    )
    return lines


# -- the conversation ---------------------------------------------------------------------------


def _reply(state: Any, *_: Any) -> dict[str, Any]:
    return {"messages": [_message(len(state.value("messages", ())), 1024)]}


def _user_reply(state: Any, *_: Any) -> dict[str, Any]:
    return {"messages": [_message(0, 1024)]}


def conversation(saver: SqlSaver, turns: int) -> tuple[int, Any]:
    """``turns`` invokes: a 1 KB user message in, a 1 KB reply appended; the final state's JSON
    size and the final state."""
    invoke = _ours(saver, [("reply", _user_reply)])
    state: Any = None
    for turn in range(turns):
        state = invoke({"messages": [{"role": "user", "content": f"{turn} " + "u" * 1000}]}, "c")
    return len(json.dumps(dict(state))), state


def sqlite_conversation(directory: Path, turns: int) -> tuple[int, int]:
    path = directory / "conversation.db"
    saver = SqlSaver(f"sqlite:///{path}")
    size, _ = conversation(saver, turns)
    saver.dispose()
    with sqlite3.connect(path) as conn:
        conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    return path.stat().st_size, size


def postgres_conversation(schema: str, turns: int) -> tuple[int, int]:
    url = f"{PG_URL}?options=-csearch_path%3D{schema}".replace(
        "postgresql://", "postgresql+psycopg://"
    )
    saver = SqlSaver(url, table_prefix="conv_")
    size, _ = conversation(saver, turns)
    with saver.engine.connect() as conn:
        conn.execute(text("VACUUM")) if False else None
        stored = int(
            conn.execute(
                text(
                    "SELECT sum(pg_total_relation_size(quote_ident(table_schema) || '.' || "
                    "quote_ident(table_name))) FROM information_schema.tables "
                    "WHERE table_schema = :schema AND table_name LIKE 'conv\\_%'"
                ),
                {"schema": schema},
            ).scalar_one()
        )
    saver.dispose()
    return stored, size


def report_conversation(store: str, stored: int, state: int, turns: int) -> str:
    ratio = stored / state
    verdict = "ok" if ratio <= TARGET_STORAGE else "MISSED"
    return (
        f"conversation on {store}: {2 * turns} messages of 1 KB, final state {state / 1e6:.2f} MB"
        f" JSON, database {stored / 1e6:.2f} MB: x{ratio:.2f} (target ≤ {TARGET_STORAGE}: "
        f"{verdict})"
    )


# -- main ---------------------------------------------------------------------------------------


def profile(directory: Path) -> None:
    with sqlite_sides(directory) as sides:
        ours = sides[0]
        thread = "profiled"
        ours.invoke({"messages": [_message(i) for i in range(SIZES["large"])]}, thread)
        ours.invoke({"messages": [_message(-1)]}, thread)
        profiler = cProfile.Profile()
        profiler.enable()
        for _ in range(5):
            ours.invoke({"messages": [_message(-1)]}, thread)
        profiler.disable()
        pstats.Stats(profiler).sort_stats("cumulative").print_stats(35)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--profile", action="store_true")
    parser.add_argument("--no-postgres", action="store_true")
    args = parser.parse_args()
    rounds, turns = (3, 100) if args.quick else (15, 500)
    with tempfile.TemporaryDirectory(prefix="lgc-step-cost-") as name:
        directory = Path(name)
        if args.profile:
            profile(directory)
            return
        lines: list[str] = []
        with sqlite_sides(directory) as sides:
            lines += report_steps("SQLite", step_cost(sides, rounds))
        stored, state = sqlite_conversation(directory, turns)
        lines.append(report_conversation("SQLite", stored, state, turns))
        if not args.no_postgres:
            with postgres_schema() as schema:
                with postgres_sides(schema) as sides:
                    lines += report_steps("PostgreSQL", step_cost(sides, rounds))
                stored, state = postgres_conversation(schema, turns)
                lines.append(report_conversation("PostgreSQL", stored, state, turns))
    print("\n".join(lines))


if __name__ == "__main__":
    main()
