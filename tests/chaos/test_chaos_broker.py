"""The broker restarts empty (or is flushed) while runs are in flight.

The broker (and result backend) is a private ``redis-server`` on a free port, without
persistence; the test crashes it (SIGKILL) while runs are mid-flight and starts it again on the
same port, or ``FLUSHDB``s its database: every queued and unacknowledged message is gone.  The
checkpoint store is the source of truth: the reaper (run here in the test process, as the beat
job would) finds the runs whose pending step has no live task after ``stalled_after`` (2 s) and
sends their tasks again.  Every run completes, each node's update applied once.
"""

from __future__ import annotations

import json
import shutil
import signal
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from chaos_support import (
    APPS_DIR,
    ChaosStack,
    ReaperThread,
    StackFactory,
    assert_runs_exact,
    start_mixed_runs,
    started,
)

from app_kit import app_env
from celery_support import free_port, launch_worker, wait_until
from services import require

pytestmark = pytest.mark.timeout(150)

ROUNDS = 3
FLUSH_ROUNDS = 2
RUNS_PER_ROUND = 8
SLEEP = 0.15


class RedisServer:
    """A ``redis-server`` of our own, with no persistence: a restart starts it empty."""

    def __init__(self, directory: Path) -> None:
        self.port = free_port()
        self.directory = directory
        self.process: subprocess.Popen[bytes] | None = None
        self.restarts = 0

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}"

    def start(self) -> None:
        argv = [
            "redis-server",
            "--port",
            str(self.port),
            "--bind",
            "127.0.0.1",
            "--save",
            "",
            "--appendonly",
            "no",
            "--dir",
            str(self.directory),
        ]
        log = open(self.directory / "redis.log", "ab")  # noqa: SIM115 - the child keeps it
        self.process = subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT)
        log.close()
        wait_until(self._ping, 10, 0.02, f"redis-server on port {self.port}")

    def _ping(self) -> bool:
        import redis

        client = redis.Redis(port=self.port, socket_connect_timeout=0.5)
        try:
            return bool(client.ping())
        except redis.RedisError:
            return False
        finally:
            client.close()

    def crash(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.send_signal(signal.SIGKILL)
            self.process.wait(10)

    def restart(self) -> None:
        self.crash()
        self.start()
        self.restarts += 1


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RedisServer]:
    require("redis-server", shutil.which("redis-server") is not None, "not on PATH")
    server = RedisServer(tmp_path_factory.mktemp("broker"))
    server.start()
    try:
        yield server
    finally:
        server.crash()


@pytest.fixture(scope="module")
def stack(make_stack: StackFactory, server: RedisServer) -> ChaosStack:
    return make_stack(broker_url=f"{server.url}/9")


def _rounds(
    stack: ChaosStack, reaper: ReaperThread, lose_messages: Callable[[], None], rounds: int
) -> None:
    """``rounds`` times: start runs, ``lose_messages()`` once they are mid-flight, then check
    every run completes with its exact state, some of them thanks to the reaper."""
    runs = []
    for round_ in range(rounds):
        handles = start_mixed_runs(stack, f"broker-{round_}", RUNS_PER_ROUND, SLEEP)
        # mid-flight: some nodes ran, most messages are still queued or unacknowledged
        wait_until(
            lambda h=handles: sum(len(started(stack.side, t)) for _, t, _ in h) >= 3,
            60,  # a worker reconnecting to a restarted broker backs off for a while
            0.01,
            "the first nodes to start",
        )
        lose_messages()
        assert_runs_exact(stack, handles, "lost with the broker")
        runs.extend(handles)
    redispatched = reaper.threads("redispatched")
    assert redispatched, "no message was lost: nothing for the reaper to do"
    assert all(worker.alive() for worker in stack.workers)
    print(
        f"{len(redispatched)}/{len(runs)} runs re-dispatched by the reaper, "
        f"{len(reaper.threads('finished'))} steps finished by it, "
        f"{reaper.failures} reaper passes failed"
    )


