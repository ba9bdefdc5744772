"""Issue 14, item 2: runs on the command line.  ``run`` and ``resume`` print the run id.

Every command runs in a new process, as a user would run it.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

TESTS = Path(__file__).resolve().parent
CLI = [sys.executable, "-m", "langgraph_celery.cli"]
RUN_LINE = re.compile(r"^run: ([0-9a-f]{32})$", re.M)


def cli(*args: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("LGC_")}
    return subprocess.run(
        [*CLI, *args], cwd=TESTS, env=env, capture_output=True, text=True, timeout=60
    )


def ok(result: subprocess.CompletedProcess[str]) -> str:
    assert result.returncode == 0, f"exit {result.returncode}\n{result.stdout}\n{result.stderr}"
    return result.stdout


@pytest.fixture
def db(tmp_path: Path) -> str:
    return f"sqlite:///{tmp_path / 'runs.sqlite'}"


def test_run_and_resume_print_the_run_id_first(db: str) -> None:
    target = "cli_graphs:checkpointed"
    lines = ok(cli("run", target, "--input", '{"n": 5}', "--db", db)).splitlines()
    assert lines[0].startswith("thread: ") and lines[2].startswith("__START__: ")
    run = RUN_LINE.fullmatch(lines[1])
    assert run is not None, lines
    thread = lines[0].removeprefix("thread: ")
    again = ok(cli("run", target, "--input", '{"n": 5}', "--db", db)).splitlines()[1]
    assert RUN_LINE.fullmatch(again) and again != lines[1]  # a new run, a new id

    resumed = ok(cli("resume", target, "--thread", thread, "--update", '{"add": 1}', "--db", db))
    assert resumed.splitlines()[0] == lines[1]  # a resume continues the run
    assert "completed:" in resumed
    nothing = cli("resume", target, "--thread", thread, "--db", db)
    assert nothing.returncode == 1 and nothing.stdout == ""  # nothing to resume: no run named


def test_a_graph_without_a_saver_names_no_run() -> None:
    out = ok(cli("run", "cli_graphs:arithmetic", "--input", '{"n": 1}'))
    assert "run: " not in out and out.startswith("__START__: ")
