"""Fixtures of the fuzz tests.

- ``fuzz_redis_url`` (session): Redis db :data:`fuzz_support.FUZZ_REDIS_DB` (broker, results,
  the fixed graphs' execution counters), flushed before and after the session.
- ``fuzz_stack`` (session): a :class:`fuzz_support.FuzzStack`: the ``fuzz_app`` Celery app on
  that broker, checkpoints in the session's PostgreSQL database under a fresh table prefix, a
  unique queue, and one prefork worker serving it.  Stopped at the end of the session.
- ``fuzz_thread``: a fresh thread id.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from fuzz_support import FUZZ_GRAPHS, FUZZ_REDIS_DB, FuzzStack

from services import flushed_redis_db, unique_table_prefix


@pytest.fixture(scope="session")
def fuzz_redis_url(_redis_server: str) -> Iterator[str]:
    with flushed_redis_db(_redis_server, FUZZ_REDIS_DB) as url:
        yield url


@pytest.fixture(scope="session")
def fuzz_stack(
    fuzz_redis_url: str, postgres_url: str, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[FuzzStack]:
    settings = {
        "FUZZ_BROKER_URL": fuzz_redis_url,
        "FUZZ_BACKEND_URL": fuzz_redis_url,
        "FUZZ_DB_URL": postgres_url,
        "FUZZ_TABLE_PREFIX": unique_table_prefix(),
        "FUZZ_QUEUE": f"fuzz-{uuid.uuid4().hex[:8]}",
        "FUZZ_GRAPHS": str(FUZZ_GRAPHS),
    }
    log_dir: Path = tmp_path_factory.mktemp("fuzz")
    stack = FuzzStack(settings, log_dir)
    try:
        stack.start()
        yield stack
    finally:
        stack.close()


@pytest.fixture
def fuzz_thread() -> str:
    return f"fuzz-{uuid.uuid4().hex[:12]}"


@pytest.fixture
def fuzz_redis(fuzz_redis_url: str) -> Iterator[Any]:
    import redis

    client = redis.Redis.from_url(fuzz_redis_url)
    try:
        yield client
    finally:
        client.close()
