"""State, channels and reducers.

State is a mapping of keys to values.  A key with a :class:`Channel` in the graph's schema is
merged with that channel's reducer; every other key is overwritten by an update.
"""

from __future__ import annotations

import copy
import operator
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass
from itertools import filterfalse
from types import MappingProxyType
from typing import Any, Final

from langgraph_celery._clone import clone_value
from langgraph_celery.errors import GraphError, InvalidUpdateError
from langgraph_celery.serde import _register_builtin, _register_builtin_constant

__all__ = [
    "MARK_FOR_REMOVAL",
    "AgentState",
    "Channel",
    "Channels",
    "InTurn",
    "Reducer",
    "RemoveByHash",
    "ReplaceAllWith",
]

Reducer = Callable[[Any, Any], Any]


class _MarkForRemoval:
    """The type of :data:`MARK_FOR_REMOVAL`; a single instance exists."""

    _instance: _MarkForRemoval | None = None

    def __new__(cls) -> _MarkForRemoval:
        if cls._instance is None:
            cls._instance = super().__new__(cls)
        return cls._instance

    def __repr__(self) -> str:
        return "MARK_FOR_REMOVAL"

    def __reduce__(self) -> str:
        return "MARK_FOR_REMOVAL"


#: An update value that deletes its key from the state.
MARK_FOR_REMOVAL: Final = _MarkForRemoval()


@dataclass(frozen=True)
class RemoveByHash:
    """In an update of an appender channel: remove the first element equal to ``value``."""

    value: Any


@dataclass(frozen=True)
class ReplaceAllWith:
    """In an update of an appender channel: replace the whole list with ``values``.

    ``values`` is a list (or another iterable) of the new elements; a single value (a string,
    bytes, a mapping, or anything not iterable) makes a list of one, as LangGraph4j's
    ``ReplaceAllWith.of(value)`` does."""

    values: list[Any]

    def __init__(self, values: Any) -> None:
        single = isinstance(values, str | bytes | bytearray | Mapping) or not isinstance(
            values, Iterable
        )
        object.__setattr__(self, "values", [values] if single else list(values))


@dataclass(frozen=True)
class InTurn:
    """An update value that applies ``values`` to its key one after the other.

    It stands for several writes of one key in one update: a before-call node hook's update
    and its node's update (or several before-call hooks) both writing a key with a reducer
    become one update whose value for that key is ``InTurn((hook_value, node_value))``, which
    :func:`apply_update` merges as the hook's write followed by the node's.  It is what a
    ``StreamMode.UPDATES`` output or a checkpoint's writes show for such a key.
    """

    values: tuple[Any, ...]


_register_builtin(RemoveByHash, "RemoveByHash")
_register_builtin(ReplaceAllWith, "ReplaceAllWith")
_register_builtin(InTurn, "InTurn")
_register_builtin_constant(MARK_FOR_REMOVAL, "MARK_FOR_REMOVAL")


class Channel:
    """How one state key is updated: ``reducer(old, new)`` and the value it starts with.

    ``default`` is a zero-argument callable (like ``list``) or a plain value; without a reducer
    an update overwrites the key.
    """

    __slots__ = ("_default", "_has_default", "reducer")

    def __init__(self, reducer: Reducer | None = None, default: Any = None) -> None:
        if reducer is not None and not callable(reducer):
            raise TypeError(f"Channel reducer must be callable, got {type(reducer).__name__}")
        self.reducer = reducer
        self._default = default
        self._has_default = default is not None

    def default(self) -> Any:
        """The value the key starts with (``None`` when the channel has no default)."""
        return self._default() if callable(self._default) else self._default

    @property
    def has_default(self) -> bool:
        """Whether the key starts with :meth:`default` (else it is absent until written)."""
        return self._has_default

    def _with_default(self, factory: Callable[[], Any]) -> Channel:
        """A copy of this channel whose key starts with ``factory()``, even when that is
        ``None`` (a typed schema's field default)."""
        channel = copy.copy(self)
        channel._default = factory
        channel._has_default = True
        return channel

    def update(self, old: Any, new: Any) -> Any:
        if self.reducer is None:
            return new
        return self.reducer(old, new)

    def __repr__(self) -> str:
        return f"Channel(reducer={self.reducer!r}, default={self._default!r})"


def _append(old: Any, new: Any) -> list[Any]:
    result = list(old) if old is not None else []
    if isinstance(new, ReplaceAllWith):
        return list(new.values)
    items = new if isinstance(new, list) else [new]
    appends: list[Any] = []
    for item in items:
        if isinstance(item, ReplaceAllWith):
            result = list(item.values)
        elif isinstance(item, RemoveByHash):
            for index, element in enumerate(result):
                if element == item.value:
                    del result[index]
                    break
        else:
            appends.append(item)
    result.extend(appends)
    return result


class _AppenderChannel(Channel):
    __slots__ = ()

    def __init__(self, default: Callable[[], list[Any]]) -> None:
        super().__init__(_append, default)


