"""SPEC §2: state, channels and reducers."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

import pytest

from langgraph_celery import (
    END,
    MARK_FOR_REMOVAL,
    START,
    AgentState,
    Channel,
    Channels,
    RemoveByHash,
    ReplaceAllWith,
    RunnableConfig,
    StateGraph,
)
from langgraph_celery.graph.state import InTurn, apply_update, compose_updates
from langgraph_celery.serde import JsonSerializer

Update = Mapping[str, Any]


def returning(update: Update) -> Callable[[AgentState], dict[str, Any]]:
    def action(state: AgentState) -> dict[str, Any]:
        return dict(update)

    return action


def run_updates(
    schema: Mapping[str, Channel] | None,
    updates: list[Update],
    initial: Update | None = None,
) -> dict[str, Any]:
    """Run a chain of nodes, node ``i`` returning ``updates[i]``; the final state's data."""
    graph = StateGraph(schema)
    previous = START
    for index, update in enumerate(updates):
        name = f"n{index}"
        graph.add_node(name, returning(update))
        graph.add_edge(previous, name)
        previous = name
    graph.add_edge(previous, END)
    return dict(graph.compile().invoke(dict(initial or {})).data)


# -- AgentState ---------------------------------------------------------------------------------


def test_agent_state_value_and_data() -> None:
    state = AgentState({"a": 1, "b": None})
    assert state.value("a") == 1
    assert state.value("missing") is None
    assert state.value("missing", 42) == 42
    assert state.value("b", "fallback") is None
    assert dict(state.data) == {"a": 1, "b": None}
    assert state["a"] == 1
    assert len(state) == 2
    assert set(state) == {"a", "b"}
    assert AgentState().data == {}


def test_agent_state_data_is_read_only() -> None:
    state = AgentState({"a": 1})
    with pytest.raises(TypeError):
        state.data["a"] = 2  # type: ignore[index]
    with pytest.raises(TypeError):
        state.data["new"] = 2  # type: ignore[index]
    with pytest.raises(AttributeError):
        state.data = {}  # type: ignore[misc]
    assert state.value("a") == 1


def test_agent_state_copies_its_input() -> None:
    source = {"a": 1}
    state = AgentState(source)
    source["a"] = 2
    assert state.value("a") == 1


# -- Channel ------------------------------------------------------------------------------------


def test_key_without_channel_is_overwritten() -> None:
    assert run_updates(None, [{"k": 1}, {"k": 2}]) == {"k": 2}


def test_channel_without_reducer_overwrites() -> None:
    assert run_updates({"k": Channel()}, [{"k": [1]}, {"k": [2]}]) == {"k": [2]}


def test_channel_reducer_merges_old_and_new() -> None:
    schema = {"total": Channel(lambda old, new: (old or 0) + new)}
    assert run_updates(schema, [{"total": 2}, {"total": 5}], {"total": 10}) == {"total": 17}


def test_channel_default_value_starts_the_key() -> None:
    schema = {"total": Channel(lambda old, new: old + new, default=100)}
    assert run_updates(schema, [{"total": 1}]) == {"total": 101}
    assert run_updates(schema, []) == {"total": 100}


def test_channel_default_callable_gives_fresh_values() -> None:
    channel = Channel(default=list)
    first, second = channel.default(), channel.default()
    assert first == [] and second == []
    assert first is not second
    assert Channel(default=7).default() == 7
    assert Channel().default() is None


def test_channel_default_is_seen_by_first_node() -> None:
    seen: list[Any] = []
    graph = StateGraph({"items": Channels.appender(), "n": Channel(default=3)})
    graph.add_node("a", lambda s: seen.append(dict(s.data)))
    graph.add_edge(START, "a").add_edge("a", END)
    graph.compile().invoke({})
    assert seen == [{"items": [], "n": 3}]


def test_custom_reducer_seed_uppercase_example() -> None:
    schema = {"property": Channel(lambda old, new: new.upper())}
    assert run_updates(schema, [{"property": "hello"}]) == {"property": "HELLO"}
    assert run_updates(schema, [{"property": "a"}, {"property": "bc"}]) == {"property": "BC"}


