"""Fixtures shared by the whole test suite.

Services (see ``services.py``; skipped locally when missing, failed when ``CI`` is set):

- ``postgres_url`` (session): URL of a fresh PostgreSQL database ``lgc_test_<hex>``, dropped at
  the end of the session.
- ``redis_url``: ``redis://127.0.0.1:6379/11`` (db reserved for tests), flushed before and after.
- ``amqp_url`` (session): the RabbitMQ URL, once its port accepts connections.

Checkpoint savers:

- ``saver``: a fresh, empty saver, parametrized over ``memory``, ``sqlite`` and ``postgres``
  (ids are those names), so a test using it runs once per saver.
- ``saver_factory``: same parametrization; a callable returning another handle on the *same*
  store each time (a new ``SqlSaver`` on the same database and tables, as another process would
  build; for ``memory`` the one instance).  ``saver`` is its first handle.
- ``saver_kind``: the parameter itself.
- ``sql_saver``: like ``saver`` but only ``sqlite`` and ``postgres``.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from langgraph_celery.checkpoint import BaseCheckpointSaver, SqlSaver
from services import (
    REDIS_TEST_DB,
    SAVER_KINDS,
    SaverKind,
    amqp_server_url,
    flushed_redis_db,
    fresh_postgres_database,
    make_saver,
    redis_server_url,
    require,
    unique_table_prefix,
)

SaverFactory = Callable[[], BaseCheckpointSaver]


@pytest.fixture(scope="session")
def postgres_url() -> Iterator[str]:
    """A fresh, empty PostgreSQL database for this session (psycopg 3 URL)."""
    with fresh_postgres_database("lgc_test") as url:
        yield url


@pytest.fixture(scope="session")
def _redis_server() -> str:
    url, ok, detail = redis_server_url()
    require("redis", ok, detail)
    return url


@pytest.fixture
def redis_url(_redis_server: str) -> Iterator[str]:
    """URL of the Redis db reserved for tests, empty at the start and flushed at the end."""
    with flushed_redis_db(_redis_server, REDIS_TEST_DB) as url:
        yield url


@pytest.fixture(scope="session")
def amqp_url() -> str:
    """The RabbitMQ broker URL, once something listens on its port."""
    url, ok, detail = amqp_server_url()
    require("rabbitmq", ok, detail)
    return url


@contextmanager
def _saver_factory(
    kind: SaverKind, request: pytest.FixtureRequest, tmp_path: Path
) -> Iterator[SaverFactory]:
    postgres = request.getfixturevalue("postgres_url") if kind == "postgres" else None
    prefix = unique_table_prefix()
    made: list[BaseCheckpointSaver] = []

    def factory() -> BaseCheckpointSaver:
        if kind == "memory" and made:
            return made[0]
        saver = make_saver(kind, tmp_path=tmp_path, postgres_url=postgres, table_prefix=prefix)
        made.append(saver)
        return saver

    try:
        yield factory
    finally:
        for saver in made:
            if isinstance(saver, SqlSaver):
                saver.dispose()


@pytest.fixture(params=SAVER_KINDS)
def saver_kind(request: pytest.FixtureRequest) -> SaverKind:
    kind: SaverKind = request.param
    return kind


@pytest.fixture
def saver_factory(
    saver_kind: SaverKind, request: pytest.FixtureRequest, tmp_path: Path
) -> Iterator[SaverFactory]:
    with _saver_factory(saver_kind, request, tmp_path) as factory:
        yield factory


@pytest.fixture
def saver(saver_factory: SaverFactory) -> BaseCheckpointSaver:
    return saver_factory()


@pytest.fixture(params=[kind for kind in SAVER_KINDS if kind != "memory"])
def sql_saver(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[SqlSaver]:
    kind: SaverKind = request.param
    with _saver_factory(kind, request, tmp_path) as factory:
        saver = factory()
        assert isinstance(saver, SqlSaver)
        yield saver
