"""Fixtures of the console tests: the graphs of ``console_graphs`` with a worker thread and
the catalog the console serves them from (helpers are in ``console_support``)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import console_graphs
import pytest
from browser_support import launch, start_playwright
from console_graphs import Graphs

from langgraph_celery.console import Catalog, ConsoleSettings
from langgraph_celery.worker.embedded import embedded_worker_for


@pytest.fixture(scope="module")
def graphs(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Graphs]:
    database = tmp_path_factory.mktemp("console") / "console.sqlite"
    built = console_graphs.build(f"sqlite:///{database}")
    worker = embedded_worker_for(built.letters)
    assert worker is not None
    worker.start()
    try:
        yield built
    finally:
        console_graphs.RELEASE.set()  # a node still held must not hold the worker's stop
        worker.stop()
        console_graphs.RELEASE.clear()
        console_graphs.BROKEN.clear()
        built.saver.dispose()


@pytest.fixture(scope="module")
def catalog(graphs: Graphs) -> Catalog:
    return Catalog.of(
        (console_graphs, f"console_graphs:{name}", graph) for name, graph in graphs.all().items()
    )


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    """Chromium, for a module's browser tests (started when one asks for it)."""
    playwright = start_playwright()
    try:
        chromium = launch(playwright)
        yield chromium
        chromium.close()
    finally:
        playwright.stop()


@pytest.fixture
def settings() -> ConsoleSettings:
    return ConsoleSettings()
