"""Port of LangGraph4j's ``state/AgentStateTest`` (``langgraph4j-core``).

LangGraph4j's tests call ``AgentState.updateState(state, update, schema)``, its merge of one
update through the schema's channels.  SPEC §2 names that merge as what happens to a node's
update, so here each update is a node's: :func:`update_state` runs a one-node graph from the
given state.

Where SPEC differs: in LangGraph4j a ``null`` update value removes the key (resets an appender),
as ``MARK_FOR_RESET`` does; in Python ``None`` is a value like any other (SPEC §2: a key without
a reducer is overwritten), and ``MARK_FOR_REMOVAL`` deletes a key, appender or not.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from langgraph_celery import (
    END,
    MARK_FOR_REMOVAL,
    START,
    AgentState,
    Channel,
    Channels,
    ReplaceAllWith,
    StateGraph,
)

MESSAGES_SCHEMA: dict[str, Channel] = {"messages": Channels.appender()}


def update_state(
    data: Mapping[str, Any], update: Mapping[str, Any], schema: Mapping[str, Channel]
) -> dict[str, Any]:
    """``AgentState.updateState(data, update, schema)``: ``data`` with ``update`` merged."""
    graph = (
        StateGraph(dict(schema))
        .add_node("update", lambda state: dict(update))
        .add_edge(START, "update")
        .add_edge("update", END)
        .compile()
    )
    return dict(graph.invoke(dict(data)).data)


def messages(data: Mapping[str, Any]) -> list[Any]:
    return list(AgentState(data).value("messages", []))


def test_clear_appender() -> None:
    """``AgentStateTest.clearAppenderTest``: the appender starts empty (its default), takes
    single values, and is cleared (here with ``MARK_FOR_REMOVAL``; Java's ``null``)."""
    schema = {"messages": Channels.appender(list)}
    state = update_state({}, {}, schema)
    assert state == {"messages": []}

    state = update_state(state, {"messages": "item1"}, schema)
    assert messages(state) == ["item1"]
    state = update_state(state, {"messages": "item2"}, schema)
    assert messages(state) == ["item1", "item2"]

    state = update_state(state, {"messages": MARK_FOR_REMOVAL}, schema)
    assert messages(state) == []


def test_remove_data_from_state() -> None:
    """``AgentStateTest.removeDataFromStateTest``: ``MARK_FOR_REMOVAL`` (Java's
    ``MARK_FOR_RESET``) deletes a key; ``None`` (Java's ``null``, which also deletes there) is
    kept as a value."""
    data = update_state({}, {"attr1": "test"}, {})
    assert data == {"attr1": "test"}

    assert update_state(data, {"attr1": None}, {}) == {"attr1": None}

    data = update_state({}, {"attr1": "test"}, {})
    assert data == {"attr1": "test"}
    assert update_state(data, {"attr1": MARK_FOR_REMOVAL}, {}) == {}


def test_replace_data_from_state() -> None:
    """``AgentStateTest.replaceDataFromStateTest``: a list is appended element by element,
    ``ReplaceAllWith`` replaces the list, with a list or (``ReplaceAllWith.of("x1")``) one
    value."""
    data = update_state({}, {"messages": ["v1", "v2"]}, MESSAGES_SCHEMA)
    assert data == {"messages": ["v1", "v2"]}

    data = update_state(data, {"messages": "v3"}, MESSAGES_SCHEMA)
    assert messages(data) == ["v1", "v2", "v3"]

    data = update_state(data, {"messages": ReplaceAllWith(["a1", "a2"])}, MESSAGES_SCHEMA)
    assert messages(data) == ["a1", "a2"]

    data = update_state(data, {"messages": ReplaceAllWith("x1")}, MESSAGES_SCHEMA)
    assert messages(data) == ["x1"]

    data = update_state(data, {"messages": ["v1", "v2", "v3"]}, MESSAGES_SCHEMA)
    assert messages(data) == ["x1", "v1", "v2", "v3"]


def test_appender_keeps_distinct_values_with_colliding_hash_codes() -> None:
    """``AgentStateTest.appenderKeepsDistinctValuesWithCollidingHashCodes``: ``"FB"`` and
    ``"Ea"`` share a Java hash code; the appender keeps both (it appends, whatever the values'
    hashes; ``RemoveByHash`` matches by equality)."""
    schema = {"messages": Channels.appender(list)}
    data = update_state({"messages": ["FB"]}, {"messages": "Ea"}, schema)
    assert data["messages"] == ["FB", "Ea"]
