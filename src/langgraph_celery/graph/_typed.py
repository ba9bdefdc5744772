"""Typed state schemas: a ``TypedDict``, a dataclass or a pydantic model class given to
``StateGraph(schema)``.

Each field is a state key.  ``Annotated[T, reducer]`` (a function of two arguments) or
``Annotated[T, Channel(...)]`` makes the key a channel; every other field is overwritten by
updates.  A dataclass or pydantic field's default is its key's default (the value the key starts
with, ``None`` included); a reducer field without one starts with ``T()`` when ``T`` is a
built-in container or number (``list[str]`` starts as ``[]``, ``int`` as ``0``), as in LangGraph,
else with its ``Channel``'s default.

What nodes receive does not change: an ``AgentState`` (or the graph's ``state_factory``) over the
state's data.  What a typed schema adds is checked in :meth:`TypedSchema.check_update`, called for
every node update by the task runner, so in process and on Celery alike, and through
:meth:`TypedSchema.check_write` for the input, a resume's update and ``update_state``'s values
(the engine's ``checked``): a key that is not a
field is an :class:`InvalidUpdateError` naming the node and the key; with a pydantic model each
field the update writes is validated (its type and ``Field`` constraints, pydantic's lax mode
unless the model is ``strict``), a bad value being an ``InvalidUpdateError`` naming the node and
the field.  A plain field stores the validated value (``"3"`` for an ``int`` field is stored as
``3``, a dict for a model field as the model); a reducer field is checked on what its reducer
makes of the update from the field's default (for a list, the items the update adds: neither the
state's size nor what other writers put there matters) and stores what the reducer makes.

:attr:`TypedSchema.types` are the enums, dataclasses and pydantic models the fields' types name
(through containers, unions, and the fields of those models and dataclasses): ``compile()``
registers them with the checkpoint saver's ``JsonSerializer`` so that their values are stored.
"""

from __future__ import annotations

import collections.abc
import copy
import dataclasses
import enum
import inspect
import typing
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Annotated, Any, get_args, get_origin, get_type_hints, is_typeddict

from pydantic import BaseModel, ConfigDict, TypeAdapter, ValidationError
from pydantic.errors import PydanticSchemaGenerationError

from langgraph_celery.errors import GraphDefinitionError, InvalidUpdateError
from langgraph_celery.graph.state import MARK_FOR_REMOVAL, Channel, apply_update

__all__ = ["TypedSchema", "is_typed_schema", "typed_schema"]

#: Reducer fields without a default start with the zero value of these types (as in LangGraph).
_ZERO: dict[Any, Callable[[], Any]] = {
    list: list,
    dict: dict,
    set: set,
    frozenset: frozenset,
    tuple: tuple,
    int: int,
    float: float,
    str: str,
    collections.abc.Sequence: list,
    collections.abc.MutableSequence: list,
    collections.abc.Set: set,
    collections.abc.MutableSet: set,
    collections.abc.Mapping: dict,
    collections.abc.MutableMapping: dict,
}

_WRAPPERS = frozenset({"Required", "NotRequired", "ReadOnly"})


def _is_typed_dict(cls: type) -> bool:
    # (typing_extensions' TypedDict on older Pythons is not seen by typing.is_typeddict)
    return is_typeddict(cls) or (issubclass(cls, dict) and hasattr(cls, "__total__"))


def kind_of(schema: object) -> str | None:
    """``"TypedDict"``, ``"dataclass"`` or ``"pydantic model"`` for a typed schema class."""
    if not isinstance(schema, type):
        return None
    if _is_typed_dict(schema):
        return "TypedDict"
    if issubclass(schema, BaseModel):
        return "pydantic model"
    if dataclasses.is_dataclass(schema):
        return "dataclass"
    return None


def is_typed_schema(schema: object) -> bool:
    return kind_of(schema) is not None


