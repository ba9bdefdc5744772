"""The stateless pieces of :mod:`langgraph_celery.serde`'s format, below ``JsonSerializer``.

* the per-type leaf codecs: ``_LEAF_ENCODERS`` (by exact type, to ``{"__lgc__": KIND, "v": ...}``)
  and ``_LEAF_DECODERS`` (by kind), with their helpers (``_need``, ``_pair``...), and
  ``_rebuild_dataclass``, which decodes a registered dataclass's fields;
* the JSON text encoders ``dumps`` uses, and ``loads``' refusal of ``NaN``/``Infinity``;
* ``_kind``, the kind a registrable class is tagged with (``enum``, ``model``, ``dataclass``);
* ``_Fail``, which carries a failure up while its key path is collected, and ``_render_path`` and
  ``_type_name``, which the error messages use; ``_refused_path``, which finds what the JSON text
  encoder refuses (an ``int`` past Python's int-to-str limit) in an encoded structure (the
  messages themselves are in :mod:`langgraph_celery._serde_errors`).

The format itself, the allowlist and the registries of library built-ins are described and kept
in :mod:`langgraph_celery.serde`.
"""

from __future__ import annotations

import base64
import dataclasses
import json
import reprlib
from collections.abc import Callable
from datetime import date, datetime, time, timedelta
from decimal import Decimal
from enum import Enum
from typing import Any
from uuid import UUID
from zoneinfo import ZoneInfo

from pydantic import BaseModel

_TAG = "__lgc__"
_SET_ITEM = object()  # path segment for an element of a set


class _Fail(Exception):
    """Internal: carries the failing object (or reason) while the path is collected."""

    def __init__(self, obj: object = None, reason: str = "") -> None:
        super().__init__(reason)
        self.obj = obj
        self.reason = reason
        self.path: list[object] = []  # innermost segment first


def _kind(cls: object) -> str | None:
    if not isinstance(cls, type):
        return None
    if issubclass(cls, Enum):
        return "enum"
    if issubclass(cls, BaseModel):
        return "model"
    return "dataclass" if dataclasses.is_dataclass(cls) else None


def _type_name(t: type) -> str:
    return t.__qualname__ if t.__module__ == "builtins" else f"{t.__module__}.{t.__qualname__}"


def _render_path(path: list[object]) -> str:
    parts = []
    for seg in path:
        if seg is _SET_ITEM:
            parts.append("{...}")
        elif type(seg) is str and seg.isidentifier():
            parts.append("." + seg)
        else:
            try:
                parts.append(f"[{reprlib.repr(seg)}]")
            except ValueError:  # (an int key past the int-to-str limit)
                parts.append(f"[<{_type_name(type(seg))}>]")
    return "".join(parts).removeprefix(".")


def _enc_moment(x: datetime | time) -> dict[str, Any]:
    tz = x.tzinfo
    zone = tz.key if type(tz) is ZoneInfo else None
    out: dict[str, Any] = {
        _TAG: "datetime" if type(x) is datetime else "time",
        "v": (x.replace(tzinfo=None) if zone else x).isoformat(),
    }
    if zone:
        out["tz"] = zone
    if x.fold:
        out["fold"] = 1
    return out


def _b64(x: bytes | bytearray) -> dict[str, Any]:
    return {_TAG: type(x).__name__, "v": base64.b64encode(x).decode("ascii")}


_LEAF_ENCODERS: dict[type, Callable[[Any], dict[str, Any]]] = {
    bytes: _b64,
    bytearray: _b64,
    datetime: _enc_moment,
    time: _enc_moment,
    date: lambda x: {_TAG: "date", "v": x.isoformat()},
    timedelta: lambda x: {_TAG: "timedelta", "v": [x.days, x.seconds, x.microseconds]},
    UUID: lambda x: {_TAG: "uuid", "v": str(x)},
    Decimal: lambda x: {_TAG: "decimal", "v": str(x)},
    float: lambda x: {_TAG: "float", "v": repr(x)},  # only reached for nan / inf / -inf
}


def _need(v: Any, typ: type) -> Any:
    if type(v) is not typ:
        raise TypeError(f"expected {typ.__name__}, got {type(v).__name__}")
    return v


def _pair(p: Any) -> tuple[Any, Any]:
    if type(p) is not list or len(p) != 2:
        raise ValueError(f"expected a [key, value] pair, got {p!r}")
    return p[0], p[1]


def _dec_moment(x: dict[str, Any], cls: type[datetime] | type[time]) -> Any:
    value: Any = cls.fromisoformat(_need(x.get("v"), str))
    if "tz" in x:
        value = value.replace(tzinfo=ZoneInfo(_need(x["tz"], str)))
    return value.replace(fold=1) if x.get("fold") == 1 else value


