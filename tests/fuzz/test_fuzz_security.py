"""Security: only JSON is accepted, nothing is ever unpickled, secrets never reach a log or the
command line's output, and the deployment keeps Redis and Flower behind passwords.

The secrets test starts its own ``redis-server --requirepass`` on a free port and a PostgreSQL
role with a password, runs a fuzz worker, a demo worker and the CLI against them, and looks for
the passwords in everything they printed.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import yaml
from celery import Celery
from fuzz_support import FuzzStack, fuzz_env, start_fuzz_worker
from sqlalchemy import create_engine, text
from sqlalchemy.engine import make_url

from celery_support import ServiceProcess, free_port, wait_until
from langgraph_celery import GraphInput, RunnableConfig
from langgraph_celery.celery import CeleryExecutor
from langgraph_celery.worker.executor import SAFE_SETTINGS
from langgraph_celery.worker.guard import GuardTaskMessages
from langgraph_celery.worker.names import node_task_name
from services import in_ci, postgres_admin_url, require, unique_table_prefix

ROOT = Path(__file__).resolve().parents[2]
GATE = "fixed-gate"


class Evil:
    """Unpickling this creates a directory: the proof that a pickle was loaded."""

    def __init__(self, path: Path) -> None:
        self.path = str(path)

    def __reduce__(self) -> tuple[Any, tuple[str]]:
        return (os.mkdir, (self.path,))


# -- JSON only ------------------------------------------------------------------------------------


def test_the_executor_makes_an_app_json_only() -> None:
    app = Celery("json-only", broker="memory://", set_as_current=False)
    CeleryExecutor(app)
    assert app.conf.accept_content == ["json"]
    assert app.conf.result_accept_content == ["json"]
    for setting in ("task_serializer", "result_serializer", "event_serializer"):
        assert app.conf[setting] == "json", setting
    assert SAFE_SETTINGS["accept_content"] == ["json"]
    assert GuardTaskMessages in app.steps["consumer"]
    # every task the executor registers sends JSON
    ours = [task for name, task in app.tasks.items() if name.startswith("langgraph_celery.")]
    assert ours and all(task.serializer == "json" for task in ours)


def test_the_fuzz_workers_app_is_json_only(fuzz_stack: FuzzStack) -> None:
    conf = fuzz_stack.app.conf
    assert conf.accept_content == ["json"] and conf.result_accept_content == ["json"]
    assert fuzz_stack.app.backend.accept == {"application/json"}
    for name in (node_task_name(GATE, "a"), "langgraph_celery.resume"):
        assert fuzz_stack.app.tasks[name].serializer == "json"


def test_a_pickle_on_the_queue_is_refused_and_never_unpickled(
    fuzz_stack: FuzzStack, tmp_path: Path
) -> None:
    marker = tmp_path / "unpickled"
    queue = fuzz_stack.app.amqp.queues[fuzz_stack.queue]
    before = fuzz_stack.mark()
    task_id = str(uuid.uuid4())
    with fuzz_stack.app.producer_or_acquire() as producer:
        producer.publish(
            ((), {"x": Evil(marker)}, {}),
            exchange=queue.exchange,
            routing_key=queue.routing_key,
            declare=[queue],
            serializer="pickle",
            headers={"lang": "py", "task": node_task_name(GATE, "a"), "id": task_id},
        )
    fuzz_stack.wait_for_records(1, before)
    fuzz_stack.wait_until_quiet()  # a redelivery would have been refused, and logged, again
    records = [t for _, t in fuzz_stack.records(before) if "Refusing to deserialize" in t]
    assert len(records) == 1 and "untrusted content of type pickle" in records[0]
    assert not marker.exists()
    assert fuzz_stack.worker is not None and fuzz_stack.worker.alive()


def test_a_pickled_result_is_never_unpickled_by_a_client(
    fuzz_stack: FuzzStack, fuzz_redis: Any, tmp_path: Path
) -> None:
    import pickle

    marker = tmp_path / "unpickled-result"
    task_id = str(uuid.uuid4())
    meta = {"status": "SUCCESS", "result": Evil(marker), "task_id": task_id}
    fuzz_redis.set(f"celery-task-meta-{task_id}", pickle.dumps(meta))
    with pytest.raises(Exception):  # noqa: B017 - whatever the decoder says, it is not pickle
        fuzz_stack.app.AsyncResult(task_id).get(timeout=5)
    assert not marker.exists()


# -- secrets --------------------------------------------------------------------------------------


@dataclass
class Secrets:
    """A private Redis and a PostgreSQL role, each with a password, and URLs that carry them."""

    redis_password: str
    pg_password: str
    redis_url: str  # db 0; db 1 for results, db 2 for the demo
    db_url: str
    log_dir: Path

    def all(self) -> list[str]:
        return [self.redis_password, self.pg_password]


@pytest.fixture
def secrets(postgres_url: str, tmp_path: Path) -> Iterator[Secrets]:
    server = shutil.which("redis-server")
    require("redis", server is not None, "redis-server is not installed")
    assert server is not None
    redis_password = f"s3cret-{uuid.uuid4().hex[:8]}"
    port = free_port()
    redis = ServiceProcess(
        "redis",
        [
            *(server, "--port", str(port), "--bind", "127.0.0.1"),
            *("--requirepass", redis_password, "--save", "", "--appendonly", "no"),
            *("--dir", str(tmp_path)),
        ],
        os.environ,
        tmp_path / "redis.log",
    )
    role, pg_password = f"lgc_fuzz_{uuid.uuid4().hex[:8]}", f"pg-s3cret-{uuid.uuid4().hex[:8]}"
    admin_url, detail = postgres_admin_url()
    require("postgresql", admin_url is not None, detail)
    assert admin_url is not None
    database = make_url(postgres_url).database
    admin = create_engine(make_url(admin_url).set(database=database), isolation_level="AUTOCOMMIT")
    try:
        redis.wait_for_log("Ready to accept connections", 20)
        with admin.connect() as conn:
            conn.execute(text(f"CREATE ROLE {role} LOGIN PASSWORD '{pg_password}'"))
            conn.execute(text(f'GRANT ALL ON DATABASE "{database}" TO {role}'))
            conn.execute(text(f"GRANT ALL ON SCHEMA public TO {role}"))
        db_url = make_url(postgres_url).set(username=role, password=pg_password)
        yield Secrets(
            redis_password,
            pg_password,
            f"redis://:{redis_password}@127.0.0.1:{port}/0",
            db_url.render_as_string(hide_password=False),
            tmp_path,
        )
    finally:
        redis.stop()
        with admin.connect() as conn:
            conn.execute(text(f"DROP OWNED BY {role}"))
            conn.execute(text(f"DROP ROLE IF EXISTS {role}"))
        admin.dispose()


def _cli(*argv: str, env: dict[str, str], timeout: float = 60) -> subprocess.CompletedProcess[str]:
    command = [sys.executable, "-m", "langgraph_celery.cli", *argv]
    return subprocess.run(
        command, env=env, capture_output=True, text=True, timeout=timeout, check=False
    )


def _cli_started(*argv: str, env: dict[str, str]) -> subprocess.Popen[str]:
    """:func:`_cli` started in the background (``communicate`` collects it)."""
    command = [sys.executable, "-m", "langgraph_celery.cli", *argv]
    return subprocess.Popen(
        command, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )


def _leaks(output: str, secrets: Secrets) -> list[str]:
    return [secret for secret in secrets.all() if secret in output]


@pytest.mark.timeout(240)
def test_passwords_in_urls_never_reach_logs_or_the_cli_output(secrets: Secrets) -> None:
    settings = {
        "FUZZ_BROKER_URL": secrets.redis_url,
        "FUZZ_BACKEND_URL": secrets.redis_url.replace("/0", "/1"),
        "FUZZ_DB_URL": secrets.db_url,
        "FUZZ_TABLE_PREFIX": unique_table_prefix(),
        "FUZZ_QUEUE": f"secret-{uuid.uuid4().hex[:8]}",
        "FUZZ_GRAPHS": "0",
    }
    import fuzz_app

    bundle = fuzz_app.build(settings)
    worker = start_fuzz_worker(settings, secrets.log_dir, "secret", concurrency=1)
    demo_broker = secrets.redis_url.replace("/0", "/2")
    demo_env = fuzz_env(
        settings, {"LGC_BROKER_URL": demo_broker, "LGC_DATABASE_URL": secrets.db_url}
    )
    demo_worker = ServiceProcess(
        "demo",
        [
            *(sys.executable, "-m", "celery", "-A", "langgraph_celery.demo", "worker"),
            *("-P", "solo", "-l", "info", "--without-gossip", "--without-mingle"),
            *("--without-heartbeat", "-n", f"demo-{uuid.uuid4().hex[:6]}@%h"),
        ],
        demo_env,
        secrets.log_dir / "worker-demo.log",
    )
    outputs: dict[str, str] = {}
    # The CLI with a wrong broker password: it names the broker it cannot reach, password
    # masked, and stores nothing (it runs while the rest of the test does).
    wrong = demo_broker.replace(secrets.redis_password, f"{secrets.redis_password}-wrong")
    bad_password = _cli_started(
        *("demo", "--park", "--broker", wrong, "--db", secrets.db_url), env=demo_env
    )
    try:
        demo_worker.wait_for_log(" ready.")
        # a run through the worker: one parks, one completes, one fails in a node
        gate = bundle.graphs[GATE]
        parked, done = f"p-{uuid.uuid4().hex[:6]}", f"d-{uuid.uuid4().hex[:6]}"
        gate.invoke({"thread": parked}, RunnableConfig(thread_id=parked))
        state = gate.invoke(GraphInput.resume({"approved": True}), RunnableConfig(thread_id=parked))
        assert state.data["log"] == ["a", "gate", "b"]
        gate.invoke({"thread": done, "approved": True}, RunnableConfig(thread_id=done))
        bundle.app.send_task(node_task_name(GATE, "a"), kwargs={"graph_id": 1})  # a bad message
        wait_until(lambda: "rejected malformed message" in worker.log(), 20, 0.05, "rejection")
        # the CLI: a run that parks (it prints the command that resumes it), the state, an error
        cli_env = fuzz_env(settings)
        flags = ["--broker", demo_broker]
        thread = f"cli-{uuid.uuid4().hex[:6]}"
        calls = [
            ("run", ["run", "fuzz_app:gate", "--input", f'{{"thread": "{thread}"}}'], cli_env),
            ("state", ["state", "fuzz_app:gate"], cli_env),
            ("demo", ["demo", "--park"], demo_env),
        ]
        for name, argv, env in calls:
            extra = ["--thread", thread] if name in ("run", "state") else []
            done_cli = _cli(*argv, *extra, *flags, "--db", secrets.db_url, env=env)
            outputs[name] = done_cli.stdout + done_cli.stderr
            assert done_cli.returncode == 0, outputs[name]
        stdout, stderr = bad_password.communicate(timeout=60)
        outputs["bad password"] = stdout + stderr
        assert bad_password.returncode == 2, outputs["bad password"]
        assert "cannot reach the Celery broker at redis://:**@127.0.0.1" in stderr, stderr
        assert "parked at node 'gate'" in outputs["run"]
        assert "parked at node 'approve'" in outputs["demo"]
        assert "redis://:**@127.0.0.1" in outputs["demo"]  # said, masked
        assert "resume" in outputs["run"] and "--broker" in outputs["run"]
    finally:
        if bad_password.poll() is None:
            bad_password.kill()
            bad_password.communicate()
        for process in (demo_worker, worker):
            process.stop()
        bundle.close()
    outputs["worker log"] = worker.log()
    outputs["demo worker log"] = demo_worker.log()
    assert "redis://:**@" in outputs["worker log"]  # the broker is named, masked
    for name, output in outputs.items():
        assert not _leaks(output, secrets), f"a password is in the {name}:\n{output[-3000:]}"


# -- the deployment files -------------------------------------------------------------------------


def test_compose_keeps_redis_postgres_and_flower_behind_passwords() -> None:
    compose_text = (ROOT / "docker-compose.yml").read_text()
    compose = yaml.safe_load(compose_text)
    services = compose["services"]
    # Redis requires its password; clients and the health check use it; it is not published
    redis = services["redis"]
    command = redis["command"]
    assert command[command.index("--requirepass") + 1].startswith("${REDIS_PASSWORD")
    assert redis["environment"]["REDISCLI_AUTH"].startswith("${REDIS_PASSWORD")
    app_environment = services["worker"]["environment"]
    for key in ("LGC_BROKER_URL", "LGC_RESULT_BACKEND"):
        assert re.match(r"redis://:\$\{REDIS_PASSWORD[^}]*\}@redis:", app_environment[key]), key
    assert ":${POSTGRES_PASSWORD" in app_environment["LGC_DATABASE_URL"]
    # PostgreSQL has a password; neither store is reachable from outside the compose network
    assert services["postgres"]["environment"]["POSTGRES_PASSWORD"].startswith(
        "${POSTGRES_PASSWORD"
    )
    for name in ("redis", "postgres", "worker", "beat"):
        assert "ports" not in services[name], name
    # Flower asks for a login, and listens on the host's loopback only
    flower = services["flower"]
    assert re.search(r"--basic-auth=\$\{FLOWER_USER[^}]*\}:\$\{FLOWER_PASSWORD", flower["command"])
    assert all(port.startswith("127.0.0.1:") for port in flower["ports"])
    # no secret is written in the file itself: every password comes from .env
    for value in _strings(compose):
        for password in re.findall(r"://[^:/@\s]*:([^@\s]+)@", value):
            assert password.startswith("${"), value
    for service in services.values():
        for key, value in (service.get("environment") or {}).items():
            if re.search(r"PASSWORD|AUTH|SECRET", key):
                assert str(value).startswith("${"), key
    assert "change-me" not in compose_text


def _strings(node: Any) -> Iterator[str]:
    if isinstance(node, str):
        yield node
    elif isinstance(node, dict):
        for value in node.values():
            yield from _strings(value)
    elif isinstance(node, list):
        for value in node:
            yield from _strings(value)


def test_the_env_file_with_the_secrets_is_never_committed() -> None:
    example = (ROOT / "deploy" / ".env.example").read_text()
    assert re.search(r"^REDIS_PASSWORD=change-me", example, re.M)  # placeholders only
    ignored = subprocess.run(
        ["git", "check-ignore", "-q", ".env"], cwd=ROOT, capture_output=True, check=False
    )
    if ignored.returncode == 128 and not in_ci():  # not a git checkout
        pytest.skip("not a git checkout")
    assert ignored.returncode == 0, ".env (the compose secrets) is not git-ignored"