@dataclass(frozen=True)
class TypedSchema:
    """What ``StateGraph`` keeps of a typed schema class."""

    source: type
    #: ``"TypedDict"``, ``"dataclass"`` or ``"pydantic model"``
    kind: str
    #: the channels of the fields that have a reducer or a default
    channels: Mapping[str, Channel]
    #: every field's name: the keys a node may write
    keys: frozenset[str]
    #: (pydantic) a validator for each field
    validators: Mapping[str, TypeAdapter[Any]] = field(default_factory=dict)
    #: (pydantic) the model is strict: no lax conversions
    strict: bool = False
    #: the enums, dataclasses and pydantic models the fields' types name
    types: tuple[type, ...] = ()

    @property
    def name(self) -> str:
        return self.source.__name__

    def check_update(
        self, node: str, update: dict[str, Any], schema: Mapping[str, Channel]
    ) -> dict[str, Any]:
        """``node``'s update checked against the schema (see the module docstring); returns it
        with plain fields' values as validated."""
        return self.check_write(f"node {node!r}", update, schema)

    def check_write(
        self, writer: str, update: Mapping[str, Any], schema: Mapping[str, Channel]
    ) -> dict[str, Any]:
        """What ``writer`` (a node, ``"the input"``, ...) writes, checked as a node's update is;
        every bad field is named in one :class:`InvalidUpdateError`.  A copy with the values as
        validated when a field has a validator; else ``update`` itself (a dict: not copied)."""
        unknown = [key for key in update if key not in self.keys]
        if unknown:
            wrote = (
                f"key {unknown[0]!r}, which is not a field"
                if len(unknown) == 1
                else f"keys {', '.join(repr(key) for key in unknown)}, which are not fields"
            )
            raise InvalidUpdateError(
                f"{writer} wrote {wrote} of the state schema {self.name} "
                f"({', '.join(sorted(self.keys))}); add the field to {self.name} or write one "
                "of its fields"
            )
        if not self.validators:  # (nothing converts a value: the update as it is)
            return update if isinstance(update, dict) else dict(update)
        checked = dict(update)
        problems: dict[str, str] = {}
        for key, new in update.items():
            if new is MARK_FOR_REMOVAL:
                continue
            channel = schema.get(key)
            if channel is None or channel.reducer is None:
                checked[key] = self._validate(key, new, problems)
                continue
            made: dict[str, Any] = {}  # (from the field's default, not the run's value)
            apply_update(schema, made, {key: new}, f"{writer}'s update")
            if key in made:
                self._validate(key, made[key], problems)
        if len(problems) == 1:
            ((key, problem),) = problems.items()
            raise InvalidUpdateError(
                f"{writer} wrote an invalid value for field {key!r} of {self.name}: {problem}"
            )
        if problems:
            raise InvalidUpdateError(
                f"{writer} wrote invalid values for fields {', '.join(map(repr, problems))} of "
                f"{self.name}: " + "; ".join(f"{key!r}: {text}" for key, text in problems.items())
            )
        return checked

    def _validate(self, key: str, value: Any, problems: dict[str, str]) -> Any:
        """``value`` as ``key``'s validator makes it; a problem is added to ``problems``."""
        try:
            return self.validators[key].validate_python(value, strict=self.strict or None)
        except ValidationError as error:
            found = "; ".join(
                f"{_location(problem['loc'])}{problem['msg']}" for problem in error.errors()
            )
            problems[key] = f"{found} (got {_short(value)})"
            return value


def _location(loc: tuple[int | str, ...]) -> str:
    if not loc:
        return ""
    path = "".join(f"[{part}]" if isinstance(part, int) else f".{part}" for part in loc)
    return f"at {path.removeprefix('.')}: "


