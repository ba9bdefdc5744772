"""The :class:`~langgraph_celery.errors.SerializationError` messages of
:class:`~langgraph_celery.serde.JsonSerializer`: what it refused, where (the key path) and what to
do instead.

* ``encode_error``: a value the allowlist refuses (``to_jsonable``);
* ``text_error``: what the JSON text encoder refuses in ``to_jsonable``'s result (``dumps``): an
  ``int`` past Python's int-to-str limit, or nesting too deep;
* ``decode_error``: data ``from_jsonable`` cannot rebuild; ``REGISTER_HINT`` ends the message
  of a type that is not registered.

Used by :mod:`langgraph_celery.serde` only; the key-path helpers they call are in
:mod:`langgraph_celery._serde_codecs`.
"""

from __future__ import annotations

import sys
from typing import Any

from langgraph_celery._serde_codecs import (
    _ENCODER,
    _Fail,
    _kind,
    _refused_path,
    _render_path,
    _type_name,
)
from langgraph_celery.errors import SerializationError

__all__ = ["REGISTER_HINT", "decode_error", "encode_error", "text_error"]

_PATH_DEPTH = 64  # how deep an error message follows a value the JSON text encoder refuses
REGISTER_HINT = (
    "; register the class with JsonSerializer(types=[...]) / serializer.register(...) before"
    " loading (names in the data are never imported)"
)


def encode_error(fail: _Fail, root_is_dict: bool) -> SerializationError:
    """The error for the value ``fail`` carries, which the allowlist refuses; ``root_is_dict``:
    the value serialized was a mapping (its first key is named as the state key)."""
    t = type(fail.obj)
    path = fail.path[::-1]
    subject = f"state key {path[0]!r}" if root_is_dict and path else "value"
    bases = (bool, int, float, str, bytes, list, dict, tuple, set, frozenset)
    base = next((b for b in bases if isinstance(fail.obj, b)), None)
    if _kind(t) is not None:
        hint = (
            f"register it with JsonSerializer(types=[{t.__qualname__}]) / "
            f"serializer.register({t.__qualname__}), or store JSON types"
        )
    elif base is not None:
        hint = f"convert it to a plain {base.__name__} (subclasses would lose their type)"
    else:
        hint = (
            "convert it to JSON types, or to a registered Enum, dataclass or pydantic "
            "model, before storing it"
        )
    return SerializationError(
        f"cannot serialize {subject} (at {_render_path(path) or '<root>'}): type "
        f"{_type_name(t)} is not in the JSON allowlist; {hint}"
    )


def text_error(data: Any, exc: Exception) -> SerializationError:
    """What the JSON text encoder refused in ``data`` (``to_jsonable``'s result), named
    as the allowlist's refusals are: an ``int`` of more digits than Python converts to
    text (``sys.get_int_max_str_digits()``), or nesting deeper than it can encode."""
    deep = isinstance(exc, RecursionError)
    path, part = _refused_path(data, _ENCODER.encode, 1 if deep else _PATH_DEPTH)
    subject = f"state key {path[0]!r}" if type(data) is dict and path else "value"
    if deep:
        problem = "it is nested too deeply to be written as JSON"
    elif type(part) is int:
        problem = (
            f"an int of more than {sys.get_int_max_str_digits()} digits cannot be written "
            "as JSON text (Python's int-to-str limit, which the reading process applies "
            "too); store it as text, e.g. hex(n)"
        )
    else:
        problem = f"it cannot be written as JSON ({type(exc).__name__}: {exc})"
    return SerializationError(
        f"cannot serialize {subject} (at {_render_path(path) or '<root>'}): {problem}"
    )


def decode_error(fail: _Fail) -> SerializationError:
    """The error for data ``from_jsonable`` cannot rebuild (``fail`` says why and where)."""
    where = _render_path(fail.path[::-1]) or "<root>"
    return SerializationError(f"cannot deserialize (at {where}): {fail.reason}")
