"""The task envelope: what a node or resume message carries, and its JSON round trip."""

from __future__ import annotations

import dataclasses
import json

from langgraph_celery.worker.envelope import TaskEnvelope


def test_a_message_carries_every_field_and_reads_back_equal() -> None:
    envelope = TaskEnvelope(
        graph_id="g",
        thread_id="t",
        run_id="r",
        step=3,
        checkpoint_id="c",
        invocation="i",
        steps_taken=2,
        node="n",
        task_id="k",
        config={"metadata": {"user": {"id": 7}}, "clone_state": False, "recursion_limit": 9},
    )
    message = envelope.to_message()
    assert set(message) == {field.name for field in dataclasses.fields(TaskEnvelope)}
    assert TaskEnvelope.from_message(json.loads(json.dumps(message))) == envelope
    message["config"]["clone_state"] = True  # the message is the caller's: the envelope keeps its
    assert envelope.config["clone_state"] is False
