"""The typed, JSON-only messages between clients and workers.

A :class:`TaskEnvelope` goes in (which graph, node, thread, run, step and checkpoint); an
:class:`Outcome` comes out when an invocation ends.  An interruption or a failure is returned as
data, never raised across the wire.
"""

from __future__ import annotations

import reprlib
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field
from typing import Any

from langgraph_celery.graph.config import RESERVED_METADATA_KEYS

__all__ = ["MalformedMessage", "RunOutcome", "TaskEnvelope"]


class MalformedMessage(ValueError):
    """A message that does not have the shape of an envelope."""


#: The longest id a checkpoint store keeps (its id columns); a longer one names nothing.
MAX_ID_LENGTH = 255
_CONFIG_FIELDS = frozenset({"metadata", "clone_state", "recursion_limit"})
_short = reprlib.Repr()  # field values in error messages (and so in logs): bounded
_short.maxstring = _short.maxother = 60


def _text(data: Mapping[str, Any], key: str, *, optional: bool = False) -> Any:
    value = data.get(key)
    if value is None and optional:
        return None
    if not isinstance(value, str) or not value:
        raise MalformedMessage(
            f"field {key!r} must be a non-empty string, got {_short.repr(value)}"
        )
    if len(value) > MAX_ID_LENGTH:
        raise MalformedMessage(
            f"field {key!r} is {len(value)} characters long; ids have at most {MAX_ID_LENGTH}"
        )
    return value


def _int(data: Mapping[str, Any], key: str) -> int:
    value = data.get(key)
    if isinstance(value, bool) or not isinstance(value, int):
        raise MalformedMessage(f"field {key!r} must be an integer, got {_short.repr(value)}")
    return value


def _config(data: Mapping[str, Any]) -> dict[str, Any]:
    """The ``config`` field: what a ``RunnableConfig`` is rebuilt from on the worker."""
    config = data.get("config") or {}
    if not isinstance(config, Mapping):
        raise MalformedMessage("field 'config' must be a JSON object")
    unknown = set(config) - _CONFIG_FIELDS
    if unknown:
        raise MalformedMessage(f"field 'config' has unknown fields {_short.repr(sorted(unknown))}")
    metadata = config.get("metadata") or {}
    if not isinstance(metadata, Mapping):
        raise MalformedMessage("field 'config.metadata' must be a JSON object")
    reserved = RESERVED_METADATA_KEYS & set(metadata)
    if reserved:
        raise MalformedMessage(f"field 'config.metadata' has reserved keys {sorted(reserved)}")
    limit = config.get("recursion_limit")
    if limit is not None and (isinstance(limit, bool) or not isinstance(limit, int) or limit <= 0):
        raise MalformedMessage(
            f"field 'config.recursion_limit' must be a positive integer, got {_short.repr(limit)}"
        )
    if not isinstance(config.get("clone_state", True), bool):
        raise MalformedMessage("field 'config.clone_state' must be a boolean")
    return dict(config)


@dataclass(frozen=True)
class TaskEnvelope:
    """One node execution (or a resume) as sent to a worker."""

    graph_id: str
    thread_id: str
    run_id: str
    step: int
    checkpoint_id: str
    invocation: str
    steps_taken: int = 0
    node: str | None = None
    task_id: str | None = None
    config: dict[str, Any] = field(default_factory=dict)

    def to_message(self) -> dict[str, Any]:
        # (by hand: ``asdict`` deep-copies, and this runs for every task sent)
        return {
            "graph_id": self.graph_id,
            "thread_id": self.thread_id,
            "run_id": self.run_id,
            "step": self.step,
            "checkpoint_id": self.checkpoint_id,
            "invocation": self.invocation,
            "steps_taken": self.steps_taken,
            "node": self.node,
            "task_id": self.task_id,
            "config": dict(self.config),
        }

    @classmethod
    def from_message(cls, data: Any) -> TaskEnvelope:
        if not isinstance(data, Mapping):
            raise MalformedMessage(f"envelope must be a JSON object, got {type(data).__name__}")
        unknown = set(data) - {f for f in cls.__dataclass_fields__}
        if unknown:
            raise MalformedMessage(f"envelope has unknown fields {_short.repr(sorted(unknown))}")
        config = _config(data)
        return cls(
            graph_id=_text(data, "graph_id"),
            thread_id=_text(data, "thread_id"),
            run_id=_text(data, "run_id"),
            step=_int(data, "step"),
            checkpoint_id=_text(data, "checkpoint_id"),
            invocation=_text(data, "invocation"),
            steps_taken=_int(data, "steps_taken") if "steps_taken" in data else 0,
            node=_text(data, "node", optional=True),
            task_id=_text(data, "task_id", optional=True),
            config=config,
        )


@dataclass(frozen=True)
class RunOutcome:
    """How an invocation ended: ``completed``, ``interrupted``, ``failed`` or ``cancelled``."""

    status: str
    run_id: str
    thread_id: str
    checkpoint_id: str
    node: str | None = None
    reason: str | None = None
    error_type: str | None = None
    message: str | None = None
    metadata: dict[str, Any] = field(default_factory=dict)

    def to_message(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_message(cls, data: Mapping[str, Any]) -> RunOutcome:
        return cls(**{k: v for k, v in data.items() if k in cls.__dataclass_fields__})
