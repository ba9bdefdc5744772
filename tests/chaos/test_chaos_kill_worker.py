"""``kill -9`` of a whole worker (main process and pool) while it runs nodes.

Nothing on the worker's side survives to requeue its messages: Redis keeps them unacknowledged
until the visibility timeout (an hour).  The reaper (here in the test process) finds the runs
whose pending step has no live task after ``stalled_after`` and sends it again; the surviving
worker runs it.  Every run completes, each node's update applied once.
"""

from __future__ import annotations

import os
import signal

import pytest
from chaos_support import (
    ChaosStack,
    ReaperThread,
    StackFactory,
    assert_runs_exact,
    parent_of,
    start_mixed_runs,
    started,
)

from celery_support import wait_until

pytestmark = pytest.mark.timeout(120)

ROUNDS = 3
RUNS_PER_ROUND = 6
SLEEP = 0.3


@pytest.fixture(scope="module")
def stack(make_stack: StackFactory) -> ChaosStack:
    return make_stack()  # the survivor: one worker, two pool processes


def test_kill_whole_worker_mid_node(stack: ChaosStack, reaper: ReaperThread) -> None:
    survivor = stack.workers[0]
    runs = []
    for round_ in range(ROUNDS):
        victim = stack.start_worker(f"victim{round_}")
        handles = start_mixed_runs(stack, f"wkill-{round_}", RUNS_PER_ROUND, SLEEP)

        def victim_busy(
            h: list[tuple[str, str, object]] = handles, main: int = victim.process.pid
        ) -> bool:
            pids = {pid for _, t, _ in h for _, pid in started(stack.side, t)}
            return any(parent_of(pid) == main for pid in pids)

        wait_until(victim_busy, 20, 0.005, "a node to start on the victim worker")
        os.killpg(victim.process.pid, signal.SIGKILL)  # the worker and its pool, at once
        victim.process.wait(10)
        assert_runs_exact(stack, handles, "lost with its worker")
        runs.extend(handles)
        assert survivor.alive(), survivor.log()[-4000:]
    redispatched = reaper.threads("redispatched")
    assert redispatched, "the killed workers held no message: nothing for the reaper to do"
    print(f"worker kill -9: {ROUNDS} workers killed, {len(redispatched)}/{len(runs)} re-dispatched")
