"""JSON serialization of graph state with an explicit type allowlist (never pickle).

``dumps``/``loads`` give JSON text; ``to_jsonable``/``from_jsonable`` give the same data as JSON
compatible structures (for Celery messages).  ``None``, ``bool``, ``int``, ``float``, ``str``,
``list`` and ``dict`` with ``str`` keys are stored as themselves; other allowed values become
``{"__lgc__": KIND, "v": PAYLOAD}`` (plus ``"t": NAME`` for registered kinds):

* ``tuple``, ``set``, ``frozenset``: list of encoded items; ``bytes``, ``bytearray``: base64;
* ``datetime``, ``time``: ``isoformat()``, except that a ``zoneinfo.ZoneInfo`` tz is stored as the
  wall time plus ``"tz": key``; ``"fold": 1`` when set.  ``date``: ``isoformat()``;
* ``timedelta``: ``[days, seconds, microseconds]``; ``uuid``, ``decimal``: ``str(value)``;
* ``float``: ``"nan"``, ``"inf"`` or ``"-inf"`` (non-finite floats are encoded, not refused);
* ``dict``: ``[[key, value], ...]`` for a dict with a non-str key or an ``"__lgc__"`` key;
* ``enum``: the encoded value; ``dataclass``: ``{field: encoded value}`` for every field (init
  fields go to ``cls(**fields)``, the others are set afterwards); ``model``: the encoded
  ``model_dump(mode="python", by_alias=True, round_trip=True)`` minus computed fields, rebuilt
  with ``model_validate`` (so an Enum member inside a dump must be registered too);
* ``const``: no payload; ``"t"`` names a library constant, decoded to that very object.

An ``int`` of more digits than Python converts to text (``sys.get_int_max_str_digits()``, 4,300
by default, which a reading process applies too) is refused, as is nesting deeper than the JSON
text encoder goes; the error names the key path.

Types are exact: subclasses of built-in types (``numpy.float64``, ``OrderedDict``...) are refused
rather than silently turned into their base.  Enum, dataclass and pydantic classes must be
registered under ``f"{cls.__module__}.{cls.__qualname__}"``; a tag naming anything else is
refused, nothing named in the data is ever imported.  Errors name the key path, e.g.
``messages[3].meta.x`` (identifier keys after a dot, other keys as ``[repr]``, ``{...}`` for a set
element).

Library hooks, called by :mod:`langgraph_celery.graph.state` when it is imported (``loads``
imports that fixed module itself when a tag names an unknown type):

* ``_register_builtin(cls: type, name: str) -> None``: allow the Enum/dataclass/pydantic ``cls``
  in every serializer, tagged with ``"t": name``.
* ``_register_builtin_constant(obj: object, name: str) -> None``: encode ``obj`` by identity as
  ``{"__lgc__": "const", "t": name}``, decoded back to the very same object.

For speed, containers that need no change are reused: ``to_jsonable`` and ``from_jsonable`` may
return (parts of) their argument, so treat both results as read-only.

Here: ``Serializer``, ``JsonSerializer`` (the walk over containers, the allowlist) and the
registries of built-ins; the per-type leaf codecs, the JSON text encoders and the key-path
helpers are in :mod:`langgraph_celery._serde_codecs`, the error messages in
:mod:`langgraph_celery._serde_errors`.
"""

from __future__ import annotations

import dataclasses
import importlib
import json
from collections.abc import Iterable
from enum import Enum
from math import isfinite
from typing import Any, Protocol, TypeVar, runtime_checkable

from pydantic import BaseModel

from langgraph_celery._serde_codecs import (
    _ASCII_ENCODER,
    _ENCODER,
    _LEAF_DECODERS,
    _LEAF_ENCODERS,
    _SET_ITEM,
    _TAG,
    _Fail,
    _kind,
    _need,
    _rebuild_dataclass,
    _reject_constant,
)
from langgraph_celery._serde_errors import REGISTER_HINT, decode_error, encode_error, text_error
from langgraph_celery.errors import SerializationError

__all__ = ["JsonSerializer", "Serializer"]

_T = TypeVar("_T", bound=type)
_SCALARS = frozenset({str, int, bool, type(None)})
_MISSING = object()
_STATE_MODULE = "langgraph_celery.graph.state"

_BUILTIN_TYPES: dict[str, type] = {}
_BUILTIN_NAMES: dict[type, str] = {}
_BUILTIN_CONSTANTS: dict[str, object] = {}
_BUILTIN_CONSTANT_NAMES: dict[int, str] = {}
_builtins_loaded = False


