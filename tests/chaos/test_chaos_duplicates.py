"""The same node message delivered twice: every copy may run the node, one update lands.

- at once: the chaos app publishes every node message of a ``dup-`` thread twice (same kwargs,
  same Celery task id), from the client, the workers and the reaper alike, so both copies run
  side by side in two pool processes;
- late: after the runs completed, every node message of their histories is published again
  (``app.send_task`` with the original kwargs and task id); each must end ``duplicate`` (the
  step is committed) or ``merged-elsewhere`` (lost the compare-and-set), never ``merged``.
"""

from __future__ import annotations

import pytest
from chaos_support import (
    EXPECTED,
    ChaosStack,
    assert_exact,
    assert_runs_exact,
    history,
    start_mixed_runs,
    started,
)

from langgraph_celery.worker import names

pytestmark = pytest.mark.timeout(120)

RUNS = 20


def test_duplicated_messages_apply_once(chaos_stack: ChaosStack) -> None:
    stack = chaos_stack
    runs = start_mixed_runs(stack, "dup", RUNS, 0.05)
    assert_runs_exact(stack, runs, "did not complete", timeout=60)
    executions = sum(len(started(stack.side, thread)) for _, thread, _ in runs)
    applications = sum(len(EXPECTED[graph_id]) for graph_id, _, _ in runs)
    # the copies really ran (a node of a one-task step runs again, then loses the
    # compare-and-set); none of them was applied
    assert executions > applications, (executions, applications)

    # late copies of every node message of every step, with the original task ids
    late = []
    for graph_id, thread, _ in runs:
        runtime = stack.executor.runtime(graph_id)
        checkpoints = history(stack.saver, thread)
        for checkpoint in checkpoints:
            for task in checkpoint.tasks:
                envelope = runtime.envelope(checkpoint, task)
                task_id = names.celery_task_id(checkpoint.run_id, checkpoint.checkpoint_id, task.id)
                stack.app.backend.forget(task_id)  # so that .get() waits for the late copy
                late.append(
                    stack.app.send_task(
                        names.node_task_name(graph_id, task.node),
                        kwargs=envelope.to_message(),
                        task_id=task_id,
                    )
                )
    assert len(late) == sum(len(EXPECTED[g]) for g, _, _ in runs)  # one message per node
    outcomes = [result.get(timeout=60) for result in late]
    # skipped (the step is committed) or lost the compare-and-set; never applied
    assert {o["status"] for o in outcomes} <= {"duplicate", "merged-elsewhere"}, outcomes
    for graph_id, thread, _ in runs:
        assert_exact(stack.saver, thread, EXPECTED[graph_id])
