"""Helpers of the Celery integration tests (``tests/celery/``): worker, Flower and client
subprocesses, and the stack of services one test module runs against.

- :class:`ServiceProcess` / :func:`start_worker` / :func:`start_flower`: a ``python -m celery``
  subprocess with its output in a log file, started in its own session, waited for until ready,
  and stopped with SIGTERM then SIGKILL.
- :class:`CeleryStack`: the settings (broker, backend, database, table prefix, queues) of the
  test app ``tests/celery/apps/lgc_app.py``, the app as built in the test process, and the
  workers started for it.
- :func:`run_client`: run Python code in another process that imports the test app, the way a
  second client (or a client hours later) would.
- :func:`wait_until` polls a condition; :func:`wait_until_quiet` waits until no task is left on
  a Redis broker or its workers, the signal a test waits for before it asserts that something
  did not happen.
"""

from __future__ import annotations

import base64
import contextlib
import json
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
import uuid
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from app_kit import WORKER_CLIENT_NAME_ENV, WORKER_CLIENT_PREFIX, app_env

__all__ = [
    "APPS_DIR",
    "CeleryStack",
    "ServiceProcess",
    "free_port",
    "http_get_json",
    "run_client",
    "start_flower",
    "start_worker",
    "wait_until",
    "wait_until_quiet",
]

#: Where the test app (``lgc_app``) and its graphs (``lgc_graphs``) live.
APPS_DIR = Path(__file__).parent / "celery" / "apps"
APP_MODULE = "lgc_app"

#: Seconds a worker or Flower gets to become ready.
READY_TIMEOUT = 60.0


def wait_until(
    predicate: Callable[[], Any], timeout: float = 20.0, interval: float = 0.05, what: str = ""
) -> Any:
    """Poll ``predicate`` until it returns something truthy (returned); fail after ``timeout``."""
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() >= deadline:
            raise AssertionError(f"timed out after {timeout} s waiting for {what or predicate}")
        time.sleep(interval)


#: The hash where kombu's Redis transport keeps the messages it delivered and that were not
#: acknowledged yet (the tasks are ``acks_late``: until they end).
UNACKED_KEY = "unacked"


def what_is_left(app: Any, broker: Any, queues: Iterable[str], workers: int) -> str:
    """What a Redis broker and its ``workers`` workers still hold: ``""`` when nothing.

    In one transaction (one consistent view of the broker): every queue of ``queues`` is empty,
    no delivered message waits for its acknowledgement, and every consumer connection of the
    workers on the broker's db (at least ``workers``, told by their client name; other test
    runs use other dbs) is blocked in ``BRPOP``, so none holds a message it has just taken
    from a queue (Redis hands a message pushed on a queue to a blocked ``BRPOP`` at once: a
    message put back on the queue is never seen there).  Then each worker answers that it has
    no task active, reserved or scheduled (one that does not answer in time counts as busy).
    """
    queues = list(queues)
    with broker.pipeline() as pipe:
        for queue in queues:
            pipe.llen(queue)
        pipe.hlen(UNACKED_KEY)
        pipe.client_list()
        *counts, clients = pipe.execute()
    if any(counts):
        return f"queued {dict(zip(queues, counts[:-1], strict=True))}, unacknowledged {counts[-1]}"
    db = str(broker.connection_pool.connection_kwargs.get("db", 0))
    consumers = [
        c
        for c in clients
        if c.get("name", "").startswith(WORKER_CLIENT_PREFIX)
        and c.get("db") == db
        and c.get("cmd") == "brpop"
    ]
    waiting = [c for c in consumers if "b" in c.get("flags", "")]
    if len(consumers) < workers or len(waiting) < len(consumers):
        return f"{len(waiting)} of {len(consumers)} consumers waiting in BRPOP ({workers} workers)"
    inspect = app.control.inspect(timeout=2.0, limit=workers)
    for kind in ("active", "reserved", "scheduled"):
        reply = getattr(inspect, kind)()
        if not reply or len(reply) < workers:
            return f"not every worker answered: {reply}"
        if any(reply.values()):
            return f"{kind}: {reply}"
    return ""


def wait_until_quiet(
    app: Any, broker_url: str, queues: Iterable[str], workers: int, timeout: float = 30.0
) -> None:
    """Wait until :func:`what_is_left` finds nothing on the Redis broker at ``broker_url``.

    A test that asserts that something did *not* happen (a second delivery, a node that should
    not run) waits for this first, once the tasks that could cause it have ended: whatever
    they sent has by then run, or was dropped.
    """
    import redis

    queues = list(queues)
    client = redis.Redis.from_url(broker_url, decode_responses=True)
    left = ["?"]

    def quiet() -> bool:
        left[0] = what_is_left(app, client, queues, workers)
        return not left[0]

    try:
        wait_until(quiet, timeout, 0.05, "no task left on the broker or the workers")
    except AssertionError as error:
        raise AssertionError(f"{error}; still there: {left[0]}") from None
    finally:
        client.close()


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


