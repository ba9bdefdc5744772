"""SPEC §9: typed state, ``StateGraph(TypedDict | dataclass | pydantic model)``, in process over
every saver (the Celery runs are in ``tests/celery/test_celery_parity.py``)."""

from __future__ import annotations

import dataclasses
import enum
import functools
import operator
from typing import Annotated, Any, NotRequired, TypedDict

import pytest
from pydantic import BaseModel, ConfigDict, Field

from langgraph_celery import (
    END,
    MARK_FOR_REMOVAL,
    START,
    AgentState,
    Channel,
    Channels,
    Command,
    CompileConfig,
    GraphDefinitionError,
    GraphInput,
    InvalidUpdateError,
    RunnableConfig,
    StateGraph,
)
from langgraph_celery.checkpoint import BaseCheckpointSaver, MemorySaver
from langgraph_celery.graph._typed import typed_schema
from langgraph_celery.serde import JsonSerializer

# -- schemas (at module level: their annotations are resolved in this module) --------------------


def keep_max(old: int, new: int) -> int:
    return max(old, new)


class ChatDict(TypedDict):
    messages: Annotated[list[str], operator.add]
    log: NotRequired[Annotated[list[str], Channels.appender()]]
    top: Annotated[int, keep_max]
    topic: str
    note: Annotated[str, "a description, not a reducer"]


@dataclasses.dataclass
class ChatData:
    topic: str
    messages: Annotated[list[str], operator.add] = dataclasses.field(default_factory=list)
    log: Annotated[list[str], Channels.appender()] = dataclasses.field(
        default_factory=lambda: ["start"]
    )
    count: int = 0
    owner: str | None = None


class Mood(enum.Enum):
    CALM = "calm"
    ANGRY = "angry"


class Message(BaseModel):
    role: str
    text: str
    mood: Mood = Mood.CALM


@dataclasses.dataclass(frozen=True)
class Point:
    x: int
    y: int


class ChatModel(BaseModel):
    messages: Annotated[list[Message], operator.add] = []
    count: int = Field(default=0, ge=0)
    topic: str | None = None
    where: Point | None = None
    tags: Annotated[list[str], Channels.appender()] = []


class StrictModel(BaseModel):
    model_config = ConfigDict(strict=True)
    count: int = 0


def single(schema: Any, action: Any, name: str = "node") -> StateGraph:
    """START -> name -> END."""
    return StateGraph(schema).add_node(name, action).add_edge(START, name).add_edge(name, END)


# -- TypedDict ----------------------------------------------------------------------------------


def test_a_typed_dict_s_fields_are_keys_and_annotated_reducers_are_channels() -> None:
    seen: list[Any] = []

    def first(state: AgentState) -> dict[str, Any]:
        seen.append(state)
        return {"messages": ["a"], "log": "one", "top": 5, "topic": "x", "note": "n1"}

    def second(state: AgentState) -> dict[str, Any]:
        return {"messages": ["b"], "log": ["two"], "top": 3, "topic": "y", "note": "n2"}

    graph = StateGraph(ChatDict).add_node("first", first).add_node("second", second)
    graph.add_edge(START, "first").add_edge("first", "second").add_edge("second", END)
    state = graph.compile().invoke({"messages": ["input"]})

    # reducers: a function of two arguments, a Channel; the others are overwritten
    assert dict(state) == {
        "messages": ["input", "a", "b"],
        "log": ["one", "two"],
        "top": 5,
        "topic": "y",
        "note": "n2",
    }
    # what a node gets is an AgentState over the data, as with a mapping schema
    assert isinstance(seen[0], AgentState)
    assert seen[0]["messages"] == ["input"]


def test_reducer_fields_start_with_their_types_zero_value() -> None:
    state = single(ChatDict, lambda s: None).compile().invoke({})
    # list -> [], int -> 0, a Channel's own default; plain fields start absent
    assert dict(state) == {"messages": [], "log": [], "top": 0}


def test_a_typed_dict_refuses_a_key_that_is_not_a_field() -> None:
    graph = single(ChatDict, lambda s: {"topic": "x", "mesages": ["typo"]}, "writer")
    with pytest.raises(InvalidUpdateError) as caught:
        graph.compile().invoke({})
    message = str(caught.value)
    assert "node 'writer' wrote key 'mesages', which is not a field" in message
    assert "ChatDict (log, messages, note, top, topic)" in message


