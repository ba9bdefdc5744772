"""Run-index benchmark: listing runs stays fast as the index grows (issue 14: 100,000 runs).

``SqlSaver.list_runs`` on PostgreSQL (database ``lgc_bench``, created if missing, tables under a
unique prefix dropped at the end) is timed with 10,000 runs in the index, then again after the
index has grown to 100,000 (``--runs``), side by side in one run: the first page of each filter
(all runs; one graph; one graph and one status; one status) and the tenth page reached with
``before=``.  Runs are spread over 20 graphs and the five statuses (completed most often, as in
use) with increasing creation times; they are written with ``upsert_run``, the call the
executors make, in batches on a few threads.  Reported: the median of 200 calls of each query at
both sizes, and the ratio large / small (an indexed query stays near 1; a scan grows with the
table, about 100 times).

Run from the repository root: ``python -m bench.run_index`` (``--runs N``, ``--json PATH``).
"""

from __future__ import annotations

import argparse
import json
import random
import statistics
import time
import uuid
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from bench._worker import bench_database, drop_tables
from langgraph_celery.checkpoint import RunRecord, RunStatus, SqlSaver

ADMIN_URL = "postgresql+psycopg://postgres@127.0.0.1:5432/postgres"
GRAPHS = 20
SMALL = 10_000
CALLS = 200
#: how often each status is written: most runs end completed
STATUS_WEIGHTS = (
    (RunStatus.COMPLETED, 70),
    (RunStatus.FAILED, 8),
    (RunStatus.CANCELLED, 7),
    (RunStatus.PARKED, 10),
    (RunStatus.RUNNING, 5),
)
_STATUSES = [status for status, weight in STATUS_WEIGHTS for _ in range(weight)]
_EPOCH = datetime(2026, 1, 1, tzinfo=UTC)


def record(number: int) -> RunRecord:
    created = _EPOCH + timedelta(seconds=number)
    return RunRecord(
        run_id=f"run-{number:07d}",
        thread_id=f"thread-{number:07d}",
        graph_id=f"graph-{number % GRAPHS}",
        status=random.Random(number).choice(_STATUSES),
        node="n",
        created_at=created,
        updated_at=created,
    )


def fill(saver: SqlSaver, start: int, stop: int) -> None:
    numbers = list(range(start, stop))
    with ThreadPoolExecutor(4) as pool:
        list(pool.map(lambda n: saver.upsert_run(record(n)), numbers, chunksize=500))


def queries(saver: SqlSaver) -> dict[str, Callable[[], Sequence[RunRecord]]]:
    def tenth_page() -> Sequence[RunRecord]:
        page: Sequence[RunRecord] = saver.list_runs("graph-3", limit=50)
        for _ in range(9):
            page = saver.list_runs("graph-3", limit=50, before=page[-1])
        return page

    return {
        "all runs, first page": lambda: saver.list_runs(limit=50),
        "one graph, first page": lambda: saver.list_runs("graph-3", limit=50),
        "one graph and status": lambda: saver.list_runs("graph-3", RunStatus.PARKED, limit=50),
        "one status (running)": lambda: saver.list_runs(status=RunStatus.RUNNING, limit=50),
        "one graph, 10th page (10 calls)": tenth_page,
    }


def timed(call: Callable[[], Any], calls: int) -> float:
    call()  # (warm)
    samples = []
    for _ in range(calls):
        began = time.perf_counter()
        found = call()
        samples.append(time.perf_counter() - began)
        assert found, "a query found no run"
    return statistics.median(samples) * 1000


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--runs", type=int, default=100_000, help="runs in the large index")
    parser.add_argument("--json", type=Path, help="save the figures to this JSON file")
    args = parser.parse_args(argv)
    url, version = bench_database(ADMIN_URL, "lgc_bench")
    prefix = f"lgcr_{uuid.uuid4().hex[:8]}_"
    saver = SqlSaver(url, table_prefix=prefix)
    try:
        saver.setup()
        fill(saver, 0, SMALL)
        small = {name: timed(call, CALLS) for name, call in queries(saver).items()}
        began = time.perf_counter()
        fill(saver, SMALL, args.runs)
        filled = time.perf_counter() - began
        large = {name: timed(call, CALLS) for name, call in queries(saver).items()}
    finally:
        saver.dispose()
        drop_tables(url, prefix)
    print(f"run index on PostgreSQL {version}: {SMALL:,} runs, then {args.runs:,}")
    print(f"(filling {args.runs - SMALL:,} runs with upsert_run took {filled:.1f} s)")
    print(
        f"{'query (median of ' + str(CALLS) + ' calls)':40} {'small ms':>9} {'large ms':>9} ratio"
    )
    for name in small:
        ratio = large[name] / small[name]
        print(f"{name:40} {small[name]:9.3f} {large[name]:9.3f} {ratio:5.2f}")
    if args.json:
        args.json.write_text(
            json.dumps({"runs": args.runs, "small": small, "large": large}, indent=2)
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
