"""External services for the test suite: reachability checks, ``require`` and saver factories.

Test modules import from here (``from services import require, make_saver``); the fixtures built
on it live in ``conftest.py``.  A service that is not running makes its tests *skip* locally but
*fail* when the ``CI`` environment variable is set, so CI never passes by skipping.

Addresses can be overridden with environment variables:

- ``LGC_TEST_POSTGRES_ADMIN_URL``: a URL of a PostgreSQL superuser connection (default: try users
  ``postgres`` then ``root`` on ``127.0.0.1:5432``, trust auth);
- ``LGC_TEST_REDIS_URL``: Redis server URL without a db (default ``redis://127.0.0.1:6379``);
  tests use db :data:`REDIS_TEST_DB` (``LGC_TEST_REDIS_DB``, default 11), the fuzz tests
  their own (``LGC_TEST_FUZZ_REDIS_DB``, default 12);
- ``LGC_TEST_AMQP_URL``: RabbitMQ URL (default ``amqp://guest:guest@127.0.0.1:5672//``).
"""

from __future__ import annotations

import os
import socket
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Literal
from urllib.parse import urlsplit

import pytest

from langgraph_celery.checkpoint import BaseCheckpointSaver, MemorySaver, SqlSaver
from langgraph_celery.serde import Serializer

__all__ = [
    "SAVER_KINDS",
    "START_COMMANDS",
    "SaverKind",
    "amqp_server_url",
    "flushed_redis_db",
    "fresh_postgres_database",
    "in_ci",
    "make_saver",
    "postgres_admin_url",
    "redis_server_url",
    "require",
    "tcp_reachable",
    "unique_table_prefix",
]

SaverKind = Literal["memory", "sqlite", "postgres"]
#: Every saver the conformance suite (and engine tests using the ``saver`` fixture) runs on.
SAVER_KINDS: tuple[SaverKind, ...] = ("memory", "sqlite", "postgres")

#: Redis database number reserved for tests (flushed before and after each test using it);
#: ``LGC_TEST_REDIS_DB`` picks another, so that two checkouts can run their tests at once.
REDIS_TEST_DB = int(os.environ.get("LGC_TEST_REDIS_DB", "11"))

#: How to start each service on the CI image.
START_COMMANDS: dict[str, str] = {
    "redis": (
        'redis-server --daemonize yes --bind 127.0.0.1 -::1 --port 6379 --save "" '
        "--appendonly no --dir /var/lib/redis --logfile /var/log/redis/ci.log"
    ),
    "postgresql": "pg_ctlcluster --skip-systemctl-redirect $(ls /etc/postgresql) main start",
    "rabbitmq": "rabbitmq-server -detached",
}

_POSTGRES_CANDIDATES = (
    "postgresql+psycopg://postgres@127.0.0.1:5432/postgres",
    "postgresql+psycopg://root@127.0.0.1:5432/postgres",
)


def in_ci() -> bool:
    """True when the ``CI`` environment variable is set to something non-empty."""
    return bool(os.environ.get("CI"))


def require(service: str, ok: bool, detail: str = "") -> None:
    """Skip the test (locally) or fail it (``CI`` set) unless ``ok``; say how to start ``service``.

    ``service`` is a key of :data:`START_COMMANDS` (``redis``, ``postgresql``, ``rabbitmq``) or
    any other name (then no command is suggested).
    """
    if ok:
        return
    message = f"{service} is not reachable"
    if detail:
        message += f" ({detail})"
    command = START_COMMANDS.get(service)
    if command:
        message += f". Start it with: {command}"
    if in_ci():
        pytest.fail(message + " [CI is set, so this fails instead of skipping]", pytrace=False)
    pytest.skip(message)


def tcp_reachable(host: str, port: int, timeout: float = 1.0) -> tuple[bool, str]:
    """Whether something accepts TCP connections on ``host:port``, and why not."""
    try:
        with socket.create_connection((host, port), timeout=timeout):
            return True, ""
    except OSError as exc:
        return False, f"{host}:{port}: {exc}"


