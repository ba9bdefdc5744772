"""What ``langgraph-celery`` reads from its arguments besides names: the JSON objects of
``--input`` and ``--update``, and one-line texts such as ``draw --title``.  A bad one is a
:class:`UsageError` (exit code 2) that says what is wrong and what to do."""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

from langgraph_celery.graph.draw import CONTROL_CHARACTERS

__all__ = ["MAX_JSON_DEPTH", "UsageError", "json_object", "one_line", "thread_id"]

#: How deeply ``--input`` and ``--update`` may nest arrays and objects (the object itself is 1):
#: far more than a state needs, and well below where parsing or serializing it runs out of stack.
MAX_JSON_DEPTH = 100


class UsageError(Exception):
    """A bad argument: printed as one line, exit code 2."""


def _shown(text: str, limit: int = 80) -> str:
    return repr(text if len(text) <= limit else text[: limit - 3] + "...")


def _depth(value: Any) -> int:
    """How deeply ``value`` nests lists and dicts (a scalar is 0), without recursion."""
    deepest, todo = 0, [(value, 1)]
    while todo:
        item, level = todo.pop()
        if isinstance(item, dict):
            item = list(item.values())
        if isinstance(item, list):
            deepest = max(deepest, level)
            todo.extend((child, level + 1) for child in item)
    return deepest


def json_object(flag: str, text: str | None) -> dict[str, Any] | None:
    """The JSON object ``text`` given as ``flag``; ``None`` when the flag was not given."""
    if text is None:
        return None
    too_deep = (
        f"{flag} nests arrays and objects more than {MAX_JSON_DEPTH} levels deep; "
        "flatten it (or set the state in a node)"
    )
    try:
        value = json.loads(text, parse_constant=_not_json)
    except _NotJson as constant:
        raise UsageError(
            f"{flag} holds {constant}, which JSON does not have: write it as a string or null"
        ) from None
    except RecursionError:
        raise UsageError(too_deep) from None
    except json.JSONDecodeError as error:
        raise UsageError(f"{flag} is not valid JSON ({error}): {_shown(text)}") from None
    except ValueError:  # Python refuses to read an integer this long
        raise UsageError(
            f"{flag} holds an integer of more than {sys.get_int_max_str_digits()} digits; "
            "write it as a string"
        ) from None
    if not isinstance(value, dict):
        raise UsageError(
            f"{flag} must be a JSON object, got {type(value).__name__}: {_shown(text)}"
        )
    if _depth(value) > MAX_JSON_DEPTH:
        raise UsageError(too_deep)
    return value


class _NotJson(ValueError):
    pass


def _not_json(constant: str) -> Any:
    raise _NotJson(constant)  # NaN, Infinity, -Infinity: Python's json reads them, JSON has none


def thread_id(text: str) -> str:
    """``--thread``'s value (an argparse type): a thread id is not empty."""
    if not text:
        raise argparse.ArgumentTypeError(
            "a thread id cannot be empty: name the thread, or leave --thread out for a new one"
        )
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