@runtime_checkable
class Serializer(Protocol):
    """What a checkpoint saver needs: values to text and back."""

    def dumps(self, obj: Any) -> str: ...

    def loads(self, data: str) -> Any: ...


def _register_builtin(cls: type, name: str) -> None:
    """Allow ``cls`` (Enum, dataclass or pydantic model) in every serializer, tagged ``name``."""
    if _kind(cls) is None:
        raise TypeError(f"cannot register {cls!r}: not an Enum, dataclass or pydantic model")
    _BUILTIN_TYPES[name] = cls
    _BUILTIN_NAMES[cls] = name


def _register_builtin_constant(obj: object, name: str) -> None:
    """Encode ``obj`` by identity as constant ``name``; decoding returns that same object."""
    _BUILTIN_CONSTANTS[name] = obj
    _BUILTIN_CONSTANT_NAMES[id(obj)] = name


def _load_builtins() -> None:
    global _builtins_loaded
    if not _builtins_loaded:
        _builtins_loaded = True
        try:
            importlib.import_module(_STATE_MODULE)  # a fixed name, never one from the data
        except ModuleNotFoundError as exc:
            if exc.name not in ("langgraph_celery.graph", _STATE_MODULE):
                raise


class JsonSerializer:
    """JSON serializer with an explicit allowlist (see the module docstring for the format)."""

    def __init__(self, types: Iterable[type] = ()) -> None:
        self._types: dict[str, type] = {}
        self._names: dict[type, str] = {}
        for cls in types:
            self.register(cls)

    @property
    def types(self) -> tuple[type, ...]:
        """The classes registered on this serializer (library built-ins not included)."""
        return tuple(self._types.values())

    def register(self, cls: _T) -> _T:
        """Allow an Enum, dataclass or pydantic model class; returns it (usable as a decorator)."""
        if _kind(cls) is None:
            raise TypeError(
                f"cannot register {cls!r}: only Enum subclasses, dataclasses and pydantic "
                "BaseModel subclasses can be registered"
            )
        name = f"{cls.__module__}.{cls.__qualname__}"
        if self._types.get(name, cls) is not cls:
            raise ValueError(f"another class is already registered under the name {name!r}")
        self._types[name] = cls
        self._names[cls] = name
        return cls

    def dumps(self, obj: Any) -> str:
        data = self.to_jsonable(obj)
        try:
            text: str = _ENCODER.encode(data)
        except (ValueError, OverflowError, RecursionError) as exc:
            raise text_error(data, exc) from None
        if not text.isascii():
            try:
                text.encode("utf-8")
            except UnicodeEncodeError:
                text = _ASCII_ENCODER.encode(data)
        return text

    def loads(self, data: str) -> Any:
        try:
            parsed = json.loads(data, parse_constant=_reject_constant)
        except (ValueError, TypeError, RecursionError) as exc:
            raise SerializationError(f"cannot deserialize: not valid JSON ({exc})") from None
        return self.from_jsonable(parsed)

    def to_jsonable(self, obj: Any) -> Any:
        """The tagged JSON-compatible structure for ``obj`` (may share containers with it)."""
        try:
            return self._enc(obj)
        except _Fail as fail:
            raise encode_error(fail, type(obj) is dict) from None
        except RecursionError:
            raise SerializationError(
                "cannot serialize value: it is nested too deeply or contains a reference cycle"
            ) from None

    def from_jsonable(self, data: Any) -> Any:
        """Rebuild the value :meth:`to_jsonable` produced (may share containers with ``data``)."""
        if type(data) is not dict and type(data) is not list:
            return data
        try:
            return self._dec(data)
        except _Fail as fail:
            raise decode_error(fail) from fail.__cause__
        except RecursionError:
            raise SerializationError("cannot deserialize: data is nested too deeply") from None

    # -- encoding ------------------------------------------------------------------------------

    def _enc(self, x: Any) -> Any:
        t = type(x)
        if t in _SCALARS:
            return x
        if t is dict:
            return self._enc_dict(x)
        if t is list:
            return self._enc_list(x)
        if t is float and isfinite(x):
            return x
        return self._enc_other(x, t)

    def _enc_dict(self, d: dict[Any, Any]) -> Any:
        out: dict[str, Any] | None = None
        k: Any = None
        pairs = False
        try:
            for k, v in d.items():
                if type(k) is not str or k == _TAG:
                    pairs = True
                    break
                t = type(v)
                if t in _SCALARS or (t is float and isfinite(v)):
                    continue
                ev = self._enc_dict(v) if t is dict else self._enc(v)
                if ev is not v:
                    if out is None:
                        out = d.copy()
                    out[k] = ev
        except _Fail as fail:
            fail.path.append(k)
            raise
        if pairs:
            return {_TAG: "dict", "v": self._enc_pairs(d)}
        return d if out is None else out

    def _enc_pairs(self, d: dict[Any, Any]) -> list[list[Any]]:
        out = []
        k: Any = None
        try:
            for k, v in d.items():
                out.append([self._enc(k), self._enc(v)])
        except _Fail as fail:
            fail.path.append(k)
            raise
        return out

    def _enc_list(self, seq: list[Any]) -> list[Any]:
        out: list[Any] | None = None
        i = 0
        try:
            for i, v in enumerate(seq):
                t = type(v)
                if t in _SCALARS or (t is float and isfinite(v)):
                    continue
                ev = self._enc_dict(v) if t is dict else self._enc(v)
                if ev is not v:
                    if out is None:
                        out = seq.copy()
                    out[i] = ev
        except _Fail as fail:
            fail.path.append(i)
            raise
        return seq if out is None else out

    def _enc_other(self, x: Any, t: type) -> Any:
        leaf = _LEAF_ENCODERS.get(t)
        if leaf is not None:
            return leaf(x)
        if t is tuple:
            return {_TAG: "tuple", "v": self._enc_list(list(x))}
        if t is set or t is frozenset:
            try:
                return {_TAG: t.__name__, "v": self._enc_list(list(x))}
            except _Fail as fail:
                fail.path[-1] = _SET_ITEM
                raise
        const = _BUILTIN_CONSTANT_NAMES.get(id(x))
        if const is not None and _BUILTIN_CONSTANTS.get(const) is x:
            return {_TAG: "const", "t": const}
        name = self._names.get(t) or _BUILTIN_NAMES.get(t)
        if name is None:
            raise _Fail(obj=x)
        if isinstance(x, Enum):
            return {_TAG: "enum", "t": name, "v": self._enc(x.value)}
        if isinstance(x, BaseModel):
            data = x.model_dump(mode="python", by_alias=True, round_trip=True)
            for computed in type(x).model_computed_fields:
                data.pop(computed, None)
            return {_TAG: "model", "t": name, "v": self._enc_dict(data)}
        fields = {f.name: getattr(x, f.name) for f in dataclasses.fields(x)}
        return {_TAG: "dataclass", "t": name, "v": self._enc_dict(fields)}

    # -- decoding ------------------------------------------------------------------------------

    def _dec(self, x: Any) -> Any:
        key: Any = None
        out: Any = None
        if type(x) is dict:
            if _TAG in x:
                return self._dec_tagged(x)
            items: Iterable[tuple[Any, Any]] = x.items()
        else:
            items = enumerate(x)
        try:
            for key, v in items:
                if type(v) is dict or type(v) is list:
                    dv = self._dec(v)
                    if dv is not v:
                        if out is None:
                            out = x.copy()
                        out[key] = dv
        except _Fail as fail:
            fail.path.append(key)
            raise
        return x if out is None else out

    def _dec_tagged(self, x: dict[str, Any]) -> Any:
        kind = x[_TAG]
        v = x.get("v")
        if type(v) is dict or type(v) is list:
            v = self._dec(v)
        leaf = _LEAF_DECODERS.get(kind) if type(kind) is str else None
        try:
            if leaf is not None:
                return leaf(x, v)
        except Exception as exc:
            raise _Fail(reason=f"bad {kind!r} payload: {exc}") from exc
        if kind not in ("enum", "dataclass", "model", "const"):
            raise _Fail(reason=f"unknown tag {kind!r}")
        name = x.get("t")
        if type(name) is not str:
            raise _Fail(reason=f"tag {kind!r} without a type name")
        found = self._lookup(kind, name)
        if found is _MISSING:
            hint = "" if kind == "const" else REGISTER_HINT
            raise _Fail(reason=f"{kind} {name!r} is not registered with this serializer{hint}")
        try:
            if kind == "const":
                return found
            if kind == "enum":
                return found(v)
            if kind == "model":
                return found.model_validate(v)
            return _rebuild_dataclass(found, _need(v, dict))
        except Exception as exc:
            raise _Fail(reason=f"cannot rebuild {name}: {exc}") from exc

    def _lookup(self, kind: str, name: str) -> Any:
        while True:
            if kind == "const":
                found = _BUILTIN_CONSTANTS.get(name, _MISSING)
            else:
                found = self._types.get(name) or _BUILTIN_TYPES.get(name, _MISSING)
                if found is not _MISSING and _kind(found) != kind:
                    return _MISSING
            if found is not _MISSING or _builtins_loaded:
                return found
            _load_builtins()