# -- appender -----------------------------------------------------------------------------------


def appender_run(updates: list[Any], initial: list[Any] | None = None) -> list[Any]:
    schema = {"messages": Channels.appender()}
    start = {"messages": initial} if initial is not None else {}
    result = run_updates(schema, [{"messages": u} for u in updates], start)
    return list(result["messages"])


def test_appender_appends_a_list_element_wise() -> None:
    assert appender_run([["a", "b"], ["c"]]) == ["a", "b", "c"]


def test_appender_appends_a_single_value() -> None:
    assert appender_run(["a", "b"]) == ["a", "b"]
    assert appender_run([{"role": "user"}]) == [{"role": "user"}]


def test_appender_seed_example_messages() -> None:
    assert appender_run(["message1", ["message2", "message2.1"]]) == [
        "message1",
        "message2",
        "message2.1",
    ]


def test_appender_remove_by_hash_removes_first_equal_element() -> None:
    assert appender_run(["message1", ["message2", "message2.1"], RemoveByHash("message2.1")]) == [
        "message1",
        "message2",
    ]
    assert appender_run([["x", "y", "x"], RemoveByHash("x")]) == ["y", "x"]
    assert appender_run([["x"], RemoveByHash("absent")]) == ["x"]


def test_appender_replace_all_with() -> None:
    assert appender_run(["message1", ["message2", "message2.1"], ReplaceAllWith(["a1", "a2"])]) == [
        "a1",
        "a2",
    ]
    assert appender_run([["x"], ReplaceAllWith([])]) == []


def test_replace_all_with_a_single_value_is_a_list_of_one() -> None:
    """As LangGraph4j's ``ReplaceAllWith.of(value)``: a string, bytes, a mapping or a value
    that is not iterable is one element; another iterable gives its elements."""
    assert ReplaceAllWith("x1").values == ["x1"]
    assert ReplaceAllWith(b"x1").values == [b"x1"]
    assert ReplaceAllWith({"role": "user"}).values == [{"role": "user"}]
    assert ReplaceAllWith(7).values == [7]
    assert ReplaceAllWith(("a", "b")).values == ["a", "b"]
    assert ReplaceAllWith(iter(["a"])).values == ["a"]
    assert appender_run([["x", "y"], ReplaceAllWith("z")]) == ["z"]


def test_appender_removals_apply_before_appends_spec_example() -> None:
    assert appender_run([["m3", RemoveByHash("m2")]], initial=["m1", "m2"]) == ["m1", "m3"]


def test_appender_remove_does_not_remove_value_appended_in_same_update() -> None:
    assert appender_run([["m2", RemoveByHash("m2")]], initial=["m1"]) == ["m1", "m2"]


def test_appender_default_factory() -> None:
    schema = {"messages": Channels.appender(lambda: ["seed"])}
    assert run_updates(schema, [{"messages": "x"}]) == {"messages": ["seed", "x"]}
    assert run_updates({"messages": Channels.appender()}, []) == {"messages": []}


def test_appender_default_is_not_shared_between_runs() -> None:
    graph = StateGraph({"messages": Channels.appender()})
    graph.add_node("a", lambda s: {"messages": "x"})
    graph.add_edge(START, "a").add_edge("a", END)
    compiled = graph.compile()
    assert list(compiled.invoke({})["messages"]) == ["x"]
    assert list(compiled.invoke({})["messages"]) == ["x"]


def test_appender_input_is_reduced() -> None:
    schema = {"messages": Channels.appender(lambda: ["seed"])}
    assert run_updates(schema, [], {"messages": "in"}) == {"messages": ["seed", "in"]}


def test_appender_is_a_channel() -> None:
    assert isinstance(Channels.appender(), Channel)


# -- MARK_FOR_REMOVAL ---------------------------------------------------------------------------


