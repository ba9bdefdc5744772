"""The checkpoint-saver conformance suite, to run against a saver of your own with pytest.

Two classes of tests, one per half of the saver contract:

* :class:`SaverConformance`: what every
  :class:`~langgraph_celery.checkpoint.BaseCheckpointSaver` must do (the in-process executor
  needs no more): storing, reading and listing checkpoints with their values' types, pending
  writes (the first write wins), the four uniqueness rules under concurrent writers (one
  successor per checkpoint among them; a fork marked ``Checkpoint.branch`` shares its
  parent), release, serialization failures that store nothing, several handles on one store,
  checkpoints given with a ``delta`` (chains, whole values between them, forks, a delta whose
  parent was never stored: whatever a saver stores, it reads back the same values), deleting
  and pruning threads (``delete_thread``, ``prune``);
* :class:`RunIndexConformance`: what a saver that runs graphs on Celery must also do as a
  :class:`~langgraph_celery.checkpoint.RunIndex`: claims, timers, a checkpoint stored with its
  timer change, the run lookup, run records, and finding completed threads
  (``completed_runs``, ``supersede_run``) for the reaper's ``checkpoint_ttl``.

Subclass them in a test module (its name starting with ``Test``) and override one fixture,
``saver_factory``: a callable that returns a handle on one store, empty when the test starts,
each time it is called.  A store shared by processes gets a new handle per call, as another
process would build one; a store that lives in one process may return the same object.
``saver`` (the first handle) is what most tests use::

    # tests/test_my_saver.py
    from collections.abc import Callable, Iterator

    import pytest

    from langgraph_celery.testing import RunIndexConformance, SaverConformance
    from my_package import MySaver


    class TestMySaver(SaverConformance, RunIndexConformance):
        @pytest.fixture
        def saver_factory(self, tmp_path) -> Iterator[Callable[[], MySaver]]:
            made: list[MySaver] = []

            def factory() -> MySaver:
                made.append(MySaver(tmp_path / "store"))
                return made[-1]

            yield factory
            for saver in made:
                saver.close()

A test's name says what failed (``TestMySaver::test_same_run_and_step_conflicts...``).  For
pytest's detailed assertion messages inside these tests, have pytest rewrite this package: in
your ``conftest.py``, before anything imports it,
``pytest.register_assert_rewrite("langgraph_celery.testing")``.

:func:`make_checkpoint` and :func:`race` (threads released together) are the suite's helpers,
for tests of your own.  This package needs pytest (``pip install "langgraph-celery[test]"``);
importing :mod:`langgraph_celery` never imports it.
"""

from __future__ import annotations

try:
    import pytest as _pytest  # noqa: F401  (the suite is pytest fixtures and tests)
except ModuleNotFoundError as error:  # pragma: no cover - depends on the environment
    if error.name != "pytest":
        raise
    raise ModuleNotFoundError(
        "langgraph_celery.testing is a pytest suite and needs pytest: "
        'pip install "langgraph-celery[test]" (or pytest itself)',
        name="pytest",
    ) from error

from langgraph_celery.testing._index import RunIndexConformance
from langgraph_celery.testing._storage import SaverConformance
from langgraph_celery.testing._support import THREAD, make_checkpoint, race

__all__ = ["THREAD", "RunIndexConformance", "SaverConformance", "make_checkpoint", "race"]