def subprocess_env(
    settings: Mapping[str, str], extra: Mapping[str, str] | None = None
) -> dict[str, str]:
    """The environment of a subprocess that imports the test app with ``settings``."""
    return app_env(APPS_DIR, settings, extra)


class ServiceProcess:
    """A long-running subprocess (worker, Flower) whose stdout and stderr go to ``log_path``."""

    def __init__(self, name: str, argv: list[str], env: Mapping[str, str], log_path: Path) -> None:
        self.name = name
        self.argv = argv
        self.log_path = log_path
        self._log = open(log_path, "wb")  # noqa: SIM115 - closed in stop()
        self.process = subprocess.Popen(
            argv,
            env=dict(env),
            stdout=self._log,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            start_new_session=True,
        )

    def log(self) -> str:
        return self.log_path.read_text(errors="replace")

    def alive(self) -> bool:
        return self.process.poll() is None

    def wait_for_log(self, text: str, timeout: float = READY_TIMEOUT) -> None:
        def seen() -> bool:
            if not self.alive():
                raise AssertionError(
                    f"{self.name} exited with {self.process.returncode}:\n{self.log()[-4000:]}"
                )
            return text in self.log()

        try:
            wait_until(seen, timeout, 0.05, f"{text!r} in the log of {self.name}")
        except AssertionError as error:
            raise AssertionError(
                f"{error}\n--- {self.name} log ---\n{self.log()[-4000:]}"
            ) from None

    def terminate(self) -> None:
        """Ask for a warm shutdown (SIGTERM); :meth:`stop` waits for it."""
        if self.alive():
            self.process.send_signal(signal.SIGTERM)

    def kill(self) -> None:
        """SIGKILL to the process group (the process and its pool) at once, then reap it: how
        a fixture ends a service whose test is over (a warm shutdown of a prefork worker takes
        about 2 s on Redis and 5 s on RabbitMQ, and nothing is left to check in it)."""
        try:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(self.process.pid, signal.SIGKILL)
            self.process.wait(10)
        finally:
            self._log.close()

    def stop(self, grace: float = 10.0) -> None:
        """SIGTERM (warm shutdown), then SIGKILL to the process group after ``grace`` s."""
        try:
            self.terminate()
            try:
                self.process.wait(grace)
            except subprocess.TimeoutExpired:
                os.killpg(self.process.pid, signal.SIGKILL)
                self.process.wait(5)
            # Prefork children left behind by a parent that died: they are in its session.
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(self.process.pid, signal.SIGKILL)
        finally:
            self._log.close()


def start_worker(
    settings: Mapping[str, str],
    log_dir: Path,
    *,
    queues: Iterable[str],
    worker_name: str,
    concurrency: int = 2,
    events: bool = False,
) -> ServiceProcess:
    """``celery -A lgc_app worker`` on ``queues``; returns once the worker logs ``ready``."""
    env = subprocess_env(settings, {"WORKER_NAME": worker_name})
    return launch_worker(
        APP_MODULE,
        queues,
        f"{worker_name}-{uuid.uuid4().hex[:8]}",
        env,
        log_dir / f"worker-{worker_name}.log",
        concurrency,
        events=events,
        label=worker_name,
    )


def launch_worker(
    app_module: str,
    queues: Iterable[str],
    node_name: str,
    env: Mapping[str, str],
    log_path: Path,
    concurrency: int = 2,
    *,
    events: bool = False,
    label: str | None = None,
    ready_timeout: float = READY_TIMEOUT,
) -> ServiceProcess:
    """``celery -A app_module worker`` (prefork) on ``queues``, once it logs ``ready``; the one
    way every test suite starts a worker process."""
    argv = [
        sys.executable,
        "-m",
        "celery",
        "-A",
        app_module,
        "worker",
        "-P",
        "prefork",
        "-c",
        str(concurrency),
        "-l",
        "info",
        "-Q",
        ",".join(queues),
        "--without-gossip",
        "--without-mingle",
        "-n",
        f"{node_name}@%h",
    ]
    # Flower needs the worker's events (and its heartbeats to show it online).
    argv += ["-E"] if events else ["--without-heartbeat"]
    env = {**env, WORKER_CLIENT_NAME_ENV: f"{WORKER_CLIENT_PREFIX}{node_name}"}
    worker = ServiceProcess(label or node_name, argv, env, log_path)
    try:
        worker.wait_for_log(" ready.", ready_timeout)
    except BaseException:
        worker.stop()
        raise
    return worker