def test_a_typing_extensions_typed_dict_is_a_schema() -> None:
    extensions = pytest.importorskip("typing_extensions")  # pydantic's dependency
    schema = extensions.TypedDict("ExtState", {"log": Annotated[list[str], operator.add]})
    state = single(schema, lambda s: {"log": ["x"]}).compile().invoke({"log": ["a"]})
    assert dict(state) == {"log": ["a", "x"]}


# -- dataclass ----------------------------------------------------------------------------------


def test_a_dataclass_s_defaults_are_the_keys_defaults() -> None:
    state = single(ChatData, lambda s: {"messages": ["m"], "log": "l"}).compile().invoke({})
    # field defaults, None included (owner); the field default wins over the Channel's
    assert dict(state) == {"messages": ["m"], "log": ["start", "l"], "count": 0, "owner": None}


def test_a_dataclass_s_updates_are_not_validated() -> None:
    state = single(ChatData, lambda s: {"count": "many", "topic": 3}).compile().invoke({})
    assert state["count"] == "many" and state["topic"] == 3


def test_an_update_nothing_validates_is_checked_without_a_copy() -> None:
    # (a TypedDict's or a dataclass's fields have no validators: the keys are checked, the
    # update is not copied; a pydantic model's update is a copy holding the validated values)
    for schema in (ChatDict, ChatData):
        typed = typed_schema(schema)
        update = {"messages": ["m"], "topic": "t"}
        assert typed.check_update("node", update, typed.channels) is update
        assert typed.check_write("the input", update, typed.channels) is update
        with pytest.raises(InvalidUpdateError, match="wrote key 'extra'"):
            typed.check_update("node", {"extra": 1}, typed.channels)
    model = typed_schema(ChatModel)
    update = {"count": "5"}
    checked = model.check_update("node", update, model.channels)
    assert checked == {"count": 5} and checked is not update and update == {"count": "5"}


def test_a_dataclass_refuses_a_key_that_is_not_a_field() -> None:
    with pytest.raises(InvalidUpdateError, match=r"'node' wrote key 'extra'.* schema ChatData"):
        single(ChatData, lambda s: {"extra": 1}).compile().invoke({})


# -- pydantic ------------------------------------------------------------------------------------


def test_a_pydantic_model_s_defaults_and_reducers() -> None:
    def talk(state: AgentState) -> dict[str, Any]:
        return {"messages": [Message(role="ai", text="hi")], "tags": "t", "count": 1}

    state = single(ChatModel, talk).compile().invoke({})
    assert dict(state) == {
        "messages": [Message(role="ai", text="hi")],
        "count": 1,
        "topic": None,
        "where": None,
        "tags": ["t"],
    }


def test_a_bad_value_names_the_node_and_the_field() -> None:
    graph = single(ChatModel, lambda s: {"count": "many"}, "counter")
    with pytest.raises(InvalidUpdateError) as caught:
        graph.compile().invoke({})
    message = str(caught.value)
    assert "node 'counter' wrote an invalid value for field 'count' of ChatModel" in message
    assert "valid integer" in message


def test_field_constraints_are_checked() -> None:
    with pytest.raises(InvalidUpdateError, match=r"field 'count'.*greater than or equal to 0"):
        single(ChatModel, lambda s: {"count": -1}).compile().invoke({})


def test_a_reducer_field_is_checked_on_what_the_reducer_makes() -> None:
    # a list of str where list[Message] is expected: the merged list is invalid
    graph = single(ChatModel, lambda s: {"messages": ["not a message"]}, "talker")
    with pytest.raises(InvalidUpdateError) as caught:
        graph.compile().invoke({"messages": [Message(role="user", text="q")]})
    message = str(caught.value)
    assert "node 'talker' wrote an invalid value for field 'messages'" in message
    assert "at [0]:" in message  # the element of the update (not of the merged list)


