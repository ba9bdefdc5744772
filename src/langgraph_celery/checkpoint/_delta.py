"""Incremental checkpoints: what a step changed, how a saver stores it, and how a state is read
back from a chain of changes (see docs/storage.md).

A :class:`~langgraph_celery.checkpoint.base.Checkpoint` may carry ``delta``: for each state key
its step changed, the *ops* that take its parent's value to its own, in order:

* ``["set", value]``: the key now holds ``value``;
* ``["del"]``: the key is gone;
* ``["add", items]``: the items appended to the key's list (an appender channel);
* ``["rm", value]``: the first element equal to ``value`` removed from the key's list;
* ``["put", entries]``: the entries of the mapping ``entries`` set in the key's dict (a key it
  had keeps its place, a new one goes last), as a reducer's ``{**old, **new}`` gives;
* ``["pop", keys]``: the dict's entries of those keys removed.

Keys not named are unchanged.  A checkpoint whose ``delta`` is ``None`` is stored whole.

A saver stores a checkpoint with a delta as a *delta body* (the ops instead of ``values``) when
its parent is stored and the chain of deltas since the last whole value stays small: every whole
value gives its chain a *budget* of :data:`BUDGET_FACTOR` times its own size in bytes, each
delta spends its size, and a chain holds at most :data:`MAX_DEPTH` deltas.  A checkpoint whose
delta does not fit is stored whole and starts a new chain.  Reading a checkpoint thus reads at
most its chain: its last whole value and deltas of at most ``BUDGET_FACTOR`` times its size.

In a delta body an ``add`` whose items are exactly what one task wrote to that key (in the
body's own ``metadata["writes"]``) is stored as ``["addw", task_id]``, and one whose items are
exactly the key's value in ``metadata["update"]`` (an input, a resume's or ``update_state``'s
update) as ``["addu"]``, so the items are not stored twice.  *Exactly*: the same objects, or
items the serializer writes as the same text (so read back the same); items that only compare
equal (``1``, ``True`` and ``1.0``; dataclasses with a ``compare=False`` field) are stored
themselves, as a task's write that compares equal to another task's is its own.

:class:`ValuesCache` keeps states reconstructed (or stored) recently by ``(thread_id,
checkpoint_id)``: a checkpoint never changes, so an entry is never stale, and reading the next
checkpoint of a thread needs its own delta row only.  Cached values are the saver's own and never
handed out: readers get copies.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

__all__ = [
    "BUDGET_FACTOR",
    "MAX_DEPTH",
    "Chain",
    "Delta",
    "ValuesCache",
    "apply_delta",
    "decode_ops",
    "encode_ops",
    "next_chain",
]

#: A state key's changes: ops applied in order (see the module's docstring).
Delta = dict[str, list[list[Any]]]

#: A whole value lets the deltas after it take up to this many times its size in bytes.
BUDGET_FACTOR = 32
#: At most this many deltas after a whole value.
MAX_DEPTH = 1000

SET, DEL, ADD, REMOVE, ADD_WRITTEN, ADD_UPDATE = "set", "del", "add", "rm", "addw", "addu"
PUT, POP = "put", "pop"


@dataclass(frozen=True, slots=True)
class Chain:
    """Where a stored checkpoint stands in its chain: the whole value it is read from
    (``base_id``; ``None``: it is whole itself), the bytes its chain may still spend on deltas,
    and how many deltas it is after that whole value."""

    base_id: str | None
    budget: int
    depth: int

    @classmethod
    def whole(cls, size: int) -> Chain:
        return cls(None, BUDGET_FACTOR * size, 0)


def next_chain(parent_id: str, parent: Chain | None, size: int) -> Chain | None:
    """The chain of a delta of ``size`` bytes stored after ``parent`` (``parent_id``'s chain);
    ``None`` when it must be stored whole (no parent known, or the chain is spent)."""
    if parent is None or parent.depth + 1 > MAX_DEPTH or size > parent.budget:
        return None
    base = parent.base_id if parent.base_id is not None else parent_id
    return Chain(base, parent.budget - size, parent.depth + 1)


def _items(written: Any) -> list[Any] | None:
    """What an appender update appends, when it only appends (else ``None``)."""
    items = written if isinstance(written, list) else [written]
    for item in items:
        if type(item).__name__ in ("RemoveByHash", "ReplaceAllWith", "InTurn"):
            return None
    return items


def encode_ops(
    delta: Mapping[str, Sequence[Sequence[Any]]],
    metadata: Mapping[str, Any],
    dumps: Callable[[Any], str],
) -> Delta:
    """``delta`` as stored: an ``add`` of exactly what a task of ``metadata["writes"]`` wrote
    to the key becomes ``["addw", task_id]``, one of exactly the key's value in
    ``metadata["update"]`` ``["addu"]`` (exactly: see :func:`_same_items`; ``dumps`` is the
    serializer's)."""
    writes = metadata.get("writes")
    update = metadata.get("update")
    encoded: Delta = {}
    for key, ops in delta.items():
        out: list[list[Any]] = []
        for op in ops:
            if op[0] == ADD and isinstance(writes, Mapping):
                task = _writer(writes, key, op[1], dumps)
                if task is not None:
                    out.append([ADD_WRITTEN, task])
                    continue
            if op[0] == ADD and isinstance(update, Mapping) and key in update:
                written = _items(update[key])
                if written is not None and _same_items(written, op[1], dumps):
                    out.append([ADD_UPDATE])
                    continue
            out.append(list(op))
        encoded[key] = out
    return encoded


def _writer(
    writes: Mapping[str, Any], key: str, items: list[Any], dumps: Callable[[Any], str]
) -> str | None:
    for task_id, write in writes.items():
        if isinstance(write, Mapping) and key in write:
            written = _items(write[key])
            if written is not None and _same_items(written, items, dumps):
                return str(task_id)
    return None


def _same_items(written: list[Any], items: list[Any], dumps: Callable[[Any], str]) -> bool:
    """Whether a reference to ``written`` reads back exactly ``items``: the same objects, or
    equal ones the serializer writes as the same text.  Equality alone is not enough: ``1``,
    ``True`` and ``1.0`` are equal, so are objects whose ``__eq__`` leaves fields out."""
    if len(written) != len(items):
        return False
    if all(w is i for w, i in zip(written, items, strict=True)):
        return True
    if written != items:
        return False
    try:
        return dumps(written) == dumps(items)
    except Exception:  # (not serializable: the items are stored, whose dump names the key)
        return False


def decode_ops(stored: Mapping[str, Any], metadata: Mapping[str, Any]) -> Delta:
    """A stored delta as ops: ``addw`` resolved from ``metadata["writes"]``."""
    writes = metadata.get("writes") or {}
    decoded: Delta = {}
    for key, ops in stored.items():
        out: list[list[Any]] = []
        for op in ops:
            if op[0] in (ADD_WRITTEN, ADD_UPDATE):
                source = writes[op[1]] if op[0] == ADD_WRITTEN else metadata["update"]
                items = _items(source[key])
                assert items is not None
                out.append([ADD, items])
            else:
                out.append(op)
        decoded[key] = out
    return decoded


def apply_delta(values: Mapping[str, Any], deltas: Iterable[Delta]) -> dict[str, Any]:
    """The state after applying ``deltas`` in turn to ``values``, which is left as it is: keys
    that change get new containers, the rest are shared with ``values``."""
    result = dict(values)
    owned: set[str] = set()  # keys whose list (or dict) is ours to change in place
    for delta in deltas:
        for key, ops in delta.items():
            for op in ops:
                kind = op[0]
                if kind == SET:
                    result[key] = op[1]
                    owned.discard(key)
                elif kind == DEL:
                    result.pop(key, None)
                    owned.discard(key)
                elif kind in (PUT, POP):
                    if key not in owned or type(result.get(key)) is not dict:
                        result[key] = dict(result.get(key) or {})
                        owned.add(key)
                    entries = result[key]
                    if kind == PUT:
                        entries.update(op[1])
                    else:
                        for name in op[1]:
                            entries.pop(name, None)
                else:
                    if key not in owned:
                        result[key] = list(result.get(key) or ())
                        owned.add(key)
                    target = result[key]
                    if kind == ADD:
                        target.extend(op[1])
                    elif kind == REMOVE:
                        for index, element in enumerate(target):
                            if element == op[1]:
                                del target[index]
                                break
                    else:
                        raise ValueError(f"unknown checkpoint delta op {kind!r} of key {key!r}")
    return result


class ValuesCache:
    """Recently stored or reconstructed states by ``(thread_id, checkpoint_id)``, least
    recently used dropped first; thread-safe.  An entry is the values themselves, or (for a
    checkpoint just stored as a delta) its parent's id and delta, applied when first read.
    Values put here are the saver's own: never changed afterwards, never handed out."""

    def __init__(self, size: int = 64) -> None:
        self._size = size
        self._lock = threading.Lock()
        self._values: OrderedDict[tuple[str, str], dict[str, Any] | tuple[str, Delta]] = (
            OrderedDict()
        )
        self._chains: OrderedDict[tuple[str, str], Chain] = OrderedDict()

    def get(self, thread_id: str, checkpoint_id: str | None) -> dict[str, Any] | None:
        """The checkpoint's values, if this cache can tell them."""
        if checkpoint_id is None:
            return None
        with self._lock:
            pending: list[tuple[str, Delta]] = []
            current = checkpoint_id
            while True:
                entry = self._values.get((thread_id, current))
                if entry is None:
                    return None
                if isinstance(entry, dict):
                    break
                pending.append((current, entry[1]))
                current = entry[0]
                if len(pending) > self._size:
                    return None
            self._values.move_to_end((thread_id, current))
        if not pending:
            return entry
        # (the deltas at once, one copy of each list they change; the ones between stay pending)
        values = apply_delta(entry, [delta for _, delta in reversed(pending)])
        self.put(thread_id, checkpoint_id, values)
        return values

    def put(self, thread_id: str, checkpoint_id: str, values: dict[str, Any]) -> None:
        self._set((thread_id, checkpoint_id), values)

    def put_delta(self, thread_id: str, checkpoint_id: str, parent_id: str, delta: Delta) -> None:
        """A checkpoint stored as ``delta`` of ``parent_id`` (the delta is the cache's own)."""
        self._set((thread_id, checkpoint_id), (parent_id, delta))

    def _set(self, key: tuple[str, str], entry: dict[str, Any] | tuple[str, Delta]) -> None:
        with self._lock:
            self._values[key] = entry
            self._values.move_to_end(key)
            while len(self._values) > self._size:
                self._values.popitem(last=False)

    def chain(self, thread_id: str, checkpoint_id: str) -> Chain | None:
        with self._lock:
            return self._chains.get((thread_id, checkpoint_id))

    def put_chain(self, thread_id: str, checkpoint_id: str, chain: Chain) -> None:
        with self._lock:
            self._chains[(thread_id, checkpoint_id)] = chain
            self._chains.move_to_end((thread_id, checkpoint_id))
            while len(self._chains) > 16 * self._size:
                self._chains.popitem(last=False)

    def forget(self, thread_id: str, checkpoint_ids: Iterable[str] | None = None) -> None:
        """Drop the thread's entries (those of ``checkpoint_ids``, or all)."""
        with self._lock:
            entries: OrderedDict[tuple[str, str], Any]
            for entries in (self._values, self._chains):
                if checkpoint_ids is None:
                    for key in [k for k in entries if k[0] == thread_id]:
                        del entries[key]
                else:
                    for checkpoint_id in checkpoint_ids:
                        entries.pop((thread_id, checkpoint_id), None)


def reconstruct(
    target: str,
    parent_of: Callable[[str], str | None],
    body_of: Callable[[str], Mapping[str, Any]],
    cached: Callable[[str], dict[str, Any] | None],
) -> dict[str, Any]:
    """The values of checkpoint ``target``: walk back through its parents to a whole value or
    to one in the cache, then apply the deltas forward.  ``body_of`` gives a stored body
    (loaded), ``parent_of`` a checkpoint's parent id, ``cached`` cached values (or ``None``).
    The result shares unchanged values with what it was built from: copy it before handing it
    out."""
    deltas: list[Delta] = []
    current: str | None = target
    while True:
        assert current is not None
        hit = cached(current)
        if hit is not None:
            base = hit
            break
        body = body_of(current)
        if "delta" not in body:
            base = body["values"]
            break
        deltas.append(decode_ops(body["delta"], body.get("metadata") or {}))
        current = parent_of(current)
        if current is None:
            raise LookupError(f"checkpoint {target!r} is stored as a delta of a missing parent")
    deltas.reverse()
    return apply_delta(base, deltas) if deltas else dict(base)
