"""Compiled subgraphs' state, both ways (see :mod:`langgraph_celery.graph._subgraph`): what a
child run changed, as the update its subgraph node gives the parent (:func:`changes`), and how a
child run goes on from where it stopped, with the updates its parent's thread went through
meanwhile (:func:`parent_updates`, :func:`child_input`).  Shared by the in-process executor and
the Celery one (``worker/subgraphs.py``); pure, but :func:`parent_updates` reads checkpoints
through the function it is given.
"""

from __future__ import annotations

import copy
import dataclasses
import operator
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

from langgraph_celery.checkpoint.base import Checkpoint, CheckpointKind
from langgraph_celery.graph import _marks
from langgraph_celery.graph._marks import Extra
from langgraph_celery.graph.state import (
    MARK_FOR_REMOVAL,
    Channel,
    RemoveByHash,
    ReplaceAllWith,
    _AppenderChannel,
    apply_update,
    initial_values,
)
from langgraph_celery.graph.types import GraphInput

__all__ = ["changes", "child_input", "parent_updates", "resumes", "started_with"]


def changes(
    schema: Mapping[str, Channel], before: Mapping[str, Any], after: Mapping[str, Any]
) -> dict[str, Any]:
    """The update that takes state ``before`` to ``after`` through ``schema``'s reducers.

    A removed key is :data:`MARK_FOR_REMOVAL`; an appender gets the items it lost (as
    ``RemoveByHash``) and the items added (:func:`_appended`; else ``ReplaceAllWith`` the new
    list), so that a sibling's appends to it in the same step stay; a key with a reducer of its
    own the update the reducer turns the old value into the new one with (:func:`_through`);
    any other changed key its new value.
    """
    update: dict[str, Any] = {}
    for key in before:
        if key not in after:
            update[key] = MARK_FOR_REMOVAL
    for key, value in after.items():
        had = key in before
        if had and before[key] == value:
            continue
        channel = schema.get(key)
        if isinstance(channel, _AppenderChannel):
            old = before[key] if had else channel.default()
            old = list(old) if isinstance(old, list | tuple) else []
            if isinstance(value, list) and value[: len(old)] == old:
                if len(value) > len(old):
                    update[key] = value[len(old) :]
            else:
                update[key] = _appended(channel, old, value)
        elif channel is not None and channel.reducer is not None:
            old = before[key] if had else channel.default()
            update[key] = _through(channel, old, value)
        else:
            update[key] = value
    return update


def _appended(channel: _AppenderChannel, old: list[Any], new: Any) -> Any:
    """The appender update that takes ``old`` to ``new``: the items ``new`` lacks, removed
    (``RemoveByHash``, first occurrences, before the appends), then the items it adds at its
    end, when the channel's reducer, tried on a copy, gives ``new`` that way; else
    ``ReplaceAllWith(new)``."""
    if isinstance(new, list):
        kept = 0
        removed: list[Any] = []
        for item in old:
            if kept < len(new) and new[kept] == item:
                kept += 1
            else:
                removed.append(item)
        update = [RemoveByHash(item) for item in removed] + new[kept:]
        try:
            if channel.reducer is not None and channel.reducer(copy.deepcopy(old), update) == new:
                return update
        except Exception:  # (a reducer that refuses it: replace the list instead)
            pass
    return ReplaceAllWith(new if isinstance(new, list) else [new])


def _candidates(old: Any, new: Any) -> list[Any]:
    """What an update of a key with a reducer of its own may be, to take ``old`` to ``new``:
    the items a list gained, the amount a number grew by, or ``new`` itself."""
    found: list[Any] = []
    if isinstance(old, list) and isinstance(new, list) and new[: len(old)] == old:
        found.append(new[len(old) :])
    numbers = (int, float)
    if (
        isinstance(old, numbers)
        and isinstance(new, numbers)
        and not isinstance(old, bool)
        and not isinstance(new, bool)
    ):
        found.append(new - old)
    found.append(new)
    return found