def test_the_input_resume_and_update_state_are_checked_as_node_updates_are() -> None:
    """Every write to the state fits the schema: a bad input is refused before anything is
    stored, naming what wrote it and every bad field."""
    saver = MemorySaver()
    talk = lambda s: {"messages": [Message(role="ai", text="hi")]}  # noqa: E731
    graph = single(ChatModel, talk).compile(CompileConfig(checkpoint_saver=saver))
    config = RunnableConfig(thread_id="typed-writes")
    with pytest.raises(InvalidUpdateError, match="the input wrote an invalid value for field"):
        graph.invoke({"messages": ["raw input"]}, config)
    with pytest.raises(InvalidUpdateError, match="the input wrote key 'bogus', which is not"):
        graph.invoke({"bogus": 1}, config)
    assert saver.get("typed-writes") is None
    with pytest.raises(InvalidUpdateError) as raised:
        graph.invoke({"count": "zz", "where": 3}, config)
    assert "invalid values for fields 'count', 'where' of ChatModel" in str(raised.value)
    graph.invoke({"count": "5"}, config)
    assert graph.get_state(config).state.value("count") == 5
    with pytest.raises(InvalidUpdateError, match="update_state's values wrote an invalid value"):
        graph.update_state(config, {"count": "zz"})
    assert graph.get_state(config).state.value("count") == 5


def test_plain_fields_store_the_validated_value() -> None:
    state = (
        single(ChatModel, lambda s: {"count": "5", "where": {"x": 1, "y": 2}}).compile().invoke({})
    )
    assert state["count"] == 5
    assert state["where"] == Point(1, 2)


def test_a_strict_model_converts_nothing() -> None:
    with pytest.raises(InvalidUpdateError, match="field 'count' of StrictModel"):
        single(StrictModel, lambda s: {"count": "5"}).compile().invoke({})
    assert single(StrictModel, lambda s: {"count": 5}).compile().invoke({}) == {"count": 5}


def test_a_field_may_be_removed() -> None:
    state = single(ChatModel, lambda s: {"topic": MARK_FOR_REMOVAL}).compile().invoke({})
    assert "topic" not in state


def test_a_pydantic_model_refuses_a_key_that_is_not_a_field() -> None:
    with pytest.raises(InvalidUpdateError, match="'node' wrote key 'mood', which is not a field"):
        single(ChatModel, lambda s: {"mood": "calm"}).compile().invoke({})


def test_a_command_s_update_and_a_hook_s_update_are_checked() -> None:
    graph = StateGraph(ChatModel)
    graph.add_node("route", lambda s: Command(END, {"count": "x"}), [END])
    graph.add_edge(START, "route")
    with pytest.raises(InvalidUpdateError, match="node 'route' wrote an invalid value for field"):
        graph.compile().invoke({})

    hooked = single(ChatModel, lambda s: {"count": 1}, "n")
    hooked.add_before_call_node_hook(lambda node, state, config: {"count": -5})
    # the hook's update is part of the node's: the node's value for count wins and is valid
    assert hooked.compile().invoke({})["count"] == 1
    hooked.add_before_call_node_hook(lambda node, state, config: {"unknown": 1})
    with pytest.raises(InvalidUpdateError, match="node 'n' wrote key 'unknown'"):
        hooked.compile().invoke({})


def test_nodes_of_one_step_are_checked_each() -> None:
    def fan(*nodes: tuple[str, Any]) -> StateGraph:
        graph = StateGraph(ChatModel)
        for name, action in nodes:
            graph.add_node(name, action).add_edge(START, name).add_edge(name, END)
        return graph

    good = fan(("a", lambda s: {"tags": ["a"]}), ("b", lambda s: {"tags": ["b"]}))
    assert sorted(good.compile().invoke({})["tags"]) == ["a", "b"]
    bad = fan(("a", lambda s: {"tags": ["a"]}), ("bad", lambda s: {"tags": [3]}))
    with pytest.raises(InvalidUpdateError, match="node 'bad' wrote an invalid value for field"):
        bad.compile().invoke({})


def test_a_resume_s_update_is_checked() -> None:
    saver = MemorySaver()
    graph = single(ChatModel, lambda s: {"topic": "done"}).compile(
        CompileConfig(checkpoint_saver=saver, interrupt_before=("node",))
    )
    config = RunnableConfig(thread_id="typed-resume")
    graph.invoke({}, config)
    with pytest.raises(InvalidUpdateError, match="the resume's update wrote an invalid value"):
        graph.invoke(GraphInput.resume({"count": -1}), config)
    assert graph.get_state(config).next == ("node",)  # still parked, nothing stored
    state = graph.invoke(GraphInput.resume({"count": "7"}), config)
    assert state["count"] == 7 and state["topic"] == "done"


# -- storing typed values ------------------------------------------------------------------------


