"""Fixtures of the Celery integration tests.

- ``broker_kind`` (module): ``"redis"``; a module overrides it (with ``params``) to run its tests
  on RabbitMQ too.  ``main_worker_options`` (module): how the ``main`` worker is started
  (``{"events": True}`` for ``-E``).
- ``celery_redis_url`` (module): Redis db 11 (broker, result backend, the nodes' counters),
  flushed before and after the module.
- ``celery_stack`` (module): a :class:`celery_support.CeleryStack` on that broker, with a fresh
  table prefix in the session's PostgreSQL database, unique queue names, and one prefork worker
  (``main``) serving the default queue; more workers with ``celery_stack.worker(name, queues)``.
  Everything is stopped at the end of the module.
- ``thread``: a fresh thread id; ``redis_client``: a client on db 11.
"""

from __future__ import annotations

import sys
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from celery_support import APPS_DIR, CeleryStack
from services import REDIS_TEST_DB, flushed_redis_db, unique_table_prefix

# The test app and its graphs are importable by the test modules too (as by the workers).
if str(APPS_DIR) not in sys.path:
    sys.path.insert(0, str(APPS_DIR))


@pytest.fixture(scope="module")
def broker_kind() -> str:
    return "redis"


@pytest.fixture(scope="module")
def main_worker_options() -> dict[str, Any]:
    """Options of the ``main`` worker (``start_worker`` keywords); ``{"events": True}`` for -E."""
    return {}


@pytest.fixture(scope="module")
def celery_redis_url(_redis_server: str) -> Iterator[str]:
    with flushed_redis_db(_redis_server, REDIS_TEST_DB) as url:
        yield url


def _delete_amqp_queues(url: str, queues: list[str]) -> None:
    from kombu import Connection

    with Connection(url) as conn:
        channel = conn.channel()
        for queue in queues:
            channel.queue_delete(queue)
        channel.close()


@pytest.fixture(scope="module")
def celery_stack(
    request: pytest.FixtureRequest,
    broker_kind: str,
    main_worker_options: dict[str, Any],
    celery_redis_url: str,
    postgres_url: str,
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[CeleryStack]:
    broker = celery_redis_url
    if broker_kind == "amqp":
        broker = request.getfixturevalue("amqp_url")
    suffix = uuid.uuid4().hex[:8]
    settings = {
        "LGC_BROKER_URL": broker,
        "LGC_BACKEND_URL": celery_redis_url,
        "LGC_DB_URL": postgres_url,
        "LGC_TABLE_PREFIX": unique_table_prefix(),
        "LGC_QUEUE": f"lgc-{suffix}",
        "LGC_SPECIAL_QUEUE": f"lgc-special-{suffix}",
        "LGC_REDIS_URL": celery_redis_url,
    }
    log_dir: Path = tmp_path_factory.mktemp(f"celery-{broker_kind}")
    stack = CeleryStack(broker_kind, settings, log_dir)
    try:
        stack.build()
        stack.worker("main", **main_worker_options)
        yield stack
    finally:
        stack.close()
        if broker_kind == "amqp":
            _delete_amqp_queues(broker, [settings["LGC_QUEUE"], settings["LGC_SPECIAL_QUEUE"]])


@pytest.fixture
def thread() -> str:
    return f"thread-{uuid.uuid4().hex[:12]}"


@pytest.fixture
def redis_client(celery_redis_url: str) -> Iterator[Any]:
    import redis

    client = redis.Redis.from_url(celery_redis_url)
    try:
        yield client
    finally:
        client.close()
