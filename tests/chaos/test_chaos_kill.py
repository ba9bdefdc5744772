"""``kill -9`` of the prefork pool process that runs a node, mid-node.

Celery's ``acks_late`` + ``reject_on_worker_lost`` (the executor's safe settings) put the message
back on the queue when the pool process dies; the worker forks a new child, the node runs again,
and its update lands once.  No reaper runs here: the broker's redelivery alone must finish every
run.
"""

from __future__ import annotations

import os
import signal
import time
import uuid

import pytest
from chaos_support import (
    ChaosStack,
    StackFactory,
    assert_exact,
    describe,
    parent_of,
    started,
)

from langgraph_celery import RunnableConfig

pytestmark = pytest.mark.timeout(120)

TRIALS = 20
PER_ROUND = 5
#: How long the node to kill sleeps (the kill lands while it sleeps).
SLEEP = 0.3

#: (graph, node killed, final log): every node of both graphs, one and several tasks per step.
CASES = [
    ("chain", "a", ["a", "b", "c"]),
    ("fan", "b", ["a", "b", "c", "d"]),
    ("chain", "b", ["a", "b", "c"]),
    ("fan", "a", ["a", "b", "c", "d"]),
    ("chain", "c", ["a", "b", "c"]),
    ("fan", "c", ["a", "b", "c", "d"]),
    ("fan", "d", ["a", "b", "c", "d"]),
]


@pytest.fixture(scope="module")
def stack(make_stack: StackFactory) -> ChaosStack:
    # One pool process per concurrent trial, and one to spare.
    return make_stack(concurrency=PER_ROUND + 1)


def test_kill_pool_process_mid_node(stack: ChaosStack) -> None:
    """20 trials (4 rounds of 5 runs at once): each run's pool process is killed mid-node."""
    worker = stack.workers[0]
    killed: set[int] = set()
    mid_node = 0  # kills that landed while the node slept (not after it finished)
    for round_ in range(TRIALS // PER_ROUND):
        trials = []
        for index in range(PER_ROUND):
            graph_id, target, expected = CASES[(round_ * PER_ROUND + index) % len(CASES)]
            thread = f"kill-{round_}-{index}-{uuid.uuid4().hex[:8]}"
            handle = stack.graph(graph_id).start(
                {"sleep": {target: SLEEP}}, RunnableConfig(thread_id=thread)
            )
            trials.append((thread, target, expected, handle))
        # kill each target's pool process as soon as its node starts (it then sleeps SLEEP s)
        waiting = {thread: target for thread, target, _, _ in trials}
        hit: dict[str, bool] = {}
        deadline = time.monotonic() + 30
        while waiting:
            assert time.monotonic() < deadline, f"nodes never started: {waiting}\n{stack.logs()}"
            for thread, target in list(waiting.items()):
                pid = next((p for n, p in started(stack.side, thread) if n == target), None)
                if pid is None:
                    continue
                # only ever a pool process of our worker
                assert parent_of(pid) == worker.process.pid, f"pid {pid} is not a pool process"
                os.kill(pid, signal.SIGKILL)
                killed.add(pid)
                del waiting[thread]
                hit[thread] = not stack.side.get(f"finished:{thread}:{target}")
            time.sleep(0.005)
        for thread, target, expected, handle in trials:
            try:
                result = handle.wait(timeout=30)
            except TimeoutError:
                pytest.fail(f"run {thread} lost after kill -9\n{describe(stack, thread)}")
            assert result.is_state_data(), result
            assert result.as_state_data()["log"] == expected
            assert_exact(stack.saver, thread, expected)
            if hit[thread]:
                mid_node += 1
                runs = [node for node, _ in started(stack.side, thread)]
                assert runs.count(target) >= 2, f"{target} not run again after the kill: {runs}"
                # the killed execution never finished; the redelivered one did, once
                assert int(stack.side.get(f"finished:{thread}:{target}") or 0) == 1
        assert worker.alive(), worker.log()[-4000:]
    assert len(killed) == TRIALS
    assert worker.log().count("exited with 'signal 9 (SIGKILL)'") == TRIALS
    # a kill lands after the node finished only if this process stalled for SLEEP s
    assert mid_node >= TRIALS - 2, f"only {mid_node} of {TRIALS} kills landed mid-node"
    print(f"kill -9: {TRIALS} pool processes killed, {mid_node} mid-node")
