"""The typed, JSON-only messages between clients and workers.

A :class:`TaskEnvelope` goes in (which graph, node, thread, run, step and checkpoint); a
:class:`RunOutcome` comes out when an invocation ends.  An interruption or a failure is returned
as data, never raised across the wire.

Both are strict pydantic models: a message whose fields are missing, unknown, or of another JSON
type (``"0"`` for ``0``, ``1`` for ``true``) is a :class:`MalformedMessage` naming each field at
fault, and is never coerced into an envelope.
"""

from __future__ import annotations

import reprlib
from collections.abc import Mapping
from typing import Annotated, Any, Literal, TypeVar

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    StringConstraints,
    ValidationError,
)

from langgraph_celery.graph.config import MAX_ID_LENGTH

__all__ = ["MAX_ID_LENGTH", "MalformedMessage", "RunOutcome", "TaskEnvelope"]


class MalformedMessage(ValueError):
    """A message that does not have the shape of an envelope."""


_STRICT = ConfigDict(extra="forbid", strict=True, frozen=True)

#: A graph, thread, run, checkpoint, invocation, node or task id.
Id = Annotated[str, StringConstraints(min_length=1, max_length=MAX_ID_LENGTH)]


class TaskEnvelope(BaseModel):
    """One node execution (or a resume) as sent to a worker: it names the step and nothing
    else.  The run's limits and metadata are what its client recorded in the store."""

    model_config = _STRICT

    graph_id: Id
    thread_id: Id
    run_id: Id
    step: int
    checkpoint_id: Id
    node: Id | None = None
    task_id: Id | None = None

    def to_message(self) -> dict[str, Any]:
        # (a copy of the fields, which pydantic keeps in the instance's __dict__: model_dump
        # goes through the serializer, and this runs for every task sent)
        return dict(vars(self))

    @classmethod
    def from_message(cls, data: Any) -> TaskEnvelope:
        """The envelope a task message's keyword arguments carry, or :class:`MalformedMessage`."""
        return _validate(cls, data, "envelope")


class RunOutcome(BaseModel):
    """How an invocation ended: ``completed``, ``interrupted``, ``failed`` or ``cancelled``."""

    model_config = _STRICT

    status: Literal["completed", "interrupted", "failed", "cancelled"]
    run_id: Id
    thread_id: Id
    checkpoint_id: Id
    node: Id | None = None
    reason: str | None = None
    error_type: str | None = None
    message: str | None = None
    metadata: dict[str, Any] = Field(default_factory=dict)

    def to_message(self) -> dict[str, Any]:
        return self.model_dump()

    @classmethod
    def from_message(cls, data: Any) -> RunOutcome:
        """The outcome a message carries, or :class:`MalformedMessage`."""
        return _validate(cls, data, "outcome")


_M = TypeVar("_M", bound=BaseModel)

_short = reprlib.Repr()
_short.maxstring = _short.maxother = 60


def _shown(value: Any) -> str:
    """A value in an error message (and so in a log line): at most 80 characters."""
    text = _short.repr(value)
    return text if len(text) <= 80 else text[:77] + "..."


#: What a field must be, by pydantic's error type (others: pydantic's own words).
_MUST_BE = {
    "string_type": "must be a non-empty string",
    "string_too_short": "must be a non-empty string",
    "int_type": "must be an integer",
    "bool_type": "must be a boolean",
    "dict_type": "must be a JSON object",
    "greater_than": "must be a positive integer",
    "literal_error": "must be one of {expected}",
}


def _validate(cls: type[_M], data: Any, what: str) -> _M:
    if not isinstance(data, Mapping):
        raise MalformedMessage(f"{what} must be a JSON object, got {type(data).__name__}")
    try:
        return cls.model_validate(data if isinstance(data, dict) else dict(data))
    except ValidationError as error:
        raise MalformedMessage(_describe(error, what)) from None


def _describe(error: ValidationError, what: str) -> str:
    """One line naming every field at fault, in the model's order; the unknown fields of an
    object are named together, where the first of them is."""
    problems: list[str] = []
    unknown: dict[tuple[Any, ...], tuple[int, list[str]]] = {}  # object -> (place, names)
    for item in error.errors(include_url=False):
        loc = tuple(item["loc"])
        kind = item["type"]
        if kind == "extra_forbidden":
            if loc[:-1] not in unknown:
                unknown[loc[:-1]] = (len(problems), [])
                problems.append("")
            unknown[loc[:-1]][1].append(str(loc[-1]))
            continue
        field = ".".join(str(part) for part in loc)
        value = item.get("input")
        if kind == "missing":
            problems.append(f"field {field!r} is missing")
        elif kind == "string_too_long":
            problems.append(
                f"field {field!r} is {len(value)} characters long; ids have at most {MAX_ID_LENGTH}"
            )
        else:
            must = _MUST_BE.get(kind, item["msg"]).format(**item.get("ctx", {}))
            problems.append(f"field {field!r} {must}, got {_shown(value)}")
    for parent, (place, names) in unknown.items():
        where = f"field {'.'.join(str(p) for p in parent)!r}" if parent else what
        problems[place] = f"{where} has unknown fields {_shown(sorted(names))}"
    return "; ".join(problems)
