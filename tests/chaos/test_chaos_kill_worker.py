"""``kill -9`` of a whole worker (main process and pool) while it runs nodes.

Nothing on the worker's side survives to requeue its messages: Redis keeps them unacknowledged
until the visibility timeout (an hour).  The reaper (here in the test process) finds the runs
whose pending step has no live task after ``stalled_after`` and sends it again; the surviving
worker runs it.  Every run completes, each node's update applied once.
"""

from __future__ import annotations

import os
import signal
import uuid
from collections.abc import Iterator

import pytest
from chaos_support import (
    ChaosStack,
    ReaperThread,
    StackFactory,
    assert_exact,
    describe,
    parent_of,
    started,
)

from celery_support import wait_until
from langgraph_celery import RunnableConfig

pytestmark = pytest.mark.timeout(120)

ROUNDS = 3
RUNS_PER_ROUND = 6
SLEEP = 0.3
EXPECTED = {"chain": ["a", "b", "c"], "fan": ["a", "b", "c", "d"]}


@pytest.fixture(scope="module")
def stack(make_stack: StackFactory) -> ChaosStack:
    return make_stack()  # the survivor: one worker, two pool processes


@pytest.fixture
def reaper(stack: ChaosStack) -> Iterator[ReaperThread]:
    thread = ReaperThread(stack.executor).start()
    try:
        yield thread
    finally:
        thread.stop()


def test_kill_whole_worker_mid_node(stack: ChaosStack, reaper: ReaperThread) -> None:
    survivor = stack.workers[0]
    runs = []
    for round_ in range(ROUNDS):
        victim = stack.start_worker(f"victim{round_}")
        handles = []
        for index in range(RUNS_PER_ROUND):
            graph_id = ("chain", "fan")[index % 2]
            thread = f"wkill-{round_}-{index}-{uuid.uuid4().hex[:8]}"
            sleeps = {node: SLEEP for node in EXPECTED[graph_id]}
            handle = stack.graph(graph_id).start(
                {"sleep": sleeps}, RunnableConfig(thread_id=thread)
            )
            handles.append((graph_id, thread, handle))

        def victim_busy(
            h: list[tuple[str, str, object]] = handles, main: int = victim.process.pid
        ) -> bool:
            pids = {pid for _, t, _ in h for _, pid in started(stack.side, t)}
            return any(parent_of(pid) == main for pid in pids)

        wait_until(victim_busy, 20, 0.005, "a node to start on the victim worker")
        os.killpg(victim.process.pid, signal.SIGKILL)  # the worker and its pool, at once
        victim.process.wait(10)
        for graph_id, thread, handle in handles:
            try:
                result = handle.wait(timeout=45)
            except TimeoutError:
                pytest.fail(f"run {thread} lost with its worker\n{describe(stack, thread)}")
            assert result.as_state_data()["log"] == EXPECTED[graph_id]
            assert_exact(stack.saver, thread, EXPECTED[graph_id])
        runs.extend(handles)
        assert survivor.alive(), survivor.log()[-4000:]
    redispatched = reaper.threads("redispatched")
    assert redispatched, "the killed workers held no message: nothing for the reaper to do"
    print(f"worker kill -9: {ROUNDS} workers killed, {len(redispatched)}/{len(runs)} re-dispatched")
