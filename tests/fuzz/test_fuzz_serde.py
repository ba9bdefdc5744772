"""Serializer round trips through the stores: what a node puts in the state comes back from
``SqlSaver`` on PostgreSQL and SQLite exactly as ``MemorySaver`` gives it back (same types,
same values), as checkpoint values and as pending writes.

``tests/test_serde.py`` checks the serializer on its own; here the text also goes through the
database driver and a ``text`` column: non-ASCII and astral characters, NUL, lone surrogates
(a ``str`` that UTF-8 cannot encode), big integers, deep nesting, registered types and the
library's constants.
"""

from __future__ import annotations

import enum
import math
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import date, datetime, time
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest
from fuzz_support import fuzz_settings
from hypothesis import given
from hypothesis import strategies as st
from pydantic import BaseModel

from langgraph_celery import MARK_FOR_REMOVAL, RemoveByHash, ReplaceAllWith
from langgraph_celery.checkpoint import BaseCheckpointSaver, MemorySaver, SqlSaver
from langgraph_celery.checkpoint.base import Checkpoint
from langgraph_celery.serde import JsonSerializer
from services import make_saver


class Mood(enum.Enum):
    CALM = "calm"
    BUSY = 2


@dataclass(frozen=True)
class Pin:
    x: int
    label: str


class Note(BaseModel):
    text: str
    when: datetime
    tags: tuple[str, ...] = ()


def _serializer() -> JsonSerializer:
    return JsonSerializer(types=[Mood, Pin, Note])


@pytest.fixture(params=["postgres", "sqlite"])
def stores(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[list[BaseCheckpointSaver]]:
    """A SQL saver of the parameter's kind, and a ``MemorySaver`` to compare it with."""
    postgres = request.getfixturevalue("postgres_url") if request.param == "postgres" else None
    saver = make_saver(
        request.param, tmp_path=tmp_path, postgres_url=postgres, serializer=_serializer()
    )
    try:
        yield [saver, MemorySaver(_serializer())]
    finally:
        assert isinstance(saver, SqlSaver)
        saver.dispose()


#: Text that stores have trouble with, drawn often (random text seldom hits them).
_SPECIAL = ["", "\x00", "a\x00b", "\ud800", "x\udfffy", "é", "\U0001f600", "\u2028", '"\\']
_text = st.one_of(
    st.sampled_from(_SPECIAL),
    st.text(st.characters(exclude_categories=()), max_size=12),  # any code point at all
)
_scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(),
    st.integers(min_value=2**63).map(lambda n: n * 7),
    st.floats(),  # NaN and infinities too
    _text,
    st.binary(max_size=8),
    st.datetimes(timezones=st.none() | st.timezones()),
    st.dates(),
    st.times(),
    st.timedeltas(),
    st.uuids(),
    st.decimals(allow_nan=False),
    st.sampled_from(list(Mood)),
    st.builds(Pin, x=st.integers(), label=_text),
    st.builds(Note, text=_text, when=st.datetimes(), tags=st.lists(_text).map(tuple)),
    st.just(MARK_FOR_REMOVAL),
    st.builds(RemoveByHash, st.text(max_size=4)),
    st.builds(ReplaceAllWith, st.lists(st.integers(), max_size=3)),
)
_hashable = st.recursive(
    st.one_of(st.none(), st.booleans(), st.integers(), _text, st.binary(max_size=4), st.dates()),
    lambda inner: st.tuples(inner, inner) | st.frozensets(inner, max_size=3),
    max_leaves=4,
)
_values = st.recursive(
    _scalars | _hashable,
    lambda inner: (
        st.lists(inner, max_size=4)
        | st.tuples(inner, inner)
        | st.sets(_hashable, max_size=3)
        | st.dictionaries(_text, inner, max_size=4)
        | st.dictionaries(_hashable, inner, max_size=3)
        | st.dictionaries(st.sampled_from(["__lgc__", "v", "t"]), inner, max_size=3)
    ),
    max_leaves=16,
)
_deep = st.integers(50, 200).map(lambda depth: _nest(depth))


def _nest(depth: int) -> Any:
    value: Any = "bottom"
    for level in range(depth):
        value = [value] if level % 2 else {"k": value}
    return value


def same(a: Any, b: Any) -> bool:
    """Equal, with the same types all the way down (``1 == 1.0 == True`` hides nothing)."""
    if type(a) is not type(b):
        return False
    if isinstance(a, float) and math.isnan(a):
        return math.isnan(b)
    if isinstance(a, list | tuple):
        return len(a) == len(b) and all(same(x, y) for x, y in zip(a, b, strict=True))
    if isinstance(a, dict):
        return list(a) == list(b) and all(same(a[k], b[k]) for k in a)
    if isinstance(a, datetime | time):
        return bool(a == b and a.tzinfo == b.tzinfo and a.fold == b.fold)
    if isinstance(a, Decimal):
        return str(a) == str(b)
    equal: bool = a == b
    return equal


@fuzz_settings(100)
@given(state=st.dictionaries(_text, _values | _deep, max_size=4), update=_values)
def test_state_and_writes_round_trip_exactly_through_sql_savers(
    stores: list[BaseCheckpointSaver], state: dict[str, Any], update: Any
) -> None:
    thread = f"serde-{uuid.uuid4().hex[:8]}"
    back = []
    for saver in stores:
        checkpoint = Checkpoint(
            thread_id=thread,
            checkpoint_id="c1",
            run_id="r1",
            step=0,
            values=state,
            extra={"when": date(2024, 1, 1)},
        )
        saver.put(checkpoint)
        saver.put_writes(thread, "c1", "task", "node", {"update": update})
        stored = saver.get(thread, "c1")
        assert stored is not None
        (write,) = saver.get_writes(thread, "c1")
        back.append((stored.values, write.update["update"], stored.extra))
    sql, memory = back
    assert same(memory[0], state) and same(memory[1], update)
    assert same(sql[0], state), (sql[0], state)
    assert same(sql[1], update), (sql[1], update)
    assert same(sql[2], memory[2])