def test_mark_for_removal_deletes_plain_key() -> None:
    assert run_updates(None, [{"a": 1, "b": 2}, {"a": MARK_FOR_REMOVAL}]) == {"b": 2}


def test_mark_for_removal_deletes_channel_key() -> None:
    schema = {"messages": Channels.appender()}
    result = run_updates(schema, [{"messages": ["x"], "k": 1}, {"messages": MARK_FOR_REMOVAL}])
    assert result == {"k": 1}


def test_mark_for_removal_of_absent_key_is_harmless() -> None:
    assert run_updates(None, [{"a": 1}, {"zzz": MARK_FOR_REMOVAL}]) == {"a": 1}


def test_mark_for_removal_seen_by_next_node() -> None:
    seen: list[dict[str, Any]] = []
    graph = StateGraph()
    graph.add_node("a", lambda s: {"gone": MARK_FOR_REMOVAL})
    graph.add_node("b", lambda s: seen.append(dict(s.data)))
    graph.add_edge(START, "a").add_edge("a", "b").add_edge("b", END)
    graph.compile().invoke({"gone": 1, "kept": 2})
    assert seen == [{"kept": 2}]


# -- state_factory ------------------------------------------------------------------------------


class CounterState(AgentState):
    @property
    def count(self) -> int:
        return int(self.value("count", 0))

    @property
    def names(self) -> list[str]:
        return list(self.value("names", []))


def test_state_factory_subclass_reaches_nodes_routes_and_result() -> None:
    seen_types: list[type] = []

    def step(state: CounterState) -> dict[str, Any]:
        seen_types.append(type(state))
        return {"count": state.count + 1, "names": [f"n{state.count}"]}

    def route(state: CounterState) -> str:
        seen_types.append(type(state))
        return "again" if state.count < 3 else "done"

    graph = StateGraph({"names": Channels.appender()}, state_factory=CounterState)
    graph.add_node("step", step)
    graph.add_edge(START, "step")
    graph.add_conditional_edges("step", route, {"again": "step", "done": END})
    result = graph.compile().invoke({})
    assert isinstance(result, CounterState)
    assert result.count == 3
    assert result.names == ["n0", "n1", "n2"]
    assert seen_types == [CounterState] * 6


def test_state_factory_receives_the_data() -> None:
    built: list[dict[str, Any]] = []

    def factory(data: Mapping[str, Any]) -> AgentState:
        built.append(dict(data))
        return AgentState(data)

    graph = StateGraph(state_factory=factory)
    graph.add_node("a", lambda s: {"x": s.value("x") + 1})
    graph.add_edge(START, "a").add_edge("a", END)
    assert graph.compile().invoke({"x": 1}).data == {"x": 2}
    assert {"x": 1} in built


# -- clone_state --------------------------------------------------------------------------------


def mutating_graph(seen: list[Any]) -> Callable[[RunnableConfig], dict[str, Any]]:
    def mutate(state: AgentState) -> None:
        items = state["items"]
        seen.append(items)
        items.append("mutated")
        state["nested"]["k"] = "mutated"

    def observe(state: AgentState) -> dict[str, Any]:
        return {"observed": list(state["items"])}

    graph = StateGraph()
    graph.add_node("mutate", mutate)
    graph.add_node("observe", observe)
    graph.add_edge(START, "mutate").add_edge("mutate", "observe").add_edge("observe", END)
    compiled = graph.compile()

    def run(config: RunnableConfig) -> dict[str, Any]:
        return dict(compiled.invoke({"items": ["a"], "nested": {"k": "v"}}, config).data)

    return run


def test_node_mutating_its_state_does_not_change_the_run_state() -> None:
    seen: list[Any] = []
    result = mutating_graph(seen)(RunnableConfig())
    assert result == {"items": ["a"], "nested": {"k": "v"}, "observed": ["a"]}
    assert seen == [["a", "mutated"]]
    assert seen[0] is not result["items"]


