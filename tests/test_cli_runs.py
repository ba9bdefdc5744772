"""Issue 14, item 2: runs on the command line.  ``run`` and ``resume`` print the run id;
``runs``, ``status`` and ``cancel`` list, explain and stop runs; ``state`` shows the thread's run.

Every command runs in a new process, as a user would run it: first on the in-memory broker (the
CLI's worker thread) with SQLite checkpoints, then on Redis with a real ``celery worker`` and
PostgreSQL checkpoints.  The graphs are ``cli_runs_graphs`` (on Celery) and ``cli_graphs`` (in
process).
"""

from __future__ import annotations

import json
import os
import re
import shlex
import shutil
import signal
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import IO, Any

import pytest

from cli_runs_graphs import APPROVAL_TIMEOUT, LEAKY_URL, REASON
from langgraph_celery.checkpoint import SqlSaver

TESTS = Path(__file__).resolve().parent
CLI = [sys.executable, "-m", "langgraph_celery.cli"]
RUN_LINE = re.compile(r"^run: ([0-9a-f]{32})$", re.M)
PASSWORD = "hunter2-Secret"
assert PASSWORD in LEAKY_URL


def _env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("LGC_")}
    env["PYTHONUNBUFFERED"] = "1"
    env.update(extra)
    return env


def cli(*args: str, timeout: float = 60.0, **env: str) -> subprocess.CompletedProcess[str]:
    """``langgraph-celery ARGS`` in a new process, from ``tests/`` (so the graph modules
    import); ``env``: ``LGC_*`` variables."""
    return subprocess.run(
        [*CLI, *args], cwd=TESTS, env=_env(**env), capture_output=True, text=True, timeout=timeout
    )


def ok(result: subprocess.CompletedProcess[str]) -> str:
    assert result.returncode == 0, f"exit {result.returncode}\n{result.stdout}\n{result.stderr}"
    assert PASSWORD not in result.stdout + result.stderr
    return result.stdout


def as_json(result: subprocess.CompletedProcess[str]) -> Any:
    return json.loads(ok(result))


def run_id_in(stdout: str) -> str:
    found = RUN_LINE.search(stdout)
    assert found is not None, stdout
    return found[1]