def _short(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 80 else text[:77] + "..."


# -- reading a schema class ---------------------------------------------------------------------


def _takes_two(fn: Any) -> bool:
    """Whether ``fn`` can be called as ``fn(old, new)`` (a callable whose signature cannot be
    read is taken to: a reducer silently ignored would be worse)."""
    if isinstance(fn, type) or not callable(fn):
        return False
    try:
        signature = inspect.signature(fn)
    except (TypeError, ValueError):
        return True
    try:
        signature.bind(None, None)
    except TypeError:
        return False
    return True


def _channel_in(owner: str, name: str, metadata: tuple[Any, ...]) -> Channel | None:
    """The channel that ``Annotated`` metadata gives a field: a ``Channel``, or a two-argument
    function as its reducer."""
    found = [item for item in metadata if isinstance(item, Channel) or _takes_two(item)]
    if len(found) > 1:
        raise GraphDefinitionError(
            f"field {name!r} of the state schema {owner} has {len(found)} reducers in its "
            "Annotated[...]; give it one (a function of two arguments, or a Channel)"
        )
    if not found:
        return None
    item = found[0]
    return item if isinstance(item, Channel) else Channel(item)


def _unwrap(hint: Any) -> Any:
    """A TypedDict field's type without ``Required``/``NotRequired``/``ReadOnly``."""
    while getattr(get_origin(hint), "_name", None) in _WRAPPERS:
        hint = get_args(hint)[0]
    return hint


def _split(hint: Any) -> tuple[Any, tuple[Any, ...]]:
    """``Annotated[T, *metadata]`` as ``(T, metadata)``; any other type as ``(type, ())``."""
    if get_origin(hint) is Annotated:
        base, *metadata = get_args(hint)
        return base, tuple(metadata)
    return hint, ()


def _zero(base: Any) -> Callable[[], Any] | None:
    origin = get_origin(base) or base
    try:
        return _ZERO.get(origin)
    except TypeError:  # an unhashable type expression
        return None


def _hints(cls: type, kind: str) -> dict[str, Any]:
    try:
        return get_type_hints(cls, include_extras=True)
    except Exception as error:  # (NameError for a name the class's module does not define)
        raise GraphDefinitionError(
            f"the state schema {cls.__name__} ({kind}) has a field type that cannot be "
            f"resolved: {type(error).__name__}: {error}; define the types its fields name at "
            "module level (not inside a function), or import them where it is defined"
        ) from error


def _fixed(value: Any) -> Callable[[], Any]:
    return lambda: copy.deepcopy(value)


@dataclass
class _Field:
    name: str
    base: Any
    channel: Channel | None
    #: the field's default, as a factory (``None``: no default)
    default: Callable[[], Any] | None


def _fields(cls: type, kind: str) -> Iterator[_Field]:
    if kind == "pydantic model":
        assert issubclass(cls, BaseModel)
        for name, info in cls.model_fields.items():
            default = None
            if not info.is_required():
                default = _pydantic_default(info)
            channel = _channel_in(cls.__name__, name, tuple(info.metadata))
            yield _Field(name, info.annotation, channel, default)
        return
    hints = _hints(cls, kind)
    if kind == "TypedDict":
        for name, hint in hints.items():
            base, metadata = _split(_unwrap(hint))
            yield _Field(name, base, _channel_in(cls.__name__, name, metadata), None)
        return
    for item in dataclasses.fields(cls):
        base, metadata = _split(hints.get(item.name, item.type))
        default = None
        if item.default is not dataclasses.MISSING:
            default = _fixed(item.default)
        elif item.default_factory is not dataclasses.MISSING:
            default = item.default_factory
        yield _Field(item.name, base, _channel_in(cls.__name__, item.name, metadata), default)


def _pydantic_default(info: Any) -> Callable[[], Any]:
    if getattr(info, "default_factory_takes_data", False):
        return lambda: info.get_default(call_default_factory=True, validated_data={})
    return lambda: info.get_default(call_default_factory=True)


def _validator(cls: type[BaseModel], name: str) -> TypeAdapter[Any]:
    info = cls.model_fields[name]
    annotated: Any = Annotated[info.annotation, info]
    try:
        return TypeAdapter(annotated)
    except PydanticSchemaGenerationError:
        pass
    try:  # a type pydantic checks with isinstance only
        return TypeAdapter(annotated, config=ConfigDict(arbitrary_types_allowed=True))
    except Exception as error:
        raise GraphDefinitionError(
            f"field {name!r} of the state schema {cls.__name__}: pydantic cannot validate its "
            f"type {info.annotation!r} ({error})"
        ) from error


def typed_schema(cls: type) -> TypedSchema:
    """Read a TypedDict, dataclass or pydantic model class as a typed schema."""
    kind = kind_of(cls)
    if kind is None:
        raise GraphDefinitionError(f"{cls!r} is not a TypedDict, dataclass or pydantic model class")
    channels: dict[str, Channel] = {}
    keys: list[str] = []
    bases: list[Any] = []
    for item in _fields(cls, kind):
        keys.append(item.name)
        bases.append(item.base)
        channel = item.channel
        if item.default is not None:
            channel = (channel or Channel())._with_default(item.default)
        elif channel is not None and not channel.has_default:
            zero = _zero(item.base)
            if zero is not None:
                channel = channel._with_default(zero)
        if channel is not None:
            channels[item.name] = channel
    validators: dict[str, TypeAdapter[Any]] = {}
    strict = False
    if issubclass(cls, BaseModel):
        validators = {name: _validator(cls, name) for name in keys}
        strict = bool(cls.model_config.get("strict"))
    return TypedSchema(
        source=cls,
        kind=kind,
        channels=channels,
        keys=frozenset(keys),
        validators=validators,
        strict=strict,
        types=tuple(stored_types(bases)),
    )


# -- the types the serializer must allow --------------------------------------------------------


def stored_types(hints: list[Any]) -> list[type]:
    """The enums, dataclasses and pydantic models that ``hints`` name, through type arguments
    (``list[Message]``, ``Message | None``, ``Annotated[...]``) and the fields of the models and
    dataclasses found, in the order found."""
    found: dict[type, None] = {}
    seen: set[int] = set()
    stack = list(reversed(hints))
    while stack:
        hint = stack.pop()
        if id(hint) in seen:
            continue
        seen.add(id(hint))
        if isinstance(hint, type) and not get_args(hint):
            if issubclass(hint, enum.Enum):
                found.setdefault(hint)
            elif issubclass(hint, BaseModel):
                found.setdefault(hint)
                stack.extend(info.annotation for info in hint.model_fields.values())
            elif dataclasses.is_dataclass(hint):
                found.setdefault(hint)
                try:
                    stack.extend(get_type_hints(hint).values())
                except Exception:  # (unresolvable: its values must be registered by hand)
                    stack.extend(f.type for f in dataclasses.fields(hint))
            continue
        if isinstance(hint, str | typing.ForwardRef):
            continue
        stack.extend(arg for arg in get_args(hint) if not isinstance(arg, str | int | bool))
        origin = get_origin(hint)
        if isinstance(origin, type) and origin not in _ZERO:
            stack.append(origin)  # a generic model or dataclass, e.g. Page[Item]
    return list(found)