def postgres_admin_url() -> tuple[str | None, str]:
    """A superuser URL that connects (SQLAlchemy, psycopg 3), or ``None`` and the reason."""
    from sqlalchemy import create_engine, text

    override = os.environ.get("LGC_TEST_POSTGRES_ADMIN_URL")
    candidates = (override,) if override else _POSTGRES_CANDIDATES
    errors: list[str] = []
    for url in candidates:
        engine = create_engine(url, connect_args={"connect_timeout": 3})
        try:
            with engine.connect() as conn:
                conn.execute(text("SELECT 1"))
            return url, ""
        except Exception as exc:  # any driver/connection error means "try the next one"
            errors.append(f"{url}: {type(exc).__name__}: {str(exc).strip().splitlines()[0]}")
        finally:
            engine.dispose()
    return None, "; ".join(errors)


def redis_server_url() -> tuple[str, bool, str]:
    """The Redis server URL (no db), whether it answers PING, and why not."""
    import redis

    url = os.environ.get("LGC_TEST_REDIS_URL", "redis://127.0.0.1:6379").rstrip("/")
    client = redis.Redis.from_url(url, socket_connect_timeout=2, socket_timeout=2)
    try:
        return url, bool(client.ping()), ""
    except Exception as exc:  # connection refused, timeout, auth...
        return url, False, f"{url}: {type(exc).__name__}: {exc}"
    finally:
        client.close()


def amqp_server_url() -> tuple[str, bool, str]:
    """The RabbitMQ URL, whether its port accepts connections, and why not."""
    url = os.environ.get("LGC_TEST_AMQP_URL", "amqp://guest:guest@127.0.0.1:5672//")
    parts = urlsplit(url)
    ok, detail = tcp_reachable(parts.hostname or "127.0.0.1", parts.port or 5672)
    return url, ok, detail


@contextmanager
def flushed_redis_db(server_url: str, db: int) -> Iterator[str]:
    """The URL of Redis db ``db`` on ``server_url``, flushed before and after."""
    import redis

    url = f"{server_url}/{db}"
    client = redis.Redis.from_url(url)
    try:
        client.flushdb()
        yield url
        client.flushdb()
    finally:
        client.close()


@contextmanager
def fresh_postgres_database(prefix: str) -> Iterator[str]:
    """A new, empty PostgreSQL database ``<prefix>_<hex>`` (its psycopg 3 URL), dropped after;
    the server is ``require``-d."""
    from sqlalchemy import create_engine, text
    from sqlalchemy.engine import make_url

    admin_url, detail = postgres_admin_url()
    require("postgresql", admin_url is not None, detail)
    assert admin_url is not None
    name = f"{prefix}_{uuid.uuid4().hex[:12]}"
    admin = create_engine(admin_url, isolation_level="AUTOCOMMIT")
    try:
        with admin.connect() as conn:
            conn.execute(text(f'CREATE DATABASE "{name}"'))
        yield make_url(admin_url).set(database=name).render_as_string(hide_password=False)
    finally:
        with admin.connect() as conn:
            conn.execute(text(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))
        admin.dispose()


def unique_table_prefix() -> str:
    """A fresh table prefix, so savers sharing one database do not see each other's rows."""
    return f"t{uuid.uuid4().hex[:12]}_"


def make_saver(
    kind: SaverKind,
    *,
    tmp_path: Path | None = None,
    postgres_url: str | None = None,
    serializer: Serializer | None = None,
    table_prefix: str | None = None,
) -> BaseCheckpointSaver:
    """Build a saver of ``kind``: ``memory``; ``sqlite`` (a file in ``tmp_path``); ``postgres``.

    SQL savers get ``table_prefix`` (a fresh one if not given); the caller disposes of them
    (``saver.dispose()``).
    """
    if kind == "memory":
        return MemorySaver(serializer)
    prefix = table_prefix or unique_table_prefix()
    if kind == "sqlite":
        if tmp_path is None:
            raise ValueError("make_saver('sqlite') needs tmp_path")
        return SqlSaver(f"sqlite:///{tmp_path / 'checkpoints.db'}", serializer, table_prefix=prefix)
    if kind == "postgres":
        if postgres_url is None:
            raise ValueError("make_saver('postgres') needs postgres_url")
        return SqlSaver(postgres_url, serializer, table_prefix=prefix)
    raise ValueError(f"unknown saver kind {kind!r}; expected one of {SAVER_KINDS}")