def start(*args: str, **env: str) -> subprocess.Popen[str]:
    """``langgraph-celery ARGS`` started in the background."""
    return subprocess.Popen(
        [*CLI, *args],
        cwd=TESTS,
        env=_env(**env),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def read_until(stream: IO[str], pattern: str, timeout: float = 30.0) -> str:
    """What ``stream`` gives up to the first line that matches ``pattern``."""
    seen, deadline = "", time.monotonic() + timeout
    while time.monotonic() < deadline:
        line = stream.readline()
        if not line:
            break
        seen += line
        if re.search(pattern, line):
            return seen
    raise AssertionError(f"no line matching {pattern!r} in:\n{seen}")


def interrupted(*args: str, **env: str) -> tuple[str, str]:
    """``langgraph-celery ARGS`` (a run of ``slow``) stopped with Ctrl-C after its first
    ``tick``: exit code 130; the run id and what it wrote on stderr."""
    running = start(*args, **env)
    try:
        assert running.stdout is not None
        run_id = run_id_in(read_until(running.stdout, r"^tick: "))
        running.send_signal(signal.SIGINT)
        _, err = running.communicate(timeout=30)
    finally:
        running.kill()
        running.wait()
    assert running.returncode == 130
    return run_id, err


@pytest.fixture
def db(tmp_path: Path) -> str:
    return f"sqlite:///{tmp_path / 'runs.sqlite'}"


# -- run and resume print the run id ------------------------------------------------------------


def test_run_and_resume_print_the_run_id_first_and_state_shows_the_run(db: str) -> None:
    target = "cli_graphs:checkpointed"
    out = ok(cli("run", target, "--input", '{"n": 5}', "--db", db))
    lines = out.splitlines()
    assert lines[0].startswith("thread: ") and lines[2].startswith("__START__: ")
    run_id = run_id_in(lines[1])
    thread = lines[0].removeprefix("thread: ")
    another = run_id_in(ok(cli("run", target, "--input", '{"n": 5}', "--db", db)))
    assert another != run_id  # a new run, a new id

    state = as_json(cli("state", target, "--thread", thread, "--db", db, "--json"))
    assert state["values"]["total"] == 10
    assert state["run"]["run_id"] == run_id
    assert state["run"]["status"] == "parked" and state["run"]["node"] == "add"
    table = ok(cli("state", target, "--thread", thread, "--db", db))
    assert f"\nrun:        {run_id}\n" in table
    assert "\nstatus:     parked\n" in table and "\nnext:       add\n" in table
    assert '\nvalues:\n{\n  "steps": [\n    "double"\n  ],' in table

    resumed = ok(cli("resume", target, "--thread", thread, "--update", '{"add": 1}', "--db", db))
    assert resumed.splitlines()[0] == f"run: {run_id}"  # a resume continues the run
    nothing = cli("resume", target, "--thread", thread, "--db", db)
    assert nothing.returncode == 1 and nothing.stdout == ""  # nothing to resume: no run named
    run = as_json(cli("state", target, "--thread", thread, "--db", db, "--json"))["run"]
    assert run["run_id"] == run_id and run["status"] == "completed" and run["node"] is None
    assert run["created_at"] == state["run"]["created_at"]
    assert datetime.fromisoformat(run["updated_at"]) > datetime.fromisoformat(
        state["run"]["updated_at"]
    )

    # a new run on the thread: `state` shows it, `status` still finds the first one
    later = run_id_in(ok(cli("run", target, "--thread", thread, "--input", "{}", "--db", db)))
    assert (
        as_json(cli("state", target, "--thread", thread, "--db", db, "--json"))["run"]["run_id"]
        == later
    )
    first = as_json(cli("status", "cli_graphs", run_id, "--db", db, "--json"))
    assert first == run


def test_a_graph_without_a_saver_names_no_run() -> None:
    out = ok(cli("run", "cli_graphs:arithmetic", "--input", '{"n": 1}'))
    assert "run: " not in out and out.startswith("__START__: ")
    kept = cli("run", "cli_graphs:arithmetic", "--input", '{"n": 1}', "--thread", "t-1")
    assert kept.returncode == 0 and kept.stdout.startswith("__START__: ")
    assert "has no checkpoint saver, so thread 't-1' is not kept" in kept.stderr


# -- runs, status and cancel on the in-memory broker --------------------------------------------


def test_runs_lists_a_graphs_runs_newest_first_by_status_a_page_at_a_time(db: str) -> None:
    target = "cli_runs_graphs:approval"
    first = run_id_in(ok(cli("run", target, "--thread", "a-1", "--db", db)))
    second = run_id_in(ok(cli("run", target, "--thread", "a-2", "--db", db)))
    ok(cli("resume", target, "--thread", "a-1", "--update", '{"approved": true}', "--db", db))
    broken = cli("run", "cli_runs_graphs:broken", "--thread", "b-1", "--db", db)
    assert broken.returncode == 1

    listed = as_json(cli("runs", target, "--db", db, "--json"))
    assert [(r["run_id"], r["status"]) for r in listed["runs"]] == [
        (second, "parked"),
        (first, "completed"),
    ]
    assert listed["next_before"] is None
    parked = listed["runs"][0]
    assert parked["graph_id"] == "cli-runs-approval" and parked["thread_id"] == "a-2"
    assert parked["node"] == "approve" and parked["error"] is None
    assert parked["interruption"]["reason"] == REASON
    assert parked["interruption"]["metadata"]["resume_with"] == {"approved": True}
    deadline = datetime.fromisoformat(parked["interruption"]["deadline"])
    now = datetime.now(UTC)
    assert now < deadline <= now + timedelta(seconds=APPROVAL_TIMEOUT)

    only = as_json(cli("runs", target, "--status", "completed", "--db", db, "--json"))["runs"]
    assert [r["run_id"] for r in only] == [first]
    page = as_json(cli("runs", target, "--limit", "1", "--db", db, "--json"))
    assert [r["run_id"] for r in page["runs"]] == [second] and page["next_before"] == second
    rest = as_json(cli("runs", target, "--limit", "1", "--before", second, "--db", db, "--json"))
    assert [r["run_id"] for r in rest["runs"]] == [first] and rest["next_before"] is None

    table = ok(cli("runs", target, "--db", db)).splitlines()
    assert table[0].split() == [
        "RUN", "STATUS", "NODE", "THREAD", "STARTED", "(UTC)", "UPDATED", "(UTC)", "DETAIL"
    ]  # fmt: skip
    assert table[1].startswith(f"{second}  parked     approve  a-2")
    assert table[1].endswith(f"{REASON} (deadline {deadline:%Y-%m-%d %H:%M:%S})")
    assert table[2].startswith(f"{first}  completed  -        a-1")
    assert len(table) == 3
    paged = ok(cli("runs", target, "--limit", "1", "--db", db)).splitlines()
    assert (
        paged[-1] == f"more: langgraph-celery runs {target} --limit 1 --before {second} --db {db}"
    )
    assert "no failed runs of" in ok(cli("runs", target, "--status", "failed", "--db", db))


def test_status_explains_a_parked_run_and_prints_the_command_that_resumes_it(db: str) -> None:
    out = ok(cli("run", "cli_runs_graphs:approval", "--thread", "approve-me", "--db", db))
    run_id = run_id_in(out)

    shown = ok(cli("status", "cli_runs_graphs", run_id, "--db", db))  # the module alone
    lines = dict(line.split(": ", 1) for line in shown.splitlines() if ": " in line)
    assert lines["run"].strip() == run_id
    assert lines["graph"].strip() == "cli-runs-approval"
    assert lines["status"].strip() == "parked" and lines["node"].strip() == "approve"
    assert lines["reason"].strip() == REASON
    assert lines["metadata"].strip() == '{"amount": 10, "timeout": 3600}'
    document = as_json(cli("status", "cli_runs_graphs:approval", run_id, "--db", db, "--json"))
    deadline = datetime.fromisoformat(document["interruption"]["deadline"])
    assert lines["deadline"].strip() == f"{deadline:%Y-%m-%d %H:%M:%S} UTC"

    # the command it prints resumes the run, as it is
    command = shown.split("resume it with:\n  ", 1)[1].strip()
    assert command == (
        "langgraph-celery resume cli_runs_graphs:approval --thread approve-me "
        f"--update '{{\"approved\": true}}' --db {db}"
    )
    resumed = subprocess.run(
        [*CLI, *shlex.split(command)[1:]], cwd=TESTS, env=_env(), capture_output=True, text=True
    )
    assert run_id_in(ok(resumed)) == run_id and "completed:" in resumed.stdout
    after = as_json(cli("status", "cli_runs_graphs", run_id, "--db", db, "--json"))
    assert after["status"] == "completed" and after["interruption"] is None


def test_a_failed_runs_error_is_shown_without_the_password_it_holds(db: str) -> None:
    failed = cli("run", "cli_runs_graphs:broken", "--thread", "broken", "--db", db)
    assert failed.returncode == 1
    assert "failed with" in failed.stderr and "app:**@db.internal" in failed.stderr
    assert PASSWORD not in failed.stdout + failed.stderr  # (run's own error line too)
    run_id = run_id_in(failed.stdout)

    document = as_json(cli("status", "cli_runs_graphs", run_id, "--db", db, "--json"))
    assert document["status"] == "failed" and document["node"] == "check"
    assert document["error"] == {
        "node": "check",
        "type": "ConnectionError",
        "message": "cannot reach postgresql://app:**@db.internal:5432/orders: connection refused",
    }
    shown = ok(cli("status", "cli_runs_graphs", run_id, "--db", db))
    assert "\nerror:   ConnectionError: cannot reach postgresql://app:**@db.internal" in shown
    assert "run its failed step again with:\n  langgraph-celery resume" in shown
    assert "ConnectionError: cannot reach postgresql://app:**@" in ok(
        cli("runs", "cli_runs_graphs:broken", "--db", db)
    )
    state = as_json(
        cli("state", "cli_runs_graphs:broken", "--thread", "broken", "--db", db, "--json")
    )
    assert state["run"]["error"] == document["error"]
    assert "\nerror:      ConnectionError: cannot reach postgresql://app:**@" in ok(
        cli("state", "cli_runs_graphs:broken", "--thread", "broken", "--db", db)
    )


def test_table_cells_escape_control_characters_from_the_store(db: str) -> None:
    note = " \x1b]0;owned\x07\nDONE"
    out = ok(
        cli("run", "cli_runs_graphs:approval", "--input", json.dumps({"note": note}), "--db", db)
    )
    run_id = run_id_in(out)
    for command in (["runs", "cli_runs_graphs:approval"], ["status", "cli_runs_graphs", run_id]):
        shown = ok(cli(*command, "--db", db))
        assert "\x1b" not in shown and "\x07" not in shown
        assert "\\x1b]0;owned\\x07\\nDONE" in shown
        assert not any(line.startswith("DONE") for line in shown.splitlines())
    document = as_json(cli("status", "cli_runs_graphs", run_id, "--db", db, "--json"))
    assert document["interruption"]["reason"] == REASON + note  # JSON: the text as it is


def test_cancel_stops_a_running_run_on_the_in_process_worker(db: str) -> None:
    target = "cli_runs_graphs:slow"
    running = start("run", target, "--thread", "ticking", "--db", db)
    try:
        assert running.stdout is not None
        run_id = run_id_in(read_until(running.stdout, r"^tick: "))
        shown = ok(cli("status", "cli_runs_graphs", run_id, "--db", db))
        assert re.search(r"^status:  running$", shown, re.M), shown
        assert f"cancel it with:\n  langgraph-celery cancel {target} {run_id} --db {db}" in shown

        out = ok(cli("cancel", "cli_runs_graphs", run_id, "--db", db))
        assert out.startswith(f"cancelled run {run_id} on thread ticking: it stops before")
        assert "continue it with:\n  langgraph-celery resume cli_runs_graphs:slow" in out
        _, err = running.communicate(timeout=30)
    finally:
        running.kill()
        running.wait()
    assert running.returncode == 1, err
    resume = f"langgraph-celery resume {target} --thread ticking --db {db}"
    assert err == (
        f"langgraph-celery run: RunCancelled: run {run_id} was cancelled; its checkpoints stay; "
        f"continue it with:\n  {resume}\n"
    )

    document = as_json(cli("status", target, run_id, "--db", db, "--json"))
    assert document["status"] == "cancelled" and document["node"] == "tick"
    again = as_json(cli("cancel", "cli_runs_graphs", run_id, "--db", db, "--json"))
    assert again == {"cancelled": False, "run": document}  # already: exit 0
    listed = as_json(cli("runs", target, "--status", "cancelled", "--db", db, "--json"))
    assert [r["run_id"] for r in listed["runs"]] == [run_id]


@pytest.mark.parametrize("target", ["cli_runs_graphs:slow_here", "cli_runs_graphs:slow"])
def test_ctrl_c_stops_a_run_of_this_process_cancelled_and_resumable(db: str, target: str) -> None:
    """Ctrl-C during ``run`` in process (``slow_here``) or on the CLI's worker thread (``slow``,
    in-memory broker): the run stops, is recorded cancelled, and the command that continues it
    is printed; no traceback.  (On external workers it goes on: the Redis test.)"""
    run_id, err = interrupted("run", target, "--thread", "stopped", "--db", db)
    resume = f"langgraph-celery resume {target} --thread stopped --db {db}"
    assert f"run {run_id} stopped (cancelled); continue it with:\n  {resume}\n" in err
    assert "Traceback" not in err
    document = as_json(cli("status", target, run_id, "--db", db, "--json"))
    assert document["status"] == "cancelled" and document["node"] == "tick"


def test_status_of_a_run_a_later_run_went_on_from_offers_a_fork_not_a_resume(db: str) -> None:
    target = "cli_runs_graphs:approval"
    first = run_id_in(ok(cli("run", target, "--thread", "twice", "--db", db)))
    second = run_id_in(ok(cli("run", target, "--thread", "twice", "--db", db)))
    shown = ok(cli("status", "cli_runs_graphs", first, "--db", db))
    assert f"run {second} went on on thread twice after it: `resume` continues that one;" in shown
    assert "fork this run's last checkpoint (" in shown
    assert "resume it with" not in shown
    assert "resume it with" in ok(cli("status", "cli_runs_graphs", second, "--db", db))
    ok(cli("resume", target, "--thread", "twice", "--update", '{"approved": true}', "--db", db))
    ended = ok(cli("status", "cli_runs_graphs", first, "--db", db))
    assert f"run {second} went on on thread twice after it and ended;" in ended
    assert "`resume`" not in ended and "fork this run's last checkpoint (" in ended


def test_cancel_cancels_a_parked_run_and_refuses_a_completed_one(db: str) -> None:
    target = "cli_runs_graphs:approval"
    run_id = run_id_in(ok(cli("run", target, "--thread", "c-parked", "--db", db)))
    assert as_json(cli("status", "cli_runs_graphs", run_id, "--db", db, "--json"))["status"] == (
        "parked"
    )
    assert "cancelled run" in ok(cli("cancel", "cli_runs_graphs", run_id, "--db", db))
    assert as_json(cli("status", "cli_runs_graphs", run_id, "--db", db, "--json"))["status"] == (
        "cancelled"
    )
    # resumable like any cancelled run
    ok(cli("resume", target, "--thread", "c-parked", "--update", '{"approved": true}', "--db", db))
    document = as_json(cli("status", "cli_runs_graphs", run_id, "--db", db, "--json"))
    assert document["status"] == "completed"
    result = cli("cancel", "cli_runs_graphs", run_id, "--db", db)
    assert result.returncode == 1 and result.stdout == ""
    assert result.stderr == (
        f"langgraph-celery cancel: run {run_id} is completed, neither running nor parked: "
        "nothing to cancel\n"
    )


def test_cancel_refuses_a_graph_run_in_process(db: str) -> None:
    run_id = run_id_in(ok(cli("run", "cli_graphs:checkpointed", "--input", "{}", "--db", db)))
    result = cli("cancel", "cli_graphs:checkpointed", run_id, "--db", db)
    assert result.returncode == 2
    assert "cli_graphs:checkpointed runs in process (no executor)" in result.stderr
    assert "stop it there (Ctrl-C, or GraphStream.cancel())" in result.stderr


# -- errors -------------------------------------------------------------------------------------


def test_an_unknown_run_says_where_it_was_looked_for(db: str) -> None:
    saver = SqlSaver(db)  # a store that exists, without the run
    saver.setup()
    saver.dispose()
    result = cli("status", "cli_runs_graphs", "f" * 32, "--db", db)
    assert result.returncode == 1
    assert result.stderr.startswith(
        f"langgraph-celery status: GraphStateError: no run '{'f' * 32}' in the checkpoint store "
        "of cli_runs_graphs (SqlSaver); check the run id; check that --db"
    )


def test_a_run_of_another_graph_is_refused_with_the_graph_it_belongs_to(db: str) -> None:
    run_id = run_id_in(ok(cli("run", "cli_runs_graphs:approval", "--db", db)))
    result = cli("status", "cli_runs_graphs:slow", run_id, "--db", db)
    assert result.returncode == 2
    assert (
        f"run {run_id} is a run of graph 'cli-runs-approval', not of cli_runs_graphs:slow "
        "(graph 'cli-runs-slow'); name its graph, or its module alone"
    ) in result.stderr
    assert as_json(cli("status", "cli_runs_graphs:approval", run_id, "--db", db, "--json"))


def test_state_and_history_of_another_graphs_thread_say_so(db: str) -> None:
    ok(cli("run", "cli_runs_graphs:approval", "--thread", "theirs", "--db", db))
    for command in ("state", "history"):
        result = cli(command, "cli_runs_graphs:slow", "--thread", "theirs", "--db", db)
        assert result.returncode == 0, result
        assert (
            "note: thread 'theirs' holds runs of graph 'cli-runs-approval', not of "
            "cli_runs_graphs:slow ('cli-runs-slow'): shown as cli_runs_graphs:slow reads it"
        ) in result.stderr
    mine = cli("state", "cli_runs_graphs:approval", "--thread", "theirs", "--db", db)
    assert mine.returncode == 0 and mine.stderr == ""


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["runs", "cli_graphs:arithmetic"], "cli_graphs:arithmetic has no checkpoint saver"),
        (["runs", "cli_graphs:checkpointed", "--limit", "0"], "--limit: must be 1 or more, got 0"),
        (["runs", "cli_graphs:checkpointed", "--limit", "9" * 20], "must be at most 10000"),
        (["runs", "cli_graphs:checkpointed", "--status", "paused"], "invalid choice: 'paused'"),
        (["runs", "cli_graphs:routed", "--before", "nope"], "--before nope: no such run of"),
        (["status", "json", "f" * 32], "module 'json' holds no compiled graph at its top"),
        (["cancel", "cli_graphs:routed"], "the following arguments are required: RUN_ID"),
    ],
)
def test_usage_errors_say_what_is_wrong_with_exit_code_2(
    args: list[str], message: str, db: str
) -> None:
    result = cli(*args, "--db", db)
    assert result.returncode == 2, result
    assert message in result.stderr
    assert "Traceback" not in result.stderr and result.stdout == ""


