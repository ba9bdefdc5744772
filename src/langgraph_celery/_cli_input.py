"""What ``langgraph-celery`` reads from its arguments besides names: the JSON objects of
``--input`` and ``--update``, and one-line texts such as ``draw --title``.  A bad one is a
:class:`UsageError` (exit code 2) that says what is wrong and what to do."""

from __future__ import annotations

import argparse
from typing import Any

from langgraph_celery._json_text import MAX_JSON_DEPTH, JsonTextError, read_json
from langgraph_celery.graph.config import check_id
from langgraph_celery.graph.draw import CONTROL_CHARACTERS

__all__ = ["MAX_JSON_DEPTH", "UsageError", "json_object", "one_line", "thread_id"]


class UsageError(Exception):
    """A bad argument: printed as one line, exit code 2."""


def _shown(text: str, limit: int = 80) -> str:
    return repr(text if len(text) <= limit else text[: limit - 3] + "...")


def json_object(flag: str, text: str | None) -> dict[str, Any] | None:
    """The JSON object ``text`` given as ``flag``; ``None`` when the flag was not given."""
    if text is None:
        return None
    try:
        value = read_json(text)
    except JsonTextError as error:
        shown = f": {_shown(text)}" if error.kind == "syntax" else ""
        raise UsageError(f"{flag} {error.problem}{shown}") from None
    if not isinstance(value, dict):
        raise UsageError(
            f"{flag} must be a JSON object, got {type(value).__name__}: {_shown(text)}"
        )
    return value


def thread_id(text: str) -> str:
    """``--thread``'s value (an argparse type): a thread id is not empty, nor longer than the
    store keeps (refused here, exit code 2, as the library refuses it before storing)."""
    if not text:
        raise argparse.ArgumentTypeError(
            "a thread id cannot be empty: name the thread, or leave --thread out for a new one"
        )
    too_long = check_id("the thread id", text)
    if too_long:
        raise argparse.ArgumentTypeError(f"{too_long}; give a shorter one")
    return text


def one_line(flag: str, text: str | None) -> str | None:
    """``text`` when it has no control character: in a diagram's title, a line break would end
    the title's line and start one of diagram syntax (``get_graph`` draws control characters as
    spaces; here the user is told instead)."""
    if text is not None and CONTROL_CHARACTERS.search(text):
        raise UsageError(
            f"{flag} must be one line without control characters (line breaks, tabs...), "
            f"got {_shown(text)}"
        )
    return text