def test_the_fields_types_are_registered_with_the_saver(saver: BaseCheckpointSaver) -> None:
    def talk(state: AgentState) -> dict[str, Any]:
        return {
            "messages": [Message(role="ai", text="hi", mood=Mood.ANGRY)],
            "where": Point(3, 4),
        }

    compiled = single(ChatModel, talk).compile(CompileConfig(checkpoint_saver=saver))
    assert isinstance(saver.serializer, JsonSerializer)
    assert set(saver.serializer.types) == {Message, Mood, Point}
    config = RunnableConfig(thread_id="t")
    compiled.invoke({"messages": [Message(role="user", text="q")]}, config)

    stored = compiled.get_state(config).state
    assert stored["messages"] == [
        Message(role="user", text="q"),
        Message(role="ai", text="hi", mood=Mood.ANGRY),
    ]
    assert stored["where"] == Point(3, 4)
    history = list(compiled.get_state_history(config))
    assert [snapshot.state["messages"][-1].text for snapshot in history] == ["hi", "q"]


def test_a_name_held_by_another_class_on_the_serializer_is_refused() -> None:
    def item_class() -> type:
        @dataclasses.dataclass
        class Item:
            n: int

        return Item

    first, second = item_class(), item_class()
    serializer = JsonSerializer(types=[first])
    schema = dataclasses.make_dataclass("Holder", [("item", second | None, None)])
    graph = single(schema, lambda s: None)
    with pytest.raises(GraphDefinitionError) as caught:
        graph.compile(CompileConfig(checkpoint_saver=MemorySaver(serializer=serializer)))
    assert "the state schema Holder names " in str(caught.value)
    assert "item_class.<locals>.Item, which cannot be registered" in str(caught.value)
    # the same class again is fine
    serializer = JsonSerializer(types=[second])
    assert graph.compile(CompileConfig(checkpoint_saver=MemorySaver(serializer=serializer)))


# -- the builder ----------------------------------------------------------------------------------


def test_add_node_with_the_action_alone_names_it_after_the_function() -> None:
    def draft(state: AgentState) -> dict[str, Any]:
        return {"topic": "drafted"}

    async def review(state: AgentState) -> dict[str, Any]:
        return {"count": 1}

    graph = StateGraph(ChatModel).add_node(draft).add_node(review)
    graph.add_edge(START, "draft").add_edge("draft", "review").add_edge("review", END)
    outputs = list(graph.compile().stream({}))
    assert [o.node for o in outputs] == [START, "draft", "review", END]


def test_add_node_with_a_command_action_alone_takes_destinations_by_keyword() -> None:
    def route(state: AgentState) -> Command:
        return Command("done", {"topic": "routed"})

    graph = StateGraph(ChatModel).add_node(route, destinations={"done": END})
    assert graph.add_edge(START, "route").compile().invoke({})["topic"] == "routed"


@pytest.mark.parametrize(
    ("action", "message"),
    [
        (lambda s: None, "but a lambda has no usable name"),
        (functools.partial(keep_max, 1), "but a partial has no usable name"),
    ],
)
def test_add_node_with_an_action_without_a_name_is_refused(action: Any, message: str) -> None:
    graph = StateGraph(ChatModel).add_node(action)
    with pytest.raises(GraphDefinitionError) as caught:
        graph.compile()
    assert message in str(caught.value)
    assert "add_node('id', action)" in str(caught.value)


def test_add_node_with_the_action_first_and_positional_destinations_is_refused() -> None:
    graph = StateGraph(ChatModel).add_node(keep_max, [END])
    with pytest.raises(GraphDefinitionError, match="give destinations by keyword"):
        graph.compile()


class TwoReducers(TypedDict):
    total: Annotated[int, operator.add, keep_max]


class Unresolved(TypedDict):
    item: NotDefinedAnywhere  # type: ignore[name-defined]  # noqa: F821


def test_a_field_with_two_reducers_is_refused() -> None:
    with pytest.raises(GraphDefinitionError, match="field 'total' of the state schema TwoRed"):
        StateGraph(TwoReducers)


def test_a_field_type_that_cannot_be_resolved_is_refused() -> None:
    with pytest.raises(GraphDefinitionError) as caught:
        StateGraph(Unresolved)
    assert "Unresolved (TypedDict) has a field type that cannot be resolved" in str(caught.value)
    assert "NotDefinedAnywhere" in str(caught.value)


def test_a_channel_in_annotated_keeps_its_reducer_and_default() -> None:
    @dataclasses.dataclass
    class Counter:
        total: Annotated[int, Channel(operator.add, default=10)]

    state = single(Counter, lambda s: {"total": 5}).compile().invoke({})
    assert state["total"] == 15
