"""How MemorySaver and SqlSaver store a thread's checkpoints: deltas of their parents, a whole
value when a chain's budget is spent, what prune frees, and reads from a cold cache."""

from __future__ import annotations

import operator
from dataclasses import dataclass, field
from typing import Any

from sqlalchemy import text

from langgraph_celery import (
    END,
    MARK_FOR_REMOVAL,
    START,
    Channel,
    Channels,
    Command,
    CompileConfig,
    GraphInput,
    RemoveByHash,
    ReplaceAllWith,
    RunnableConfig,
    StateGraph,
)
from langgraph_celery.checkpoint import BaseCheckpointSaver, MemorySaver, SqlSaver
from langgraph_celery.checkpoint._delta import BUDGET_FACTOR
from langgraph_celery.graph.compiled import CompiledGraph

CFG = RunnableConfig(thread_id="t1")


def _talker(saver: BaseCheckpointSaver, steps: int = 5) -> CompiledGraph:
    graph = StateGraph({"messages": Channels.appender()})
    previous = START
    for index in range(steps):

        def node(state: Any, config: Any, index: int = index) -> dict[str, Any]:
            return {"messages": [{"n": index, "text": "x" * 50}], "last": index}

        graph.add_node(f"n{index}", node)
        graph.add_edge(previous, f"n{index}")
        previous = f"n{index}"
    graph.add_edge(previous, END)
    return graph.compile(CompileConfig(checkpoint_saver=saver))


def _refs(saver: BaseCheckpointSaver) -> list[Any]:
    return list(saver.stored_refs("t1"))


def test_a_step_stores_its_delta_and_a_big_state_is_not_stored_again(
    saver: BaseCheckpointSaver,
) -> None:
    app = _talker(saver)
    big = [{"n": -i, "text": "y" * 100} for i in range(500)]
    app.invoke({"messages": big}, CFG)
    app.invoke({"messages": [{"n": "user"}]}, CFG)
    refs = _refs(saver)
    assert len(refs) == 12
    # the thread's first checkpoint is whole; every other one a delta of its parent
    assert [ref.whole for ref in refs] == [False] * 11 + [True]
    if isinstance(saver, SqlSaver):
        with saver.engine.connect() as conn:
            sizes = [
                size
                for (size,) in conn.execute(
                    text(f"SELECT length(body) FROM {saver.table_prefix}checkpoints ORDER BY seq")
                )
            ]
        assert sizes[0] > 50_000 and max(sizes[1:]) < 2_000


def test_a_chain_whose_budget_is_spent_starts_again_with_a_whole_value() -> None:
    saver = MemorySaver()
    graph = StateGraph({"doc": Channels.appender()})
    graph.add_node("edit", lambda state, config: {"doc": "z" * 200, "text": "w" * 400})
    graph.add_edge(START, "edit")
    graph.add_edge("edit", END)
    app = graph.compile(CompileConfig(checkpoint_saver=saver))
    for _ in range(BUDGET_FACTOR * 2):
        app.invoke({}, CFG)
    refs = _refs(saver)
    wholes = [index for index, ref in enumerate(refs) if ref.whole]
    assert len(wholes) >= 2, "the deltas outgrew the first whole value"
    assert app.get_state(CFG).values["doc"] == ["z" * 200] * (BUDGET_FACTOR * 2)


def test_prune_stores_the_oldest_kept_delta_whole_and_frees_the_rest(
    saver_factory: Any,
) -> None:
    saver = saver_factory()
    app = _talker(saver)
    for turn in range(4):
        app.invoke({"messages": [{"n": f"user {turn}"}]}, CFG)
    expected = [s.values for s in app.get_state_history(CFG)]
    assert len(expected) == 24

    result = saver.prune("t1", keep_last=3)

    assert len(result.deleted) == 21 and [k.reason.value for k in result.kept] == ["last"] * 3
    refs = _refs(saver)
    assert [ref.whole for ref in refs] == [False, False, True]
    for handle in (saver, saver_factory()):  # (another handle: a cold cache)
        again = _talker(handle)
        assert [s.values for s in again.get_state_history(CFG)] == expected[:3]
    app.invoke({"messages": [{"n": "after"}]}, CFG)
    assert saver_factory().get("t1").values["messages"][-6:] == [  # type: ignore[union-attr]
        {"n": "after"},
        *({"n": index, "text": "x" * 50} for index in range(5)),
    ]