class Channels:
    """Factories of the built-in channels."""

    @staticmethod
    def appender(default: Callable[[], list[Any]] = list) -> Channel:
        """A list that accumulates: a list update is appended element by element, a single value
        is appended; :class:`RemoveByHash` and :class:`ReplaceAllWith` in an update remove or
        replace (removals apply before that update's appends)."""
        return _AppenderChannel(default)


class CopyOnRead(dict[str, Any]):
    """A node's copy of the run's state, made key by key: a value is deep-copied the first time
    it is read (then that copy is kept and read again), so a node that reads one key of a big
    state copies that key only, and changing what it read never changes the run's state.
    Values written into it are its own.  Iterating keys copies nothing; ``items()``,
    ``values()``, ``dict(...)`` copy every value they reach."""

    __slots__ = ("_own",)

    def __init__(self, data: Mapping[str, Any]) -> None:
        super().__init__(data)
        self._own: set[str] = set()

    def __getitem__(self, key: str) -> Any:
        value = dict.__getitem__(self, key)
        if key not in self._own:
            value = clone_value(value)
            dict.__setitem__(self, key, value)
            self._own.add(key)
        return value

    def __setitem__(self, key: str, value: Any) -> None:
        dict.__setitem__(self, key, value)
        self._own.add(key)

    def __iter__(self) -> Iterator[str]:  # (also keeps dict(...) from reading values raw)
        return iter(list(dict.keys(self)))

    def get(self, key: str, default: Any = None) -> Any:
        return self[key] if key in self else default  # noqa: SIM401 (self.get is this)

    def items(self) -> Any:
        return [(key, self[key]) for key in list(dict.keys(self))]

    def values(self) -> Any:
        return [self[key] for key in list(dict.keys(self))]

    def pop(self, key: str, *default: Any) -> Any:
        if key in self:
            value = self[key]
            dict.pop(self, key)
            return value
        return dict.pop(self, key, *default)

    def copy(self) -> CopyOnRead:
        """Another copy of the same state: what this one copied already is copied again."""
        fresh = CopyOnRead(dict(dict.items(self)))
        for key in self._own:
            dict.__setitem__(fresh, key, clone_value(dict.__getitem__(self, key)))
        fresh._own = set(self._own)
        return fresh


class AgentState(Mapping[str, Any]):
    """The state a node sees: a read-only mapping with ``value(key, default)``.

    Subclass it (and pass ``state_factory=MyState``) to add typed accessors.
    """

    __slots__ = ("_data",)

    def __init__(self, data: Mapping[str, Any] | None = None) -> None:
        self._data: dict[str, Any]
        if type(data) is CopyOnRead:  # (a node's copy, made as it reads)
            self._data = data
        else:
            self._data = dict(data) if data is not None else {}

    @property
    def data(self) -> Mapping[str, Any]:
        """The state's data as a read-only mapping."""
        return MappingProxyType(self._data)

    def value(self, key: str, default: Any = None) -> Any:
        return self._data.get(key, default)

    def __getitem__(self, key: str) -> Any:
        return self._data[key]

    def __iter__(self) -> Iterator[str]:
        return iter(self._data)

    def __len__(self) -> int:
        return len(self._data)

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self._data!r})"


def initial_values(schema: Mapping[str, Channel]) -> dict[str, Any]:
    """The defaults of the schema's channels that have one."""
    return {key: channel.default() for key, channel in schema.items() if channel.has_default}


#: How a step changed each key it touched, for the saver (see ``checkpoint/_delta.py``).
Ops = dict[str, list[list[Any]]]


def apply_update(
    schema: Mapping[str, Channel],
    values: dict[str, Any],
    update: Mapping[str, Any],
    what: str = "the update",
    ops: Ops | None = None,
) -> None:
    """Merge one update into ``values`` in place, through the schema's reducers.  A reducer that
    raises is an :class:`InvalidUpdateError` naming the key and ``what`` it refused.  With
    ``ops``, how each key changed is recorded there (the ops a checkpoint's ``delta`` holds)."""
    for key, new in update.items():
        if isinstance(new, InTurn):
            for value in new.values:
                apply_update(schema, values, {key: value}, what, ops)
            continue
        if new is MARK_FOR_REMOVAL:
            values.pop(key, None)
            if ops is not None:
                ops[key] = [["del"]]
            continue
        channel = schema.get(key)
        if channel is None or channel.reducer is None:
            values[key] = new
            if ops is not None:
                ops[key] = [["set", new]]
            continue
        present = key in values
        old = values[key] if present else channel.default()
        appender = isinstance(channel, _AppenderChannel)
        concatenation = channel.reducer is operator.add and type(old) is list is type(new)
        try:
            # (a reducer of the user's may change its first argument in place: it gets its
            # own container, not the run's, which earlier checkpoints and outputs share)
            given = old if appender or concatenation else _own_container(old)
            result = channel.reducer(given, new)
        except GraphError:
            raise
        except Exception as error:
            raise InvalidUpdateError(
                f"the reducer of key {key!r} refused {what}: {type(error).__name__}: {error}"
            ) from error
        values[key] = result
        if ops is not None:
            edits = None
            if appender and present and type(old) is list:
                edits = _appender_ops(new)
            elif concatenation and present:  # (list + list: the items of ``new`` added)
                edits = [["add", result[len(old) :]]] if new else []
            elif present:
                edits = _appended(old, result) if type(old) is list else _merged(old, result)
            if edits is None:
                ops[key] = [["set", result]]
            else:
                ops.setdefault(key, []).extend(edits)


