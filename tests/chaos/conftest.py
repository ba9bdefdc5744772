"""Fixtures of the chaos tests (real workers, real failures; see ``chaos_support.py``).

- ``chaos_db_url`` (session): a fresh PostgreSQL database ``lgc_chaos_<hex>`` for the
  checkpoints (the PostgreSQL test kills every connection to it), dropped at the end.
- ``side_url`` (session): Redis db 9 of the test server (the nodes report their pid there);
  flushed by each stack.
- ``make_stack`` (module): builds a :class:`ChaosStack` on a broker URL (Redis db 9 by default)
  with a fresh table prefix and queue, and starts its prefork worker(s); everything is stopped
  at the end of the module.
- ``chaos_stack`` (module): ``make_stack()`` on Redis db 9 with one ``-c 2`` worker.
- ``thread``: a fresh thread id.

Services missing: skipped locally, failed under ``CI`` (``services.require``).
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from chaos_support import ChaosStack, ReaperThread, StackFactory

from services import fresh_postgres_database, unique_table_prefix

#: The Redis db of the chaos tests (broker, result backend, the nodes' side channel).
CHAOS_REDIS_DB = 9


@pytest.fixture(scope="session")
def chaos_db_url() -> Iterator[str]:
    with fresh_postgres_database("lgc_chaos") as url:
        yield url


@pytest.fixture(scope="session")
def side_url(_redis_server: str) -> str:
    return f"{_redis_server}/{CHAOS_REDIS_DB}"


@pytest.fixture(scope="module")
def make_stack(
    chaos_db_url: str, side_url: str, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[StackFactory]:
    import redis

    stacks: list[ChaosStack] = []
    side = redis.Redis.from_url(side_url)
    side.flushdb()

    def factory(
        broker_url: str | None = None, workers: int = 1, concurrency: int = 2, **extra: str
    ) -> ChaosStack:
        settings = {
            "CHAOS_BROKER_URL": broker_url or side_url,
            "CHAOS_SIDE_URL": side_url,
            "CHAOS_DB_URL": chaos_db_url,
            "CHAOS_TABLE_PREFIX": unique_table_prefix(),
            "CHAOS_QUEUE": f"chaos-{uuid.uuid4().hex[:8]}",
            "CHAOS_STALLED_AFTER": "2",
            **extra,
        }
        log_dir: Path = tmp_path_factory.mktemp("chaos")
        stack = ChaosStack(settings, log_dir, side)
        stacks.append(stack)
        stack.build()
        for index in range(workers):
            stack.start_worker(f"w{index}", concurrency)
        return stack

    try:
        yield factory
    finally:
        for stack in stacks:
            stack.close()
        side.flushdb()
        side.close()


@pytest.fixture(scope="module")
def chaos_stack(make_stack: StackFactory) -> ChaosStack:
    return make_stack()


@pytest.fixture
def thread() -> str:
    return f"thread-{uuid.uuid4().hex[:12]}"


@pytest.fixture
def reaper(stack: ChaosStack) -> Iterator[ReaperThread]:
    """A reaper pass every so often in this process, on the module's ``stack``, while the test
    runs."""
    thread = ReaperThread(stack.executor).start()
    try:
        yield thread
    finally:
        thread.stop()