def _through(channel: Channel, old: Any, new: Any) -> Any:
    """The update that ``channel``'s reducer turns ``old`` into ``new`` with (so that an additive
    reducer such as ``operator.add`` adds the change once), checked by calling the reducer on a
    copy; ``new`` itself when none does."""
    assert channel.reducer is not None
    concatenation = channel.reducer is operator.add and type(old) is list is type(new)
    if concatenation and new[: len(old)] == old:  # (list + list: nothing to try, nor to copy)
        return new[len(old) :]
    for candidate in _candidates(old, new):
        try:
            if channel.reducer(copy.deepcopy(old), candidate) == new:
                return candidate
        except Exception:  # (a candidate the reducer refuses is not the one)
            continue
    return new


def _parent_run(checkpoint: Checkpoint) -> str | None:
    """The parent run a child run's checkpoint belongs to (``Extra.PARENT``)."""
    parent = checkpoint.extra.get(Extra.PARENT)
    return parent.get("run_id") if isinstance(parent, Mapping) else None


def resumes(latest: Checkpoint | None, parent_run: str) -> bool:
    """Whether the child thread's latest checkpoint ``latest`` is a run of ``parent_run`` with
    something pending (parked, failed or cancelled), which the node resumes."""
    return latest is not None and _marks.has_pending(latest) and _parent_run(latest) == parent_run


def started_with(checkpoints: Iterable[Checkpoint], latest: Checkpoint) -> dict[str, Any]:
    """The state the child run at ``latest`` started with: the input of its input checkpoint
    (among the child thread's ``checkpoints``)."""
    for checkpoint in checkpoints:
        if checkpoint.run_id == latest.run_id and checkpoint.kind is CheckpointKind.INPUT:
            started = checkpoint.metadata.get("update")
            return dict(started) if isinstance(started, Mapping) else {}
    return {}


#: How many of the parent's checkpoints :func:`parent_updates` reads at most.
_MOST_UPDATES = 100


def parent_updates(
    step: Checkpoint, since: Any, get: Callable[[str], Checkpoint | None]
) -> list[Mapping[str, Any]] | None:
    """The updates the parent's thread went through after checkpoint ``since`` (where the child
    run last started or resumed) up to ``step`` (the step now running the subgraph node), oldest
    first: those of the resumes and ``update_state`` calls between them, read back through
    ``get`` (a checkpoint by id).  ``None`` when ``since`` is not on that line (an earlier
    version's child run, a step run in between): the caller falls back on the changes of the
    parent's state."""
    if not isinstance(since, str):
        return None
    updates: list[Mapping[str, Any]] = []
    current: Checkpoint | None = step
    for _ in range(_MOST_UPDATES):
        if current is None:
            return None
        if current.checkpoint_id == since:
            return updates[::-1]
        if current.kind in (CheckpointKind.RESUME, CheckpointKind.UPDATE):
            update = current.metadata.get("update")
            if isinstance(update, Mapping) and update:
                updates.append(update)
        elif current.kind is not CheckpointKind.FORK:
            return None
        if current.parent_id is None:
            return None
        current = get(current.parent_id)
    return None


def child_input(
    schema: Mapping[str, Channel],
    latest: Checkpoint | None,
    started: Mapping[str, Any] | None,
    values: Mapping[str, Any],
    updates: Sequence[Mapping[str, Any]] | None = None,
) -> tuple[GraphInput, Checkpoint | None]:
    """How the child run goes on from the child thread's ``latest``, given the node's input
    ``values``: resumed (when it ``started`` with a state) with the parent's ``updates`` since
    (merged into the child's own state: the update that takes it there), or without them the
    changes the parent's state went through since it started; or a new run whose state is
    ``values`` alone (not merged with the thread's earlier runs'), after ``latest``; and the
    checkpoint it goes on from (for a new run, ``latest`` with the initial values:
    ``Engine.begin_from(..., fresh=True)`` stores it whole)."""
    if started is not None and latest is not None and updates is not None:
        merged = dict(latest.values)
        for update in updates:
            apply_update(schema, merged, update, "the parent's update")
        return GraphInput.resume(changes(schema, latest.values, merged) or None), latest
    if started is not None:
        return GraphInput.resume(changes(schema, started, values) or None), latest
    base = latest
    if base is not None:
        base = dataclasses.replace(base, values=initial_values(schema))
    return GraphInput.args(dict(values)), base
