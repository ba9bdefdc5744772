"""What the Celery benchmarks (``celery_bench``, ``soak``) share: their Redis db and PostgreSQL
database, a ``celery worker`` subprocess of one of their apps, and the commit they ran on."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
from collections.abc import Mapping
from pathlib import Path

import redis
from sqlalchemy import create_engine, text
from sqlalchemy.engine import make_url

ROOT = Path(__file__).resolve().parent.parent


def flush_redis(url: str) -> None:
    """Empty the Redis db at ``url``."""
    client = redis.Redis.from_url(url)
    try:
        client.flushdb()
    finally:
        client.close()


def bench_database(admin_url: str, name: str) -> tuple[str, str]:
    """The URL of PostgreSQL database ``name`` (created through ``admin_url`` if missing) and
    the server's version."""
    admin = create_engine(admin_url, isolation_level="AUTOCOMMIT")
    try:
        with admin.connect() as conn:
            exists = conn.execute(
                text("SELECT 1 FROM pg_database WHERE datname = :name"), {"name": name}
            ).first()
            if exists is None:
                conn.execute(text(f'CREATE DATABASE "{name}"'))
            version = str(conn.execute(text("SHOW server_version")).scalar())
    finally:
        admin.dispose()
    return make_url(admin_url).set(database=name).render_as_string(False), version


def drop_tables(pg_url: str, prefix: str) -> None:
    """Drop every table of the database's current schema whose name starts with ``prefix``."""
    engine = create_engine(pg_url)
    try:
        with engine.begin() as conn:
            tables = conn.execute(
                text(
                    "SELECT tablename FROM pg_tables WHERE schemaname = current_schema() "
                    "AND starts_with(tablename, :prefix)"
                ),
                {"prefix": prefix},
            ).scalars()
            for table in list(tables):
                conn.execute(text(f'DROP TABLE IF EXISTS "{table}" CASCADE'))
    finally:
        engine.dispose()


class WorkerProcess:
    """``celery -A <app_module> worker -P prefork -c <concurrency> -n <node_name>``, its output in
    ``log_path``, in a session of its own (so that stopping it also stops its pool)."""

    def __init__(
        self,
        app_module: str,
        *,
        concurrency: int,
        node_name: str,
        env: Mapping[str, str],
        log_path: Path,
    ) -> None:
        self.log_path = log_path
        full_env = dict(os.environ)
        full_env.update(env)
        full_env["PYTHONPATH"] = os.pathsep.join(
            p for p in (str(ROOT), full_env.get("PYTHONPATH", "")) if p
        )
        command = [
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
            "warning",
            # cluster chatter only: no effect on how tasks run
            "--without-gossip",
            "--without-mingle",
            "--without-heartbeat",
            "-n",
            node_name,
        ]
        self._log = log_path.open("wb")
        self.process = subprocess.Popen(
            command,
            cwd=ROOT,
            env=full_env,
            stdout=self._log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )

    @property
    def pid(self) -> int:
        return self.process.pid

    def alive(self) -> bool:
        return self.process.poll() is None

    def tail(self, lines: int = 40) -> str:
        self._log.flush()
        return "\n".join(self.log_path.read_text(errors="replace").splitlines()[-lines:])

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(timeout=20)
            except subprocess.TimeoutExpired:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(self.process.pid, signal.SIGKILL)
                self.process.wait(timeout=10)
        # pool processes left behind by the SIGTERM path (same session, started by us)
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(self.process.pid, signal.SIGKILL)
        self._log.close()


def source_state() -> str:
    """The commit the benchmark ran on, and whether ``src/`` differed from it (read-only git)."""
    try:
        head = subprocess.run(
            ["git", "rev-parse", "--short", "HEAD"],
            cwd=ROOT,
            capture_output=True,
            text=True,
            check=True,
        ).stdout.strip()
        dirty = subprocess.run(
            ["git", "diff", "--quiet", "HEAD", "--", "src"], cwd=ROOT, check=False
        ).returncode
    except (OSError, subprocess.CalledProcessError):
        return "?"
    return f"{head}{' + uncommitted changes in src/' if dirty else ''}"