def start_flower(
    settings: Mapping[str, str], log_dir: Path, port: int, auth: str
) -> ServiceProcess:
    """``celery -A lgc_app flower`` on ``127.0.0.1:port`` with basic auth ``user:pass``."""
    argv = [
        sys.executable,
        "-m",
        "celery",
        "-A",
        APP_MODULE,
        "flower",
        f"--port={port}",
        "--address=127.0.0.1",
        f"--basic-auth={auth}",
    ]
    flower = ServiceProcess("flower", argv, subprocess_env(settings), log_dir / "flower.log")
    try:
        user, _, password = auth.partition(":")
        wait_until(
            lambda: _flower_up(flower, port, user, password), READY_TIMEOUT, 0.1, "Flower's API"
        )
    except BaseException:
        flower.stop()
        raise
    return flower


def _flower_up(flower: ServiceProcess, port: int, user: str, password: str) -> bool:
    if not flower.alive():
        raise AssertionError(f"flower exited:\n{flower.log()[-4000:]}")
    try:
        http_get_json(f"http://127.0.0.1:{port}/api/tasks", (user, password), timeout=2)
    except (OSError, urllib.error.URLError):
        return False
    return True


def http_get_json(url: str, auth: tuple[str, str] | None = None, timeout: float = 10) -> Any:
    """GET ``url`` (with HTTP basic auth) and decode its JSON; HTTP errors raise HTTPError."""
    request = urllib.request.Request(url)
    if auth is not None:
        token = base64.b64encode(f"{auth[0]}:{auth[1]}".encode()).decode()
        request.add_header("Authorization", f"Basic {token}")
    with urllib.request.urlopen(request, timeout=timeout) as response:
        return json.loads(response.read().decode())


def run_client(settings: Mapping[str, str], code: str, timeout: float = 60) -> Any:
    """Run ``code`` in a new Python process that has ``bundle`` (the test app built from
    ``settings``) in scope; the JSON the code prints on its last line, decoded."""
    prelude = (
        "import json, lgc_app\n"
        "bundle = lgc_app.build(lgc_app.settings_from_env())\n"
        "graphs = bundle.graphs\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", prelude + code],
        env=subprocess_env(settings),
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )
    if done.returncode != 0:
        raise AssertionError(
            f"client process failed ({done.returncode}):\n{done.stdout}\n{done.stderr}"
        )
    return json.loads(done.stdout.strip().splitlines()[-1])


class BundleAccess:
    """What a test stack reads from its ``bundle``: the ``Bundle`` its app module's ``build``
    returned (``app``, ``saver``, ``executor``, ``graphs`` by graph id)."""

    bundle: Any

    @property
    def app(self) -> Any:
        return self.bundle.app

    @property
    def saver(self) -> Any:
        return self.bundle.saver

    @property
    def executor(self) -> Any:
        return self.bundle.executor

    def graph(self, graph_id: str) -> Any:
        return self.bundle.graphs[graph_id]


@dataclass
class CeleryStack(BundleAccess):
    """One test module's Celery world: settings, the app as the test process builds it, workers.

    ``bundle`` (``lgc_app.Bundle``) has ``app``, ``saver`` and ``graphs`` (by graph id).
    """

    broker_kind: str
    settings: dict[str, str]
    log_dir: Path
    bundle: Any = None
    workers: dict[str, ServiceProcess] = field(default_factory=dict)
    others: list[ServiceProcess] = field(default_factory=list)

    @property
    def queue(self) -> str:
        return self.settings["LGC_QUEUE"]

    @property
    def special_queue(self) -> str:
        return self.settings["LGC_SPECIAL_QUEUE"]

    def build(self) -> None:
        if str(APPS_DIR) not in sys.path:
            sys.path.insert(0, str(APPS_DIR))
        import lgc_app

        self.bundle = lgc_app.build(self.settings)
        self.bundle.saver.setup()

    def worker(
        self, worker_name: str, queues: Iterable[str] | None = None, **options: Any
    ) -> ServiceProcess:
        """The worker called ``worker_name``, started (on ``queues``) the first time."""
        if worker_name not in self.workers:
            self.workers[worker_name] = start_worker(
                self.settings,
                self.log_dir,
                queues=queues or [self.queue],
                worker_name=worker_name,
                **options,
            )
        return self.workers[worker_name]

    def worker_logs(self) -> str:
        return "\n".join(worker.log() for worker in self.workers.values())

    def wait_until_quiet(self, timeout: float = 30.0) -> None:
        """Wait until the broker (Redis) and the stack's workers hold no task
        (:func:`wait_until_quiet`)."""
        assert self.broker_kind == "redis", "wait_until_quiet reads the queues of a Redis broker"
        queues = [self.queue, self.special_queue]
        settings = self.settings
        wait_until_quiet(self.app, settings["LGC_BROKER_URL"], queues, len(self.workers), timeout)

    def close(self) -> None:
        """End the stack at the end of its module: its processes are killed (the tests that
        need a warm shutdown ask for one themselves)."""
        for process in [*self.others, *self.workers.values()]:
            process.kill()
        self.workers.clear()
        self.others.clear()
        if self.bundle is not None:
            self.bundle.close()
