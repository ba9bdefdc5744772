"""The ``langgraph-celery`` command line, run as subprocesses, and the deployment files.

Every command runs in a fresh process, as a user would run it: the demo on the in-memory broker
with an in-process worker and SQLite checkpoints, then on Redis with a real ``celery worker``.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import shutil
import signal
import socket
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import create_engine, inspect

from langgraph_celery._cli_secrets import masked
from langgraph_celery.checkpoint import SqlSaver
from services import flushed_redis_db, fresh_postgres_database, redis_server_url, require

TESTS = Path(__file__).resolve().parent
ROOT = TESTS.parent
CLI = [sys.executable, "-m", "langgraph_celery.cli"]
DEMO = "langgraph_celery.demo:graph"
#: Redis database of the test that runs the demo on a real worker (flushed before and after).
DEMO_REDIS_DB = 13


def _env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("LGC_")}
    env["PYTHONUNBUFFERED"] = "1"
    env.update(extra)
    return env


def cli(*args: str, timeout: float = 30.0, cwd: Path = TESTS) -> subprocess.CompletedProcess[str]:
    """``langgraph-celery ARGS`` in a new process, from ``tests/`` (so ``cli_graphs`` imports)."""
    return subprocess.run(
        [*CLI, *args],
        cwd=cwd,
        env=_env(),
        capture_output=True,
        text=True,
        timeout=timeout,
    )


def ok(result: subprocess.CompletedProcess[str]) -> str:
    assert result.returncode == 0, f"exit {result.returncode}\n{result.stdout}\n{result.stderr}"
    return result.stdout


def state_of(db: str, thread: str, target: str = DEMO) -> dict[str, Any]:
    state = cli("state", target, "--thread", thread, "--db", db, "--json")
    snapshot: dict[str, Any] = json.loads(ok(state))
    return snapshot


def completed_state(stdout: str) -> dict[str, Any]:
    """The JSON document printed after ``completed:``."""
    assert "completed:" in stdout, stdout
    final: dict[str, Any] = json.loads(stdout.split("completed:\n", 1)[1])
    return final


@pytest.fixture
def db(tmp_path: Path) -> str:
    return f"sqlite:///{tmp_path / 'checkpoints.sqlite'}"


# -- the demo, with no servers ------------------------------------------------------------------


def test_demo_shows_the_diagram_parks_then_approves_and_completes(tmp_path: Path) -> None:
    out = ok(cli("demo", "--thread", "demo-full", "--topic", "the launch", cwd=tmp_path))
    db = f"sqlite:///{tmp_path / 'langgraph-celery-demo.sqlite'}"  # the default, in the cwd
    assert "  checkpoints: sqlite:///langgraph-celery-demo.sqlite\n" in out

    diagram = out.index("flowchart TD")
    assert "n_draft --> n_approve" in out
    draft = out.index(
        '\ndraft: {"draft": {"to": "team@example.com", "subject": "Update: the launch"'
    )
    park = out.index("parked at node 'approve': a human approves the draft before it is sent")
    assert (
        "langgraph-celery resume langgraph_celery.demo:graph --thread demo-full "
        "--update '{\"approved\": true}'\n"
    ) in out
    approve = out.index('\napprove: {"status": "approved"}')
    send = out.index('\nsend: {"status": "sent"')
    assert diagram < draft < park < approve < send
    final = completed_state(out)
    assert final["status"] == "sent"
    assert final["approved"] is True
    assert final["receipt"] == "sent 'Update: the launch' to team@example.com"

    snapshot = state_of(db, "demo-full")
    assert snapshot["values"] == final
    assert snapshot["next"] == []


def test_demo_on_a_broker_prints_a_worker_command_with_the_same_store(tmp_path: Path) -> None:
    """The demo's default store is a SQLite file of the working directory: the worker command
    it prints names that file by its absolute path, so a worker started anywhere opens it."""
    result = cli("demo", "--park", "--broker", "redis://127.0.0.1:1/0", cwd=tmp_path)
    assert result.returncode == 2  # (nothing listens on port 1)
    store = f"sqlite:///{tmp_path / 'langgraph-celery-demo.sqlite'}"
    assert f"LGC_DATABASE_URL={store} celery -A langgraph_celery.demo worker\n" in result.stdout


def test_demo_park_then_the_printed_command_resumes_it_in_a_new_process(db: str) -> None:
    out = ok(cli("demo", "--park", "--db", db, "--thread", "demo-parked"))
    assert "parked at node 'approve'" in out
    assert "completed:" not in out and "\nsend:" not in out
    expected = (
        "langgraph-celery resume langgraph_celery.demo:graph --thread demo-parked "
        f"--update '{{\"approved\": true}}' --db {db}"
    )
    assert f"  {expected}\n" in out

    parked = state_of(db, "demo-parked")
    assert parked["next"] == ["approve"]
    assert "approved" not in parked["values"] and "draft" in parked["values"]

    # Run the printed command as it is, with the console script when it is installed.
    words = shlex.split(expected)
    script = Path(sys.executable).with_name("langgraph-celery")
    words[:1] = [str(script)] if script.exists() else CLI
    resumed = subprocess.run(
        words, cwd=TESTS, env=_env(), capture_output=True, text=True, timeout=30
    )
    out = ok(resumed)
    assert out.index("approve: ") < out.index("send: ")
    assert completed_state(out)["status"] == "sent"

    final = state_of(db, "demo-parked")
    assert final["values"]["status"] == "sent" and final["values"]["approved"] is True
    history = json.loads(ok(cli("history", DEMO, "--thread", "demo-parked", "--db", db)))
    assert [s["node"] for s in history][:3] == ["send", "approve", "draft"]
    assert history[0]["checkpoint_id"] == final["checkpoint_id"]
    assert [s["step"] for s in history] == sorted((s["step"] for s in history), reverse=True)


def test_draw_prints_mermaid_and_plantuml() -> None:
    mermaid = ok(cli("draw", DEMO))
    assert mermaid.startswith("---\ntitle: langgraph-celery-demo\n---\nflowchart TD\n")
    assert 'n_approve -.->|"send"| n_send' in mermaid
    plantuml = ok(cli("draw", DEMO, "--format", "plantuml", "--title", "Approval"))
    assert plantuml.startswith("@startuml\ntitle Approval\n")
    assert plantuml.rstrip().endswith("@enduml")


# -- run, resume, state and history on in-process graphs ----------------------------------------


def test_run_an_in_process_graph_with_json_input() -> None:
    out = ok(cli("run", "cli_graphs:arithmetic", "--input", '{"n": 4, "add": 3}'))
    lines = out.splitlines()
    assert lines[0] == '__START__: {"n": 4, "add": 3}'
    assert lines[1] == 'double: {"total": 8, "steps": ["double"]}'
    assert lines[2] == 'add: {"total": 11, "steps": ["add"]}'
    assert completed_state(out) == {"n": 4, "add": 3, "total": 11, "steps": ["double", "add"]}


def test_run_parks_and_resume_state_history_continue_in_new_processes(db: str) -> None:
    target = "cli_graphs:checkpointed"
    out = ok(cli("run", target, "--input", '{"n": 5}', "--db", db))
    thread = re.search(r"^thread: (thread-[0-9a-f]{12})$", out, re.M)
    assert thread is not None, out
    assert "parked at node 'add'" in out
    assert f"langgraph-celery resume {target} --thread {thread[1]} --db {db}" in out

    parked = state_of(db, thread[1], target)
    assert parked["next"] == ["add"] and parked["values"]["total"] == 10

    out = ok(cli("resume", target, "--thread", thread[1], "--update", '{"add": 7}', "--db", db))
    assert completed_state(out)["total"] == 17
    assert state_of(db, thread[1], target)["values"]["total"] == 17
    history = json.loads(ok(cli("history", target, "--thread", thread[1], "--db", db)))
    assert history[0]["values"]["total"] == 17
    assert history[-1]["values"] == {"n": 5, "steps": []}
    flagged = cli("history", target, "--thread", thread[1], "--db", db, "--json")
    assert json.loads(ok(flagged)) == history  # (--json as the other commands take it)


def test_run_starts_a_worker_thread_for_a_module_on_the_in_memory_broker(db: str) -> None:
    out = ok(
        cli("run", "cli_graphs:routed", "--input", '{"n": 2}', "--thread", "routed", "--db", db)
    )
    assert out.index("double: ") < out.index("add: ")  # `add` ran from its own queue
    assert completed_state(out)["total"] == 5
    assert state_of(db, "routed", "cli_graphs:routed")["values"]["steps"] == ["double", "add"]


# -- errors -------------------------------------------------------------------------------------


def test_bad_json_names_the_flag_and_the_parse_error() -> None:
    result = cli("run", "cli_graphs:arithmetic", "--input", "{n: 4}")
    assert result.returncode == 2
    assert "--input is not valid JSON (Expecting property name enclosed in double quotes" in (
        result.stderr
    )
    assert result.stdout == ""
    result = cli("resume", DEMO, "--thread", "t", "--update", "[true]")
    assert result.returncode == 2
    assert "--update must be a JSON object, got list" in result.stderr
    result = cli("run", "cli_graphs:arithmetic", "--input", '{"n": NaN}')  # Python's, not JSON
    assert result.returncode == 2
    assert "--input holds NaN, which JSON does not have" in result.stderr


@pytest.mark.parametrize("command", ["run", "resume", "state", "history"])
def test_an_empty_thread_id_is_refused(command: str, db: str) -> None:
    result = cli(command, "cli_graphs:checkpointed", "--thread", "", "--db", db)
    assert result.returncode == 2 and result.stdout == ""
    assert "a thread id cannot be empty" in result.stderr


@pytest.mark.parametrize("command", ["run", "resume", "state", "history", "prune"])
def test_a_thread_id_longer_than_the_store_keeps_is_a_usage_error(command: str, db: str) -> None:
    # (SPEC §8: ids are at most 255 characters; on the command line that is a usage error,
    # exit 2, like an empty one, not a failure of the command, exit 1)
    words = ["--keep-last", "1"] if command == "prune" else []
    result = cli(command, "cli_graphs:checkpointed", "--thread", "t" * 256, "--db", db, *words)
    assert result.returncode == 2 and result.stdout == "", result
    assert "the thread id is 256 characters long; ids have at most 255" in result.stderr
    assert "Traceback" not in result.stderr
    assert not Path(db.removeprefix("sqlite:///")).exists()  # (nothing was stored)


@pytest.mark.parametrize(
    ("target", "message"),
    [
        ("no_such_module:graph", "cannot import module 'no_such_module'"),
        ("cli_graphs:missing", "module 'cli_graphs' has no attribute 'missing'"),
        ("cli_graphs:builder", "cli_graphs:builder is a StateGraph, not a CompiledGraph"),
        ("cli_graphs", "expected MODULE:GRAPH"),
    ],
)
def test_bad_module_graph_says_what_is_wrong(target: str, message: str) -> None:
    result = cli("draw", target)
    assert result.returncode == 2, result
    assert message in result.stderr
    assert "Traceback" not in result.stderr


def test_a_failing_node_is_one_clean_line_and_exit_1() -> None:
    result = cli("run", "cli_graphs:failing", "--input", '{"n": 4}')
    assert result.returncode == 1
    assert result.stderr.startswith(
        "langgraph-celery run: NodeError: node 'boom' failed with ValueError: cannot handle n=4."
    )
    assert len(result.stderr.strip().splitlines()) == 1


def test_state_of_an_unknown_thread_is_a_graph_state_error(db: str) -> None:
    saver = SqlSaver(db)  # a store that exists, without the thread
    saver.setup()
    saver.dispose()
    result = cli("state", DEMO, "--thread", "nobody", "--db", db)
    assert result.returncode == 1
    assert (
        result.stderr.strip()
        == "langgraph-celery state: GraphStateError: thread 'nobody' has no checkpoint"
    )


def test_commands_that_read_a_missing_sqlite_store_say_so_and_create_none(tmp_path: Path) -> None:
    path = tmp_path / "mistyped.sqlite"
    note = f"no SQLite database at {path}: nothing is stored there, and reading creates none"
    run_id = "f" * 32
    cases: list[tuple[tuple[str, ...], int, str]] = [
        (("state", DEMO, "--thread", "t"), 1, ""),
        (("history", DEMO, "--thread", "t"), 0, "[]"),
        (("runs", DEMO), 0, f"no runs of {DEMO}"),
        (("runs", DEMO, "--json"), 0, '{\n  "runs": [],\n  "next_before": null\n}'),
        (("status", run_id), 1, ""),
        (("status", "langgraph_celery.demo", run_id), 1, ""),
        (("cancel", run_id), 1, ""),
        (("prune", DEMO, "--all", "--keep-last", "1"), 0, "no thread of graph"),
    ]
    for args, code, printed in cases:
        result = cli(*args, "--db", f"sqlite:///{path}")
        assert result.returncode == code, (args, result.stderr)
        assert note in result.stderr, (args, result.stderr)
        assert result.stdout.startswith(printed), (args, result.stdout)
        assert not path.exists(), f"{args[0]} created the database it was to read"


def test_commands_that_read_a_database_without_our_tables_say_so_and_create_none() -> None:
    with fresh_postgres_database("lgc_cli_empty") as url:
        shown = masked(url)
        note = f"no tables lgc_* in {shown}: nothing is stored there, and reading creates none"
        cases: list[tuple[tuple[str, ...], int, str]] = [
            (("state", DEMO, "--thread", "t"), 1, ""),
            (("history", DEMO, "--thread", "t"), 0, "[]"),
            (("runs", DEMO), 0, f"no runs of {DEMO}"),
            (("status", "f" * 32), 1, ""),
            (("cancel", "f" * 32), 1, ""),
            (("prune", DEMO, "--all", "--keep-last", "1"), 0, "no thread of graph"),
        ]
        for args, code, printed in cases:
            result = cli(*args, "--db", url)
            assert result.returncode == code, (args, result.stderr)
            assert note in result.stderr, (args, result.stderr)
            assert result.stdout.startswith(printed), (args, result.stdout)
            engine = create_engine(url)
            try:
                assert inspect(engine).get_table_names() == [], f"{args[0]} created tables"
            finally:
                engine.dispose()
        # once set up (by any process), the same commands read it
        saver = SqlSaver(url)
        saver.setup()
        saver.dispose()
        result = cli("runs", DEMO, "--db", url)
        assert result.returncode == 0 and "no tables" not in result.stderr, result.stderr


def test_a_store_that_fails_is_named_with_where_it_came_from(tmp_path: Path) -> None:
    # (the SQLite "database" is a folder: it exists, and cannot be opened)
    for database in ("postgresql://nobody:pw-Secret@127.0.0.1:1/x", str(tmp_path)):
        result = cli("state", "cli_graphs:checkpointed", "--thread", "t", "--db", database)
        assert result.returncode == 1 and "OperationalError" in result.stderr
        shown = database.replace("pw-Secret", "**")
        shown = shown if "://" in shown else f"sqlite:///{shown}"
        assert f"note: the checkpoint database is {shown} (from --db): " in result.stderr
        assert "Background on this error" not in result.stderr
        assert "pw-Secret" not in result.stderr


def test_worker_refuses_the_in_memory_broker() -> None:
    result = cli("worker", "langgraph_celery.demo")
    assert result.returncode == 2
    assert "in-memory broker (memory://)" in result.stderr


# -- the demo on Redis with a real worker process -----------------------------------------------


@pytest.fixture
def demo_redis() -> Iterator[str]:
    server, reachable, detail = redis_server_url()
    require("redis", reachable, detail)
    with flushed_redis_db(server, DEMO_REDIS_DB) as url:
        yield url


def test_demo_on_redis_runs_every_node_on_a_celery_worker_process(
    demo_redis: str, db: str, tmp_path: Path
) -> None:
    env = _env(LGC_BROKER_URL=demo_redis, LGC_DATABASE_URL=db)
    log = (tmp_path / "worker.log").open("w")
    celery = shutil.which("celery", path=str(Path(sys.executable).parent)) or "celery"
    worker = subprocess.Popen(
        [
            celery,
            "-A",
            "langgraph_celery.demo",
            "worker",
            "--pool=solo",
            "--loglevel=INFO",
            "-n",
            f"cli-test-{uuid.uuid4().hex[:8]}@%h",
            "--without-mingle",
            "--without-gossip",
        ],
        cwd=TESTS,
        env=env,
        stdout=log,
        stderr=subprocess.STDOUT,
    )
    try:
        out = ok(
            cli("demo", "--broker", demo_redis, "--db", db, "--thread", "on-redis", timeout=45)
        )
    finally:
        worker.send_signal(signal.SIGTERM)
        worker.wait(timeout=15)
        log.close()
    assert "on your Celery workers" in out
    assert out.index("parked at node 'approve'") < out.index("\nsend: ")
    assert completed_state(out)["status"] == "sent"
    assert state_of(db, "on-redis")["values"]["status"] == "sent"
    worker_log = (tmp_path / "worker.log").read_text()
    for node in ("draft", "approve", "send"):
        assert f"langgraph_celery.node.langgraph-celery-demo.{node}[" in worker_log, worker_log


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
    return port


def test_an_unreachable_broker_is_named_at_once_and_nothing_is_stored(db: str) -> None:
    port = _free_port()
    started = time.monotonic()
    result = cli(
        "demo", "--broker", f"redis://:s3cret@127.0.0.1:{port}/0", "--db", db, "--thread", "t"
    )
    assert time.monotonic() - started < 15  # (Celery's own retries take about 20 s)
    assert result.returncode == 2, result.stderr
    assert f"cannot reach the Celery broker at redis://:**@127.0.0.1:{port}/0" in result.stderr
    assert "s3cret" not in result.stderr + result.stdout
    assert "run: " not in result.stdout
    state = cli("state", DEMO, "--thread", "t", "--db", db)
    assert "thread 't' has no checkpoint" in state.stderr  # (nothing was stored)


def test_an_unreachable_result_backend_is_named_at_once(demo_redis: str, db: str) -> None:
    port = _free_port()
    backend = f"redis://127.0.0.1:{port}/0"
    result = cli("demo", "--broker", demo_redis, "--result-backend", backend, "--db", db)
    assert result.returncode == 2, result.stderr
    assert f"cannot reach the Celery result backend at {backend}" in result.stderr


# -- deployment files ---------------------------------------------------------------------------


def test_compose_takes_every_secret_from_the_env_example() -> None:
    compose = (ROOT / "docker-compose.yml").read_text()
    example = (ROOT / "deploy" / ".env.example").read_text()
    defined = set(re.findall(r"^([A-Z][A-Z0-9_]*)=", example, re.M))
    used = set(re.findall(r"\$\{([A-Z][A-Z0-9_]*)", compose))
    assert used and used <= defined, f"not in deploy/.env.example: {sorted(used - defined)}"
    for name in ("REDIS_PASSWORD", "POSTGRES_PASSWORD", "FLOWER_PASSWORD"):
        assert name in used
    # `docker compose up --scale worker=N` needs services without a fixed container name
    assert not re.search(r"^\s*container_name:", compose, re.M)
    for command in ("celery -A app worker", "celery -A app beat", "celery -A app flower"):
        assert command in compose
    assert "--requirepass" in compose and "--basic-auth=" in compose
