"""Issue 12, item 4: ``langgraph-celery prune`` in new processes, on threads this test stored
in a SQLite file (``--db``): one thread or every thread of the graph, text or ``--json``,
``--dry-run``; usage errors exit 2."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from cli_retention_graphs import build
from langgraph_celery import GraphInput, RunnableConfig

TESTS = Path(__file__).resolve().parent
CLI = [sys.executable, "-m", "langgraph_celery.cli"]
TARGET = "cli_retention_graphs:agent"


def cli(*args: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("LGC_")}
    return subprocess.run(
        [*CLI, *args], cwd=TESTS, env=env, capture_output=True, text=True, timeout=60, check=False
    )


@pytest.fixture
def db(tmp_path: Path) -> str:
    return f"sqlite:///{tmp_path / 'retention.sqlite'}"


def store(db: str, thread: str, runs: int, park: bool = False) -> Any:
    """``runs`` completed runs of the agent on ``thread``, then one left parked if ``park``."""
    graph = build(db)
    config = RunnableConfig(thread_id=thread)
    for _ in range(runs):
        graph.invoke({}, config)
        graph.invoke(GraphInput.resume(), config)
    if park:
        graph.invoke({}, config)
    return graph


def ok(result: subprocess.CompletedProcess[str]) -> str:
    assert result.returncode == 0, (result.returncode, result.stdout, result.stderr)
    assert result.stderr == ""
    return result.stdout


def test_prune_one_thread(db: str) -> None:
    graph = store(db, "t1", runs=2)
    assert len(graph.get_state_history(RunnableConfig(thread_id="t1"))) == 10

    out = ok(cli("prune", TARGET, "--thread", "t1", "--keep-last", "3", "--db", db))

    assert out == "thread t1: 7 checkpoint(s) removed, 3 kept\n"
    history = graph.get_state_history(RunnableConfig(thread_id="t1"))
    assert len(history) == 3 and history[0].values["log"] == ["a", "b", "c"] * 2


def test_prune_dry_run_as_json_removes_nothing(db: str) -> None:
    graph = store(db, "t1", runs=1, park=True)  # parked before c: latest and parent held
    before = graph.get_state_history(RunnableConfig(thread_id="t1"))

    out = ok(
        cli(
            "prune", TARGET, "--thread", "t1", "--keep-last", "1", "--dry-run", "--json", "--db", db
        )
    )

    document = json.loads(out)
    assert document["keep_last"] == 1 and document["dry_run"] is True
    (thread,) = document["threads"]
    assert thread["thread_id"] == "t1"
    assert [(k["checkpoint_id"], k["reason"]) for k in thread["kept"]] == [
        (before[0].checkpoint_id, "last"),
        (before[1].checkpoint_id, "parent"),
    ]
    assert thread["kept"][1]["detail"] == before[0].checkpoint_id
    assert thread["deleted"] == [s.checkpoint_id for s in before[2:]]
    assert graph.get_state_history(RunnableConfig(thread_id="t1")) == before


def test_prune_every_thread_of_the_graph(db: str) -> None:
    store(db, "done", runs=2)
    store(db, "parked", runs=0, park=True)
    other = build(db, graph_id="another-graph")
    other.invoke({}, RunnableConfig(thread_id="not-mine"))

    text = ok(cli("prune", TARGET, "--all", "--keep-last", "1", "--dry-run", "--db", db))
    assert text.splitlines() == [
        f"thread parked: 1 checkpoint(s) would be removed, 2 kept; beyond the last: "
        f"{parent} (parent of {latest})"
        for latest, parent in [_ids_of(db, "parked")]
    ] + ["thread done: 9 checkpoint(s) would be removed, 1 kept"]

    document = json.loads(
        ok(cli("prune", TARGET, "--all", "--keep-last", "1", "--json", "--db", db))
    )
    removed = {t["thread_id"]: len(t["deleted"]) for t in document["threads"]}
    assert removed == {"done": 9, "parked": 1}
    assert len(other.get_state_history(RunnableConfig(thread_id="not-mine"))) == 3
    assert len(build(db).get_state_history(RunnableConfig(thread_id="done"))) == 1


def test_a_thread_of_another_graph_is_refused_and_kept(db: str) -> None:
    other = build(db, graph_id="another-graph")
    config = RunnableConfig(thread_id="not-mine")
    other.invoke({}, config)
    result = cli("prune", TARGET, "--thread", "not-mine", "--keep-last", "1", "--db", db)
    assert result.returncode == 2 and result.stdout == ""
    assert "thread 'not-mine' holds runs of graph 'another-graph', not of" in result.stderr
    assert len(other.get_state_history(config)) == 3


def _ids_of(db: str, thread: str) -> tuple[str, str]:
    history = build(db).get_state_history(RunnableConfig(thread_id=thread))
    return history[0].checkpoint_id, history[1].checkpoint_id


@pytest.mark.parametrize(
    ("args", "message"),
    [
        ([TARGET, "--keep-last", "1"], "one of the arguments --thread --all is required"),
        ([TARGET, "--thread", "t", "--all", "--keep-last", "1"], "not allowed with argument"),
        ([TARGET, "--thread", "t"], "the following arguments are required: --keep-last"),
        ([TARGET, "--thread", "t", "--keep-last", "0"], "'0' is not a number of checkpoints"),
        ([TARGET, "--thread", "t", "--keep-last", "x"], "'x' is not a number of checkpoints"),
        ([TARGET, "--thread", "", "--keep-last", "1"], "a thread id cannot be empty"),
        (
            ["cli_retention_graphs:stateless", "--thread", "t", "--keep-last", "1"],
            "has no checkpoint saver, so it keeps no threads to prune",
        ),
        (
            ["cli_retention_graphs:anonymous", "--all", "--keep-last", "1"],
            "compile it with CompileConfig(graph_id=...), or name a thread with --thread",
        ),
    ],
)
def test_usage_errors_exit_2(db: str, args: list[str], message: str) -> None:
    result = cli("prune", *args, "--db", db)
    assert result.returncode == 2, (result.stdout, result.stderr)
    assert message in result.stderr and result.stdout == ""
