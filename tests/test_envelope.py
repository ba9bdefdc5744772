"""The task envelope: what a node or resume message carries, its JSON round trip, and the
messages it refuses (each naming the field at fault, as the worker's log shows it)."""

from __future__ import annotations

import json
from typing import Any

import pytest
from pydantic import ValidationError

from langgraph_celery.worker.envelope import (
    MAX_ID_LENGTH,
    MalformedMessage,
    RunOutcome,
    TaskEnvelope,
)

GOOD: dict[str, Any] = {
    "graph_id": "g",
    "thread_id": "t",
    "run_id": "r",
    "step": 3,
    "checkpoint_id": "c",
    "node": "n",
    "task_id": "k",
}


def test_a_message_carries_every_field_and_reads_back_equal() -> None:
    envelope = TaskEnvelope(**GOOD)
    message = envelope.to_message()
    assert set(message) == set(TaskEnvelope.model_fields)
    assert message == GOOD
    assert TaskEnvelope.from_message(json.loads(json.dumps(message))) == envelope
    message["node"] = "other"  # the message is the caller's: the envelope keeps its own
    assert envelope.node == "n"


def test_a_resume_message_has_no_node_and_the_optional_fields_default() -> None:
    required = {k: GOOD[k] for k in ("graph_id", "thread_id", "run_id", "step")}
    envelope = TaskEnvelope.from_message({**required, "checkpoint_id": "c"})
    assert (envelope.node, envelope.task_id) == (None, None)
    assert TaskEnvelope.from_message({**GOOD, "node": None, "task_id": None}).node is None


def test_an_envelope_is_frozen() -> None:
    envelope = TaskEnvelope(**GOOD)
    with pytest.raises(ValidationError, match="frozen"):
        envelope.step = 4  # type: ignore[misc]


@pytest.mark.parametrize(
    ("change", "expected"),
    [
        ({"step": "0"}, "field 'step' must be an integer, got '0'"),
        ({"step": True}, "field 'step' must be an integer, got True"),
        ({"step": 1.0}, "field 'step' must be an integer, got 1.0"),
        ({"thread_id": 42}, "field 'thread_id' must be a non-empty string, got 42"),
        ({"run_id": ""}, "field 'run_id' must be a non-empty string, got ''"),
        ({"node": ["a"]}, "field 'node' must be a non-empty string, got ['a']"),
        ({"evil": 1}, "envelope has unknown fields ['evil']"),
        # a run's limits and metadata come from the store: a message carrying them is forged
        # (or from a release that sent them), and refused
        ({"config": {"recursion_limit": 1}}, "envelope has unknown fields ['config']"),
        ({"steps_taken": 10_000}, "envelope has unknown fields ['steps_taken']"),
    ],
)
def test_a_malformed_message_names_the_field_at_fault(
    change: dict[str, Any], expected: str
) -> None:
    with pytest.raises(MalformedMessage) as raised:
        TaskEnvelope.from_message({**GOOD, **change})
    assert str(raised.value) == expected


def test_every_field_at_fault_is_named_and_values_are_shown_short() -> None:
    message = {"graph_id": "g", "node": "a", "x": "y" * 10_000, "step": "1"}
    with pytest.raises(MalformedMessage) as raised:
        TaskEnvelope.from_message(message)
    text = str(raised.value)
    assert text.startswith("field 'thread_id' is missing; field 'run_id' is missing;")
    assert "field 'step' must be an integer, got '1'" in text
    assert text.endswith("envelope has unknown fields ['x']")
    with pytest.raises(MalformedMessage) as raised:
        TaskEnvelope.from_message({**GOOD, "thread_id": ["é" * 1_000] * 500})
    assert len(str(raised.value)) < 200


def test_not_a_mapping_is_malformed() -> None:
    for message in ([GOOD], "x", None, 7):
        with pytest.raises(MalformedMessage, match="envelope must be a JSON object, got"):
            TaskEnvelope.from_message(message)


def test_ids_have_at_most_255_characters() -> None:
    longest = "x" * MAX_ID_LENGTH
    assert TaskEnvelope.from_message({**GOOD, "thread_id": longest}).thread_id == longest
    with pytest.raises(MalformedMessage) as raised:
        TaskEnvelope.from_message({**GOOD, "task_id": longest + "x"})
    assert str(raised.value) == "field 'task_id' is 256 characters long; ids have at most 255"


def test_a_run_outcome_reads_back_and_refuses_an_unknown_status() -> None:
    outcome = RunOutcome(status="interrupted", run_id="r", thread_id="t", checkpoint_id="c")
    assert RunOutcome.from_message(json.loads(json.dumps(outcome.to_message()))) == outcome
    with pytest.raises(MalformedMessage, match="field 'status' must be one of"):
        RunOutcome.from_message({**outcome.to_message(), "status": "done"})