def test_clone_state_false_shares_the_data() -> None:
    seen: list[Any] = []
    result = mutating_graph(seen)(RunnableConfig(clone_state=False))
    assert result["observed"] == ["a", "mutated"]
    assert result["items"] == ["a", "mutated"]
    assert result["nested"] == {"k": "mutated"}
    assert seen[0] is result["items"]


def test_parallel_nodes_get_their_own_copies() -> None:
    graph = StateGraph()

    def left(state: AgentState) -> dict[str, Any]:
        state["shared"].append("left")
        return {"left": list(state["shared"])}

    def right(state: AgentState) -> dict[str, Any]:
        state["shared"].append("right")
        return {"right": list(state["shared"])}

    graph.add_node("left", left).add_node("right", right)
    graph.add_edge(START, "left").add_edge(START, "right")
    graph.add_edge("left", END).add_edge("right", END)
    result = graph.compile().invoke({"shared": []})
    assert result.data == {"shared": [], "left": ["left"], "right": ["right"]}


# -- one update standing for two (a before-call hook's and its node's) ---------------------------


def _merge_keys(old: dict[str, int] | None, new: dict[str, int]) -> dict[str, int]:
    return {**(old or {}), **new}


COMPOSE_SCHEMA: dict[str, Channel] = {
    "log": Channels.appender(),
    "total": Channel(lambda old, new: old + new, default=0),
    "keys": Channel(_merge_keys, default=dict),
}

COMPOSE_CASES: list[tuple[Update, Update]] = [
    ({"log": "h"}, {"log": ["n1", "n2"]}),
    ({"log": ["h", RemoveByHash("x")]}, {"log": "n"}),
    ({"log": ReplaceAllWith(["r"])}, {"log": "n"}),
    ({"log": "h"}, {"log": RemoveByHash("h")}),
    ({"log": "h"}, {"log": ReplaceAllWith(["n"])}),
    ({"log": MARK_FOR_REMOVAL}, {"log": "n"}),
    ({"log": "h"}, {"log": MARK_FOR_REMOVAL}),
    ({"total": 2}, {"total": 3}),
    ({"total": MARK_FOR_REMOVAL}, {"total": 3}),
    ({"keys": {"a": 1}}, {"keys": {"a": 2, "b": 2}}),
    ({"plain": "h", "only_hook": 1}, {"plain": "n", "only_node": 2}),
    ({"plain": "h"}, {"plain": MARK_FOR_REMOVAL}),
    ({"plain": MARK_FOR_REMOVAL}, {"plain": "n"}),
    ({}, {"log": "n"}),
    ({"log": "h"}, {}),
]


@pytest.mark.parametrize(("first", "then"), COMPOSE_CASES)
def test_composed_update_merges_as_its_two_updates_in_turn(first: Update, then: Update) -> None:
    initial = {"log": ["x", "h"], "total": 1, "keys": {"z": 0}, "plain": "p"}
    expected = dict(initial)
    apply_update(COMPOSE_SCHEMA, expected, first)
    apply_update(COMPOSE_SCHEMA, expected, then)
    composed = compose_updates(COMPOSE_SCHEMA, first, then)
    merged = dict(initial)
    apply_update(COMPOSE_SCHEMA, merged, composed)
    assert merged == expected
    # and after a trip through the checkpoint serializer
    loaded = JsonSerializer().loads(JsonSerializer().dumps(composed))
    assert loaded == composed
    merged = dict(initial)
    apply_update(COMPOSE_SCHEMA, merged, loaded)
    assert merged == expected


def test_composed_appends_are_one_list_and_other_writes_in_turn() -> None:
    assert compose_updates(COMPOSE_SCHEMA, {"log": "h"}, {"log": ["n"]}) == {"log": ["h", "n"]}
    assert compose_updates(COMPOSE_SCHEMA, {"total": 2}, {"total": 3}) == {"total": InTurn((2, 3))}
    three = compose_updates(
        COMPOSE_SCHEMA, compose_updates(COMPOSE_SCHEMA, {"total": 1}, {"total": 2}), {"total": 3}
    )
    assert three == {"total": InTurn((1, 2, 3))}