# -- on Redis, with a real worker process --------------------------------------------------------


@pytest.fixture
def worker(redis_url: str, postgres_url: str, tmp_path: Path) -> Iterator[dict[str, str]]:
    """A ``celery worker`` for ``cli_runs_graphs`` on Redis with PostgreSQL checkpoints; the
    environment a CLI process needs to reach them."""
    env = {"LGC_BROKER_URL": redis_url, "LGC_DATABASE_URL": postgres_url}
    log = (tmp_path / "worker.log").open("w")
    celery = shutil.which("celery", path=str(Path(sys.executable).parent)) or "celery"
    process = subprocess.Popen(
        [
            celery,
            "-A",
            "cli_runs_graphs",
            "worker",
            "--pool=solo",
            "--loglevel=INFO",
            "-n",
            f"cli-runs-{uuid.uuid4().hex[:8]}@%h",
            "--without-mingle",
            "--without-gossip",
        ],
        cwd=TESTS,
        env=_env(**env),
        stdout=log,
        stderr=subprocess.STDOUT,
    )
    try:
        yield env
    finally:
        process.kill()  # the test is over: nothing to drain
        process.wait(timeout=30)
        log.close()


def test_on_redis_runs_status_and_the_cancel_command_printed_on_ctrl_c(
    worker: dict[str, str],
) -> None:
    parked = run_id_in(ok(cli("run", "cli_runs_graphs:approval", "--thread", "r-a", **worker)))
    failed = cli("run", "cli_runs_graphs:broken", "--thread", "r-b", **worker)
    assert failed.returncode == 1
    assert (
        as_json(cli("status", "cli_runs_graphs", parked, "--json", **worker))["interruption"][
            "reason"
        ]
        == REASON
    )
    error = as_json(cli("status", "cli_runs_graphs", run_id_in(failed.stdout), "--json", **worker))
    assert error["status"] == "failed" and error["error"]["type"] == "ConnectionError"

    # Ctrl-C leaves the run going on the workers, and says how to stop it
    run_id, err = interrupted("run", "cli_runs_graphs:slow", "--thread", "r-s", **worker)
    command = f"langgraph-celery cancel cli_runs_graphs:slow {run_id}"
    assert f"the run goes on on the Celery workers; stop it with:\n  {command}\n" in err
    time.sleep(1.0)  # a step or more: it still runs
    ticking = as_json(cli("status", "cli_runs_graphs", run_id, "--json", **worker))
    assert ticking["status"] == "running" and ticking["node"] == "tick"

    out = ok(cli(*shlex.split(command)[1:], **worker))
    assert out.startswith(f"cancelled run {run_id} on thread r-s")
    listed = as_json(cli("runs", "cli_runs_graphs:slow", "--json", **worker))["runs"]
    assert [(r["run_id"], r["status"]) for r in listed] == [(run_id, "cancelled")]
    ticks = as_json(cli("state", "cli_runs_graphs:slow", "--thread", "r-s", "--json", **worker))
    time.sleep(1.0)  # nothing runs any more
    assert (
        as_json(cli("state", "cli_runs_graphs:slow", "--thread", "r-s", "--json", **worker))[
            "values"
        ]
        == ticks["values"]
    )