def _dec_float(v: Any) -> float:
    if v not in ("nan", "inf", "-inf"):
        raise ValueError(f"not a non-finite float: {v!r}")
    return float(v)


def _dec_timedelta(v: Any) -> timedelta:
    days, seconds, micros = (_need(n, int) for n in _need(v, list))
    return timedelta(days=days, seconds=seconds, microseconds=micros)


def _rebuild_dataclass(cls: Any, data: dict[str, Any]) -> Any:
    fields = {f.name: f for f in dataclasses.fields(cls)}
    unknown = data.keys() - fields.keys()
    if unknown:
        raise TypeError(f"unknown fields {sorted(unknown)}")
    obj = cls(**{k: v for k, v in data.items() if fields[k].init})
    for k, v in data.items():
        if not fields[k].init:
            object.__setattr__(obj, k, v)
    return obj


_LEAF_DECODERS: dict[str, Callable[[dict[str, Any], Any], Any]] = {
    "tuple": lambda x, v: tuple(_need(v, list)),
    "set": lambda x, v: set(_need(v, list)),
    "frozenset": lambda x, v: frozenset(_need(v, list)),
    "dict": lambda x, v: dict(_pair(p) for p in _need(v, list)),
    "bytes": lambda x, v: base64.b64decode(_need(v, str), validate=True),
    "bytearray": lambda x, v: bytearray(base64.b64decode(_need(v, str), validate=True)),
    "datetime": lambda x, v: _dec_moment(x, datetime),
    "time": lambda x, v: _dec_moment(x, time),
    "date": lambda x, v: date.fromisoformat(_need(v, str)),
    "timedelta": lambda x, v: _dec_timedelta(v),
    "uuid": lambda x, v: UUID(_need(v, str)),
    "decimal": lambda x, v: Decimal(_need(v, str)),
    "float": lambda x, v: _dec_float(v),
}


_ENCODER = json.JSONEncoder(
    separators=(",", ":"), ensure_ascii=False, allow_nan=False, check_circular=False
)
#: For text with a lone surrogate (a ``str`` UTF-8 cannot encode, so no database can store it
#: raw): escaped as ``\udXXX``, which decodes back to the same ``str``.
_ASCII_ENCODER = json.JSONEncoder(
    separators=(",", ":"), ensure_ascii=True, allow_nan=False, check_circular=False
)


def _reject_constant(name: str) -> Any:
    raise ValueError(f"{name} is not valid JSON")


_NO_SEGMENT = object()  # a level of the encoded structure that is not one of the value's
_KEY = object()  # a dict key's own encoding


def _encoded_children(x: Any) -> Any:
    """``(segment, child)`` for each child of ``x`` (a ``to_jsonable`` structure), with the
    segments of the value it encodes: a tagged dict's payload is no level of its own."""
    if type(x) is list:
        return enumerate(x)
    if type(x) is not dict:
        return ()
    if _TAG not in x:
        return x.items()
    kind, v = x[_TAG], x.get("v")
    if kind in ("set", "frozenset") and type(v) is list:
        return ((_SET_ITEM, item) for item in v)
    if kind == "dict" and type(v) is list:
        # a pair's key first (it can be what is refused), then its value under that key
        return (
            child
            for pair in v
            if type(pair) is list and len(pair) == 2
            for child in ((_KEY, pair[0]), (pair[0], pair[1]))
        )
    if kind in ("model", "dataclass") and type(v) is dict:
        return v.items()
    if kind == "tuple" and type(v) is list:
        return enumerate(v)
    return ((_NO_SEGMENT, v),)


def _refused_path(data: Any, encode: Callable[[Any], Any], depth: int) -> tuple[list[object], Any]:
    """The key path (outermost first, at most ``depth`` levels) to the innermost part of
    ``data`` (a ``to_jsonable`` structure that ``encode`` refuses) that ``encode`` refuses too,
    and that part; in a dict key the path stays at the dict.  Only for an error message: each
    level encodes its children again."""
    path: list[object] = []
    node, in_key = data, False
    while len(path) < depth:
        found = next(((seg, c) for seg, c in _encoded_children(node) if _refuses(encode, c)), None)
        if found is None:
            break
        segment, node = found
        if segment is _KEY:
            in_key = True
        elif not in_key and segment is not _NO_SEGMENT:
            path.append(segment)
    return path, node


def _refuses(encode: Callable[[Any], Any], value: Any) -> bool:
    try:
        encode(value)
    except (ValueError, OverflowError, RecursionError):
        return True
    return False