def test_broker_restarted_empty_mid_run(
    stack: ChaosStack, server: RedisServer, reaper: ReaperThread
) -> None:
    """The broker process dies (SIGKILL) and comes back empty: connections drop and reconnect."""
    _rounds(stack, reaper, server.restart, ROUNDS)


def test_broker_flushed_mid_run(
    stack: ChaosStack, server: RedisServer, reaper: ReaperThread
) -> None:
    """``FLUSHDB`` on the broker's database: the messages vanish, the connections stay up."""
    import redis

    client = redis.Redis.from_url(stack.settings["CHAOS_BROKER_URL"])
    try:
        _rounds(stack, reaper, client.flushdb, FLUSH_ROUNDS)
    finally:
        client.close()


def test_a_failed_close_of_the_lost_connection_does_not_stop_the_worker(
    tmp_path: Path,
) -> None:
    """Celery closes a lost connection twice (collect, then close); in the state of
    ``apps/lost_connection.py`` Kombu's second close raises AttributeError out of a plain
    worker's consumer, which stops the worker.  The executor's consumer step logs it and lets
    the consumer reconnect."""
    require("redis-server", shutil.which("redis-server") is not None, "not on PATH")
    server = RedisServer(tmp_path)
    outcomes = {}
    try:
        for kind in ("plain", "guarded"):
            server.start()
            assert server.process is not None
            done = subprocess.run(
                [
                    sys.executable,
                    str(APPS_DIR / "lost_connection.py"),
                    f"{server.url}/0",
                    str(server.process.pid),
                    kind,
                ],
                capture_output=True,
                text=True,
                timeout=60,
                cwd=tmp_path,
            )
            assert done.returncode == 0, done.stderr[-4000:]
            outcomes[kind] = json.loads(done.stdout.strip().splitlines()[-1])
            server.crash()
    finally:
        server.crash()
    assert outcomes["plain"]["raised"] == "AttributeError", outcomes  # Kombu's failure
    assert outcomes["guarded"] == {"raised": None, "let_go": True}, outcomes


def _served(broker_url: str, x: int, timeout: float) -> bool:
    """Whether a worker answers ``broken_close.add(x, 1)`` within ``timeout`` seconds (a
    client app of its own: a restarted broker leaves an older one's result reader broken)."""
    from celery import Celery
    from celery.exceptions import TimeoutError as ResultTimeout

    client = Celery("broken_close_client", broker=broker_url, backend=broker_url)
    try:
        return client.send_task("broken_close.add", (x, 1)).get(timeout=timeout) == x + 1
    except ResultTimeout:
        return False
    finally:
        client.close()


@pytest.mark.parametrize(
    "executor", ["0", "off", "1"], ids=["plain-celery", "step-off", "executor"]
)
def test_a_worker_keeps_serving_after_a_failed_close_of_the_lost_connection(
    tmp_path: Path, executor: str
) -> None:
    """The broker dies and comes back; closing the lost connection fails as Kombu's close can
    (injected by ``apps/broken_close_app.py``).  A plain Celery worker stops ("Unrecoverable
    error"), and so does one whose ``CeleryExecutor`` has ``survive_broker_loss=False``; a
    worker whose app has a ``CeleryExecutor`` logs it, reconnects and serves."""
    require("redis-server", shutil.which("redis-server") is not None, "not on PATH")
    server = RedisServer(tmp_path)
    server.start()
    broker_url = f"{server.url}/0"
    env = app_env(
        APPS_DIR, {"BROKEN_CLOSE_BROKER_URL": broker_url, "BROKEN_CLOSE_EXECUTOR": executor}
    )
    worker = launch_worker(
        "broken_close_app", ["celery"], "broken-close", env, tmp_path / "worker.log", 1
    )
    try:
        assert _served(broker_url, 1, 20), worker.log()[-4000:]
        server.restart()
        if executor == "1":
            assert _served(broker_url, 2, 30), worker.log()[-4000:]
            assert worker.alive()
            assert "reconnecting anyway" in worker.log()
        else:
            wait_until(lambda: not worker.alive(), 30, 0.1, "the worker to stop")
            assert "Unrecoverable error: AttributeError" in worker.log()
    finally:
        worker.kill()  # what it did is in its log already
        server.crash()