def test_every_way_a_step_changes_state_reads_back_from_a_cold_handle(
    saver_factory: Any,
) -> None:
    """Each checkpoint the engine stores (input, steps, a route's Command update, a parked run
    resumed with an update, update_state with as_node, a fork) reads back, from a handle with
    nothing cached, with exactly the values the engine stored it with."""
    saver = saver_factory()
    stored: dict[str, Any] = {}
    put = saver.put

    def recording_put(checkpoint: Any) -> Any:
        stored[checkpoint.checkpoint_id] = saver.serializer.loads(
            saver.serializer.dumps(checkpoint.values)
        )
        return put(checkpoint)

    saver.put = recording_put  # type: ignore[method-assign]
    graph = StateGraph(
        {"log": Channels.appender(), "total": Channel(operator.add, default=lambda: 0)}
    )
    graph.add_node("a", lambda s, c: {"log": ["a1", "a2"], "total": 2, "scratch": {"k": [1]}})
    graph.add_node(
        "b", lambda s, c: {"log": [RemoveByHash("a1"), "b"], "scratch": MARK_FOR_REMOVAL}
    )
    graph.add_node("c", lambda s, c: {"log": ReplaceAllWith(["c"]), "total": 3, "when": (1, 2)})
    graph.add_node("d", lambda s, c: {"log": "d"})
    graph.add_edge(START, "a")
    graph.add_conditional_edges("a", lambda s: Command(goto="b", update={"log": ["routed"]}))
    graph.add_edge("b", "c")
    graph.add_edge("c", "d")
    graph.add_edge("d", END)
    app = graph.compile(CompileConfig(checkpoint_saver=saver, interrupt_before=("d",)))
    app.invoke({"log": ["in"]}, CFG)
    app.update_state(CFG, {"log": ["edited"], "total": 10}, as_node="c")
    app.invoke(GraphInput.resume({"log": ["resumed"]}), CFG)
    middle = app.get_state_history(CFG)[4]
    app.invoke(None, CFG.with_changes(checkpoint_id=middle.checkpoint_id))
    app.invoke({"log": ["again"]}, CFG)

    cold = saver_factory()
    history = list(cold.list("t1"))
    assert len(history) == len(stored) >= 12
    assert {c.checkpoint_id: c.values for c in history} == stored
    assert sum(not ref.whole for ref in cold.stored_refs("t1")) >= len(history) - 2


@dataclass
class _Note:
    """A message equal to another of the same id, whatever its text."""

    id: str
    text: str = field(compare=False)


def test_equal_items_appended_in_one_step_read_back_as_each_node_wrote_them(
    saver_factory: Any,
) -> None:
    """Parallel nodes append items equal but not the same (``1``, ``True``, ``1.0``; notes
    equal by id), and a route's Command update appends one equal to update_state's: every
    checkpoint reads back (same handle, cold handle) as the engine stored it, not with the
    first node's items twice."""

    def handle() -> BaseCheckpointSaver:
        made = saver_factory()
        made.serializer.register(_Note)
        return made

    saver = handle()
    stored: dict[str, str] = {}
    put = saver.put

    def recording_put(checkpoint: Any) -> Any:
        stored[checkpoint.checkpoint_id] = saver.serializer.dumps(checkpoint.values)
        return put(checkpoint)

    saver.put = recording_put  # type: ignore[method-assign]
    graph = StateGraph({"log": Channels.appender()})
    graph.add_node("a", lambda s, c: {"log": [1, _Note("m", "from a")]})
    graph.add_node("b", lambda s, c: {"log": [True, _Note("m", "from b")]})
    graph.add_node("c", lambda s, c: {"log": 1.0})
    graph.add_node("r", lambda s, c: {"log": "r"})
    for node in "abc":
        graph.add_edge(START, node)
        graph.add_edge(node, "r")
    graph.add_conditional_edges("r", lambda s: Command(goto=END, update={"log": [True]}))
    app = graph.compile(CompileConfig(checkpoint_saver=saver))
    result = app.invoke({"log": ["start"]}, CFG).data["log"]
    assert sorted(map(repr, result[1:6])) == sorted(
        ["1", "True", "1.0", repr(_Note("m", "from a")), repr(_Note("m", "from b"))]
    )
    app.update_state(CFG, {"log": [1]}, as_node="r")  # (r's route adds True after it)
    assert repr(app.get_state(CFG).values["log"][-2:]) == "[1, True]"

    for reader in (saver, handle()):
        history = list(reader.list("t1"))
        assert len(history) == len(stored) == 4
        assert {c.checkpoint_id: reader.serializer.dumps(c.values) for c in history} == stored


def test_a_read_that_a_concurrent_prune_overtakes_starts_again(tmp_path: Any) -> None:
    """A reader has the latest row (a delta) when a prune of the thread commits: the prune
    made that row whole and removed its parents, so the reader, missing the parent, reads the
    row again (now whole) instead of failing with ``LookupError``."""
    url = f"sqlite:///{tmp_path / 'race.sqlite'}"
    writer = SqlSaver(url)
    app = _talker(writer)
    expected = app.invoke({"messages": [{"n": "user"}]}, CFG).data
    reader = SqlSaver(url)  # (a cold cache: it reads the delta's parents from the rows)
    statements, read = reader._sql, reader._rows._read
    pruned: list[int] = []

    def read_then_prune(statement: Any, params: Any) -> Any:
        if statement is statements.body_of and not pruned:  # the delta's first parent
            pruned.append(len(writer.prune("t1", keep_last=1).deleted))
        return read(statement, params)

    reader._rows._read = read_then_prune  # type: ignore[method-assign]
    try:
        assert dict(reader.get("t1").values) == dict(expected)  # type: ignore[union-attr]
    finally:
        reader.dispose()
        writer.dispose()
    assert pruned and pruned[0] > 0