def _own_container(value: Any) -> Any:
    """``value``, or a copy of it if it is a list, dict or set (of the same items)."""
    return value.copy() if type(value) in (list, dict, set) else value


def _appended(old: Any, result: Any) -> list[list[Any]] | None:
    """A reducer's ``result`` as delta ops when it is ``old``'s list (the same items) with
    items added at its end, as ``operator.add`` gives; else ``None`` (it replaces the list)."""
    if type(old) is not list or type(result) is not list or len(result) < len(old):
        return None
    if not all(map(operator.is_, old, result)):  # (in C: a tenth of a ms for 10,000 items)
        return None
    return [["add", result[len(old) :]]] if len(result) > len(old) else []


def _merged(old: Any, result: Any) -> list[list[Any]] | None:
    """A reducer's ``result`` as delta ops (``pop`` the keys it lost, ``put`` those it set)
    when it is ``old``'s dict with entries set, added or removed, in ``old``'s order with new
    keys last (as ``{**old, **new}`` gives), and the changed entries are fewer than half of it;
    else ``None`` (it replaces the dict).  An entry is unchanged when it holds the same
    object."""
    if type(old) is not dict or type(result) is not dict:
        return None
    get = old.get
    changed = {key: value for key, value in result.items() if get(key, _ABSENT) is not value}
    added = sum(1 for key in changed if key not in old)
    lost = len(old) - (len(result) - added)
    if 2 * (len(changed) + lost) > len(result):
        return None
    kept = list(filter(result.__contains__, old)) if lost else list(old)
    if list(result)[: len(kept)] != kept:  # (then the keys after them are the added ones)
        return None
    edits: list[list[Any]] = [["pop", list(filterfalse(result.__contains__, old))]] if lost else []
    return [*edits, ["put", changed]] if changed else edits


#: what a dict's ``get`` gives for a key it lacks, told apart from any value
_ABSENT: Final = object()


def _appender_ops(new: Any) -> list[list[Any]] | None:
    """What an appender update does to the list, as delta ops (``None``: it replaces it)."""
    if isinstance(new, ReplaceAllWith):
        return None
    items = new if isinstance(new, list) else [new]
    removed: list[list[Any]] = []
    appended: list[Any] = []
    for item in items:
        if isinstance(item, ReplaceAllWith):
            return None
        if isinstance(item, RemoveByHash):
            removed.append(["rm", item.value])
        else:
            appended.append(item)
    if appended:
        removed.append(["add", appended])
    return removed


def _has_edits(value: Any) -> bool:
    """Whether an appender update removes or replaces elements (else it only appends)."""
    items = value if isinstance(value, list) else (value,)
    return any(isinstance(item, RemoveByHash | ReplaceAllWith) for item in items)


def _written_in_turn(channel: Channel, earlier: Any, later: Any) -> Any:
    """One update value for ``earlier`` then ``later`` written to a key with a reducer."""
    if isinstance(earlier, InTurn):
        return InTurn((*earlier.values, later))
    if (
        isinstance(channel, _AppenderChannel)
        and earlier is not MARK_FOR_REMOVAL
        and not _has_edits(later)
    ):
        # Appends after anything: one list does the same (removals in ``later`` would apply
        # before ``earlier``'s appends in one list, so those keep two writes).
        head = earlier if isinstance(earlier, list) else [earlier]
        tail = later if isinstance(later, list) else [later]
        return [*head, *tail]
    return InTurn((earlier, later))


def compose_updates(
    schema: Mapping[str, Channel], first: Mapping[str, Any], then: Mapping[str, Any]
) -> dict[str, Any]:
    """One update that merges as ``first`` followed by ``then`` (through the reducers).

    A key that ``then`` writes without a reducer (or removes) takes ``then``'s value; a key
    both write with a reducer keeps both writes, in order (see :class:`InTurn`).
    """
    combined = dict(first)
    for key, later in then.items():
        if key not in combined:
            combined[key] = later
            continue
        channel = schema.get(key)
        if channel is None or channel.reducer is None or later is MARK_FOR_REMOVAL:
            combined[key] = later
        else:
            combined[key] = _written_in_turn(channel, combined[key], later)
    return combined
