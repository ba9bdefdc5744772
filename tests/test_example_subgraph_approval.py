"""``examples/subgraph_approval.py`` runs as its docstring says: in process (in memory, and with
a database resumed by another process), and on a real Celery worker on Redis, where the run
parks at the compiled subgraph's inner node and a separate process resumes it."""

from __future__ import annotations

import importlib.util
import subprocess
import sys
import uuid
from collections.abc import Iterator, Mapping
from pathlib import Path
from types import ModuleType

import pytest

from app_kit import app_env
from celery_support import launch_worker
from langgraph_celery import AgentState, RunnableConfig

EXAMPLES = Path(__file__).resolve().parent.parent / "examples"
SCRIPT = EXAMPLES / "subgraph_approval.py"


@pytest.fixture(scope="module")
def agent() -> Iterator[ModuleType]:
    spec = importlib.util.spec_from_file_location("subgraph_approval", SCRIPT)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["subgraph_approval"] = module  # (its TypedDict's annotations resolve there)
    try:
        spec.loader.exec_module(module)
        yield module
    finally:
        del sys.modules["subgraph_approval"]


def another_process(argv: list[str], env: Mapping[str, str]) -> str:
    """Run the example's script in a new process; what it printed."""
    done = subprocess.run(
        [sys.executable, str(SCRIPT), *argv],
        env=dict(env),
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, f"{done.stdout}\n{done.stderr}"
    return done.stdout


def check_parked(parked: dict[str, object]) -> None:
    assert parked["status"] == "parked"
    assert parked["node"] == "review"  # the inner node, not the subgraph node
    assert parked["subgraph_path"] == ["approval", "review"]
    assert parked["reason"] == "approve the refund?"


def test_in_memory_the_agent_parks_in_the_subgraph_then_finishes_approved(
    agent: ModuleType, capsys: pytest.CaptureFixture[str]
) -> None:
    assert agent.main(["refund order 42"]) == 0
    printed = capsys.readouterr().out
    parked, done = printed.splitlines()[0], printed.splitlines()[1:]
    assert "parked at 'review' (subgraph path ['approval', 'review']): approve the refund?" in (
        parked
    )
    amount = agent.plan(AgentState({"request": "refund order 42"}))["amount"]
    assert f"'amount': {amount}" in parked
    assert done[1].startswith(f"outcome: refunded {amount} EUR; sent: Dear customer, {amount}")
    assert done[2] == f"messages: ['plan: refund {amount} EUR', 'draft', 'review: approve', 'act']"


def test_a_parked_run_in_a_database_is_resumed_by_another_process(
    agent: ModuleType, tmp_path: Path
) -> None:
    database = f"sqlite:///{tmp_path / 'approval.sqlite'}"
    graph = agent.in_process_graph(database)
    parked = agent.start(graph, "refund order 7")
    check_parked(parked)
    assert graph.get_state(_config(parked["thread"])).next == ("approval",)
    printed = another_process(
        ["--db", database, "--resume", str(parked["thread"]), "--decision", "reject"],
        app_env(EXAMPLES, {}),
    )
    assert f"thread {parked['thread']}: completed\noutcome: refund refused\n" in printed
    state = graph.get_state(_config(parked["thread"])).values
    assert state["messages"] == [
        f"plan: refund {parked['amount']} EUR",
        "draft",  # the child's appender reached the parent once
        "review: reject",
        "act",
    ]


def test_on_the_memory_broker_another_process_with_its_own_worker_thread_resumes_it(
    agent: ModuleType, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    database = f"sqlite:///{tmp_path / 'approval.sqlite'}"
    assert agent.main(["--broker", "memory://", "--db", database, "refund order 9"]) == 0
    parked, hint = capsys.readouterr().out.splitlines()
    assert "parked at 'review' (subgraph path ['approval', 'review'])" in parked
    thread = hint.rsplit("--resume ", 1)[1]
    assert hint.endswith(f"--broker memory:// --db {database} --resume {thread}")
    printed = another_process(
        ["--broker", "memory://", "--db", database, "--resume", thread], app_env(EXAMPLES, {})
    )
    assert f"thread {thread}: completed\noutcome: refunded " in printed
    assert "'draft', 'review: approve', 'act']" in printed


def test_the_agent_on_a_celery_worker_is_resumed_by_another_process(
    agent: ModuleType, redis_url: str, tmp_path: Path
) -> None:
    database = f"sqlite:///{tmp_path / 'approval.sqlite'}"
    settings = {agent.BROKER_ENV: redis_url, agent.DATABASE_ENV: database}
    env = app_env(EXAMPLES, settings)
    worker = launch_worker(
        "subgraph_approval",
        ["celery"],
        f"approval-{uuid.uuid4().hex[:8]}",
        env,
        tmp_path / "worker.log",
        concurrency=1,
    )
    try:
        _, graph = agent.celery_graph(redis_url, database)
        parked = agent.start(graph, "refund order 42")
        check_parked(parked)
        thread = str(parked["thread"])
        assert graph.get_state(_config(thread)).next == ("approval",)
        printed = another_process(
            ["--broker", redis_url, "--db", database, "--resume", thread], env
        )
        log = worker.log()
    finally:
        worker.kill()
    amount = parked["amount"]
    assert f"thread {thread}: completed\noutcome: refunded {amount} EUR" in printed
    assert f"messages: ['plan: refund {amount} EUR', 'draft', 'review: approve', 'act']" in printed
    # the inner nodes ran as tasks of the child graph on the worker
    assert "langgraph_celery.node.subgraph-approval/approval.review" in log


def _config(thread: object) -> RunnableConfig:
    return RunnableConfig(thread_id=str(thread))
