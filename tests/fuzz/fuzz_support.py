"""Helpers of the fuzz tests (``tests/fuzz/``): hypothesis settings, the fuzz app's stack (its
settings, the app as the test process builds it, its worker subprocess) and log reading.

The worker is a ``celery -A fuzz_app worker`` subprocess (``apps/fuzz_app.py``), started with
:class:`celery_support.ServiceProcess`; its log is read back to check what it said.
"""

from __future__ import annotations

import os
import re
import sys
import uuid
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from hypothesis import HealthCheck, Phase, settings

from app_kit import app_env
from celery_support import (
    BundleAccess,
    ServiceProcess,
    launch_worker,
    wait_until,
    wait_until_quiet,
)

__all__ = [
    "APPS_DIR",
    "FUZZ_GRAPHS",
    "FUZZ_REDIS_DB",
    "FuzzStack",
    "fuzz_env",
    "fuzz_settings",
    "log_records",
    "start_fuzz_worker",
]

APPS_DIR = Path(__file__).parent / "apps"
APP_MODULE = "fuzz_app"
#: The Redis db of the fuzz tests (broker, results, counters): their own, so that other suites
#: flushing the shared test db (11) never drop the fuzz worker's messages;
#: ``LGC_TEST_FUZZ_REDIS_DB`` picks another, so that two checkouts can run them at once.
FUZZ_REDIS_DB = int(os.environ.get("LGC_TEST_FUZZ_REDIS_DB", "12"))
#: Generated graphs the worker compiles (seeds ``0..N-1``); ``LGC_FUZZ_GRAPHS`` raises it.
FUZZ_GRAPHS = int(os.environ.get("LGC_FUZZ_GRAPHS", "40"))

if str(APPS_DIR) not in sys.path:
    sys.path.insert(0, str(APPS_DIR))


def fuzz_settings(examples: int, **overrides: Any) -> settings:
    """Hypothesis settings for CI: ``examples`` examples (``LGC_FUZZ_EXAMPLES`` overrides it),
    derandomized (the same examples on every run), no example database, no deadline;
    ``LGC_FUZZ_RANDOM=1`` explores other examples on every run (not derandomized)."""
    wanted = os.environ.get("LGC_FUZZ_EXAMPLES")
    options: dict[str, Any] = {
        "max_examples": int(wanted) if wanted else examples,
        "derandomize": os.environ.get("LGC_FUZZ_RANDOM") != "1",
        "database": None,
        "deadline": None,
        "print_blob": True,
        # no explain phase: it writes patch files under .hypothesis/ in the repository;
        # LGC_FUZZ_SHRINK=0 reports the first failing example as found (a slow one shrinks slowly)
        "phases": [Phase.explicit, Phase.reuse, Phase.generate]
        + ([] if os.environ.get("LGC_FUZZ_SHRINK") == "0" else [Phase.shrink]),
        "suppress_health_check": [
            HealthCheck.too_slow,
            HealthCheck.function_scoped_fixture,
            HealthCheck.data_too_large,
        ],
    }
    options.update(overrides)
    return settings(**options)


def fuzz_env(
    app_settings: Mapping[str, str], extra: Mapping[str, str] | None = None
) -> dict[str, str]:
    """The environment of a subprocess that imports ``fuzz_app`` with ``app_settings``."""
    return app_env(APPS_DIR, app_settings, extra)


def start_fuzz_worker(
    app_settings: Mapping[str, str], log_dir: Path, name: str, concurrency: int = 4
) -> ServiceProcess:
    """``celery -A fuzz_app worker`` on the app's default queue; returns once it is ready."""
    return launch_worker(
        APP_MODULE,
        [app_settings["FUZZ_QUEUE"]],
        f"{name}-{uuid.uuid4().hex[:8]}",
        fuzz_env(app_settings),
        log_dir / f"worker-{name}.log",
        concurrency,
        label=name,
    )


_RECORD = re.compile(r"^\[[^\]]*: (DEBUG|INFO|WARNING|ERROR|CRITICAL)/[^\]]*\] ", re.M)


def log_records(text: str) -> list[tuple[str, str]]:
    """The log records of a worker log, as ``(level, text)``; a record's text runs until the
    next record (a traceback is part of the record that printed it)."""
    matches = list(_RECORD.finditer(text))
    records = []
    for index, match in enumerate(matches):
        end = matches[index + 1].start() if index + 1 < len(matches) else len(text)
        records.append((match.group(1), text[match.end() : end].rstrip("\n")))
    return records


@dataclass
class FuzzStack(BundleAccess):
    """The fuzz app's world: settings, the app as the test process builds it, one worker."""

    settings: dict[str, str]
    log_dir: Path
    bundle: Any = None
    worker: ServiceProcess | None = None
    extra: list[ServiceProcess] = field(default_factory=list)

    @property
    def queue(self) -> str:
        return self.settings["FUZZ_QUEUE"]

    def start(self) -> None:
        import fuzz_app

        self.bundle = fuzz_app.build(self.settings)
        self.bundle.saver.setup()
        self.worker = start_fuzz_worker(self.settings, self.log_dir, "fuzz")

    def log(self) -> str:
        return self.worker.log() if self.worker is not None else ""

    def mark(self) -> int:
        """Where the worker's log ends now (pass it to :meth:`records`)."""
        assert self.worker is not None
        return self.worker.log_path.stat().st_size

    def records(self, since: int = 0) -> list[tuple[str, str]]:
        """The worker's log records written after the :meth:`mark` ``since``."""
        assert self.worker is not None
        with open(self.worker.log_path, "rb") as log:
            log.seek(since)
            return log_records(log.read().decode(errors="replace"))

    def wait_for_records(self, count: int, since: int, timeout: float = 20.0) -> list[Any]:
        """Wait until ``count`` records follow the :meth:`mark` ``since``; they are returned."""
        wait_until(lambda: len(self.records(since)) >= count, timeout, 0.02, f"{count} records")
        return self.records(since)

    def wait_until_quiet(self, timeout: float = 30.0) -> None:
        """Wait until no task is left on the broker or the worker (see
        :func:`celery_support.wait_until_quiet`): what the worker would do with a message it
        was sent, it has done by then (a second log line, a redelivery)."""
        broker = self.settings["FUZZ_BROKER_URL"]
        wait_until_quiet(self.app, broker, [self.queue], 1, timeout)

    def close(self) -> None:
        for process in [*self.extra, *([self.worker] if self.worker else [])]:
            process.kill()  # the session is over: nothing to drain (see ServiceProcess.kill)
        if self.bundle is not None:
            self.bundle.close()
