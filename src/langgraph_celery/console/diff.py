"""What changed between two states, and values made printable.

State may hold anything the saver's serializer allows (datetimes, sets, registered dataclasses
and pydantic models): :func:`jsonable` turns it into plain JSON types for pages and the API
(anything else becomes its ``repr``, which pages escape like every other text).
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Literal

from pydantic_core import to_jsonable_python

__all__ = ["Change", "ChangeKind", "compact", "diff_states", "jsonable", "pretty", "pretty_shown"]

ChangeKind = Literal["added", "removed", "changed", "appended"]


#: How deeply a value that nests past what pydantic converts (about 250 levels, which the store
#: accepts) is shown: below that, arrays and objects show as :data:`DEEPER`.
SHOWN_DEPTH = 64
DEEPER = "\u2026 (nested deeper than shown)"


def jsonable(value: Any) -> Any:
    """``value`` as JSON types (dicts, lists, strings, numbers, booleans, ``None``)."""
    try:
        return to_jsonable_python(value, fallback=repr)
    except (ValueError, RecursionError):  # pydantic's "circular reference (depth exceeded)"
        return _capped(value, SHOWN_DEPTH)


def _capped(value: Any, levels: int) -> Any:
    """``value`` as JSON types, its arrays and objects ``levels`` deep at most."""
    if isinstance(value, Mapping | list | tuple | set | frozenset):
        if levels == 0:
            return DEEPER
        if isinstance(value, Mapping):
            return {str(k): _capped(v, levels - 1) for k, v in value.items()}
        return [_capped(v, levels - 1) for v in value]
    try:
        return to_jsonable_python(value, fallback=repr)
    except (ValueError, RecursionError):  # a model or dataclass nesting too deeply
        return DEEPER


#: Characters that change how the text around them is laid out without showing themselves:
#: bidirectional embeddings, overrides and isolates, and direction marks.  In state shown to a
#: reviewer a right-to-left override would show the JSON after it reversed ("Trojan Source"),
#: so the JSON text shows them as ``\\uXXXX`` escapes (still the same JSON).
_LAYOUT_CONTROLS = re.compile("[\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069]")


def _shown(text: str) -> str:
    return _LAYOUT_CONTROLS.sub(lambda m: f"\\u{ord(m.group()):04x}", text)


def compact(value: Any) -> str:
    """``value`` as one line of JSON text (layout controls escaped)."""
    return _shown(json.dumps(jsonable(value), ensure_ascii=False))


#: The most characters of one value's JSON a page shows (the API gives all of it): a state of
#: 10,000 messages would otherwise put megabytes in every inbox card and history row.
SHOWN_CHARS = 50_000


#: How pages indent JSON (:func:`pretty`, :func:`pretty_shown`).
_PRETTY = json.JSONEncoder(indent=2, ensure_ascii=False)


def pretty_shown(value: Any, limit: int = SHOWN_CHARS) -> str:
    """:func:`pretty`, cut after ``limit`` characters with a line that says so.  The text is
    made only as far as it is shown: an inbox of many runs with large states would otherwise
    format all of each (the encoder yields its text piece by piece)."""
    parts: list[str] = []
    size = 0
    for part in _PRETTY.iterencode(jsonable(value)):
        parts.append(part)
        size += len(part)
        if size > limit:
            text = _shown("".join(parts)[:limit])
            return f"{text}\n\u2026 cut after {limit:,} characters (the API gives them all)"
    return _shown("".join(parts))


def pretty(value: Any) -> str:
    """``value`` as indented JSON text (layout controls escaped)."""
    return _shown(_PRETTY.encode(jsonable(value)))


@dataclass(frozen=True)
class Change:
    """One key's change: ``before``/``after`` as JSON types; for ``appended`` (a list that only
    grew at its end) ``after`` holds the items added."""

    key: str
    kind: ChangeKind
    before: Any = None
    after: Any = None


def diff_states(before: Mapping[str, Any], after: Mapping[str, Any]) -> list[Change]:
    """The keys that differ from ``before`` to ``after``, in ``after``'s order (removed keys
    last); an ``appended`` change holds only the new items.

    A value that is the very object it was (a saver's shared, unchanged values), or a list
    that only grew (its old items the same objects), is not converted to JSON whole: a step
    over a large state costs what it changed here too."""
    old = {str(k): v for k, v in before.items()}
    changes: list[Change] = []
    for raw_key, value in after.items():
        key = str(raw_key)
        if key not in old:
            changes.append(Change(key, "added", None, jsonable(value)))
            continue
        previous = old[key]
        if previous is value:
            continue
        if _grown(previous, value, by_identity=True):
            changes.append(Change(key, "appended", None, jsonable(value[len(previous) :])))
            continue
        shown_before, shown_after = jsonable(previous), jsonable(value)
        if shown_before == shown_after:
            continue
        if _grown(shown_before, shown_after, by_identity=False):
            changes.append(Change(key, "appended", None, shown_after[len(shown_before) :]))
        else:
            changes.append(Change(key, "changed", shown_before, shown_after))
    kept = {str(k) for k in after}
    changes.extend(
        Change(key, "removed", jsonable(value), None)
        for key, value in old.items()
        if key not in kept
    )
    return changes


def _grown(previous: Any, value: Any, by_identity: bool) -> bool:
    """Whether list ``value`` is list ``previous`` with items added: its old items the same
    objects (``by_identity``), or equal."""
    if not (isinstance(previous, list) and isinstance(value, list) and len(value) > len(previous)):
        return False
    if by_identity:
        return all(a is b for a, b in zip(previous, value, strict=False))
    return bool(value[: len(previous)] == previous)