def test_status_takes_a_run_id_alone_with_the_store_named_by_db(db: str) -> None:
    """SPEC §11's ``status RUN_ID``: the run is read from the store ``--db`` names."""
    run_id = run_id_in(ok(cli("run", "cli_runs_graphs:approval", "--thread", "alone", "--db", db)))
    with_module = as_json(cli("status", "cli_runs_graphs", run_id, "--db", db, "--json"))
    alone = as_json(cli("status", run_id, "--db", db, "--json"))
    assert alone == with_module and alone["status"] == "parked"
    assert run_id in ok(cli("status", run_id, "--db", db))
    missing = cli("status", run_id)  # (no --db, no LGC_DATABASE_URL: LGC_* variables are cleared)
    assert missing.returncode == 2 and "give it with --db URL" in missing.stderr
    unknown = cli("status", "no-such-run", "--db", db)
    assert unknown.returncode == 1 and "no run 'no-such-run'" in unknown.stderr


def test_cancel_takes_a_run_id_alone_with_the_store_named_by_db(db: str) -> None:
    """SPEC §11's ``cancel RUN_ID``: the run is marked cancelled in the store ``--db`` names."""
    target = "cli_runs_graphs:approval"
    run_id = run_id_in(ok(cli("run", target, "--thread", "c-alone", "--db", db)))
    missing = cli("cancel", run_id)
    assert missing.returncode == 2 and "give it with --db URL" in missing.stderr
    done = as_json(cli("cancel", run_id, "--db", db, "--json"))
    assert done["cancelled"] is True and done["run"]["status"] == "cancelled"
    listed = as_json(cli("runs", target, "--status", "cancelled", "--db", db, "--json"))
    assert [r["run_id"] for r in listed["runs"]] == [run_id]
    again = cli("cancel", run_id, "--db", db)
    assert again.returncode == 0 and again.stdout == f"run {run_id} was cancelled already\n"
    # resumable like any cancelled run
    ok(cli("resume", target, "--thread", "c-alone", "--update", '{"approved": true}', "--db", db))
    assert as_json(cli("status", run_id, "--db", db, "--json"))["status"] == "completed"
    finished = cli("cancel", run_id, "--db", db)
    assert finished.returncode == 1 and "is completed, neither running nor parked" in (
        finished.stderr
    )
    unknown = cli("cancel", "no-such-run", "--db", db)
    assert unknown.returncode == 1 and "no run 'no-such-run'" in unknown.stderr


def test_on_redis_cancel_with_a_run_id_alone_stops_the_workers(worker: dict[str, str]) -> None:
    """A process with only the store and the broker (no graph module) stops a running run."""
    following = start("run", "cli_runs_graphs:slow", "--thread", "r-alone", **worker)
    try:
        assert following.stdout is not None
        run_id = run_id_in(read_until(following.stdout, r"^tick: "))
        db = worker["LGC_DATABASE_URL"]
        out = ok(cli("cancel", run_id, "--db", db, "--broker", worker["LGC_BROKER_URL"]))
        assert out.startswith(f"cancelled run {run_id} on thread r-alone")
        _, err = following.communicate(timeout=30)
    finally:
        following.kill()
        following.wait()
    # the client following the run saw the cancel (woken through the broker's Redis)
    assert following.returncode == 1 and f"run {run_id} was cancelled" in err
    ticks = as_json(cli("state", "cli_runs_graphs:slow", "--thread", "r-alone", "--json", **worker))
    time.sleep(1.0)  # nothing runs any more
    assert (
        as_json(cli("state", "cli_runs_graphs:slow", "--thread", "r-alone", "--json", **worker))[
            "values"
        ]
        == ticks["values"]
    )
    assert as_json(cli("status", run_id, "--json", **worker))["status"] == "cancelled"
