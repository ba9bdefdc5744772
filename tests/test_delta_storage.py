"""How MemorySaver and SqlSaver store a thread's checkpoints: deltas of their parents, a whole
value when a chain's budget is spent, what prune frees, and reads from a cold cache."""

from __future__ import annotations

import operator
import threading
from dataclasses import dataclass, field
from typing import Any

import pytest
from sqlalchemy import event, text

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
from langgraph_celery.checkpoint import (
    BaseCheckpointSaver,
    Checkpoint,
    Keep,
    Kept,
    MemorySaver,
    SqlSaver,
)
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


def _body_sizes(saver: SqlSaver) -> list[int]:
    """The size of each checkpoint's stored body, oldest first."""
    query = text(f"SELECT length(body) FROM {saver.table_prefix}checkpoints ORDER BY seq")
    with saver.engine.connect() as conn:
        return [size for (size,) in conn.execute(query)]


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
        sizes = _body_sizes(saver)
        assert sizes[0] > 50_000 and max(sizes[1:]) < 2_000


def test_what_a_run_hands_its_caller_never_changes_a_stored_state(
    saver: BaseCheckpointSaver,
) -> None:
    # A run on a thread starts from the saver's cached state; what it hands its caller (invoke's
    # result, streamed states) is the caller's own: changing it, a key the run left alone as
    # well as one it changed, changes no stored checkpoint and not the state the next run reads.
    seen: list[tuple[str, str, int]] = []

    def count(state: Any, *_: Any) -> dict[str, Any]:
        seen.append(
            (state["profile"]["name"], state["messages"][0]["content"], len(state["messages"]))
        )
        return {"count": state.value("count", 0) + 1}

    graph = StateGraph({"messages": Channels.appender(), "profile": Channel(), "count": Channel()})
    graph.add_node("count", count).add_edge(START, "count").add_edge("count", END)
    app = graph.compile(CompileConfig(checkpoint_saver=saver))
    first = [{"content": "m0"}, {"content": "m1"}]
    app.invoke({"messages": first, "profile": {"name": "kept"}}, CFG)
    handed = [app.invoke(None, CFG), app.invoke({"messages": [{"content": "m2"}]}, CFG)]
    handed += [output.state for output in app.stream(None, CFG)]
    for state in handed:
        state["profile"]["name"] = "changed"
        state["messages"][0]["content"] = "changed"
        state["messages"].append({"content": "intruder"})
    expected = [*first, {"content": "m2"}]
    for snapshot in app.get_state_history(CFG):
        values = snapshot.values
        assert values.get("profile", {"name": "kept"}) == {"name": "kept"}
        assert values.get("messages", []) == expected[: len(values.get("messages", []))]
    seen.clear()
    assert app.invoke(None, CFG)["count"] == 5
    assert seen == [("kept", "m0", 3)]


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


# -- prune and a delta stored meanwhile, in the database's own interleavings ----------------------


def _conversation(saver: BaseCheckpointSaver) -> tuple[list[Any], Any]:
    """A thread of 11 checkpoints (deltas after the first), and a fork of its fourth oldest
    stored as a delta of it, not yet stored."""
    app = _talker(saver)
    app.invoke({"messages": [{"n": "one"}]}, CFG)
    app.invoke({"messages": [{"n": "two"}]}, CFG)
    history = list(saver.list("t1"))
    old = history[-4]
    added = [{"n": "fork"}]
    fork = Checkpoint(
        "t1",
        "fork",
        "run-fork",
        old.step + 1,
        {**old.values, "messages": [*old.values["messages"], *added]},
        parent_id=old.checkpoint_id,
        delta={"messages": [["add", added]]},
        branch=True,
    )
    return history, fork


def _pruning(saver: SqlSaver) -> tuple[threading.Thread, list[Any]]:
    done: list[Any] = []
    thread = threading.Thread(target=lambda: done.append(saver.prune("t1", keep_last=1)))
    thread.start()
    return thread, done


def test_a_prune_waits_for_a_delta_being_stored_of_what_it_removes(sql_saver: SqlSaver) -> None:
    """A fork of an old checkpoint is being inserted (its transaction not committed) when a
    prune that removes its parent starts: the prune waits for it, then leaves what the fork
    is read from."""
    history, fork = _conversation(sql_saver)
    row, _ = sql_saver._checkpoint_row(fork)
    assert row["base_id"] is not None  # (stored as a delta)
    counted = {"preserve_rowcount": True}
    with sql_saver.engine.connect() as conn:
        conn.begin()
        assert conn.execute(sql_saver._sql.put, row, execution_options=counted).rowcount == 1
        pruning, done = _pruning(sql_saver)
        pruning.join(timeout=1)
        assert pruning.is_alive() and not done  # (it waits for the insert's transaction)
        conn.commit()
    pruning.join(timeout=60)
    (result,) = done
    assert fork.parent_id not in result.deleted
    assert Kept(fork.parent_id, Keep.NEEDED, "fork") in result.kept
    cold = SqlSaver(sql_saver.engine, table_prefix=sql_saver.table_prefix)
    assert cold.get("t1", "fork") == fork
    assert [c.checkpoint_id for c in cold.list("t1")][:2] == ["fork", history[0].checkpoint_id]


def test_a_delta_stored_while_a_prune_removes_its_parent_is_stored_whole(
    sql_saver: SqlSaver,
) -> None:
    """A handle that read an old checkpoint forks it while a prune that removes it is about
    to (its rows decided, not yet removed): the fork's insert waits for the prune, finds its
    parent pruned, and the fork is stored whole."""
    history, fork = _conversation(sql_saver)
    other = SqlSaver(sql_saver.engine, table_prefix=sql_saver.table_prefix)
    assert other.get("t1", fork.parent_id) == history[-4]  # (it knows the parent's chain)
    stored: list[Any] = []

    def fork_before_removing(conn: Any, cursor: Any, statement: str, *args: Any) -> None:
        if "pruned_at=" in statement and not stored:  # (the prune's removal)
            forking = threading.Thread(target=lambda: stored.append(other.put(fork)))
            forking.start()
            forking.join(timeout=1)
            assert forking.is_alive() and not stored  # (it waits for the prune)
            stored.append(forking)

    event.listen(sql_saver.engine, "before_cursor_execute", fork_before_removing)
    try:
        result = sql_saver.prune("t1", keep_last=1)
    finally:
        event.remove(sql_saver.engine, "before_cursor_execute", fork_before_removing)
    stored[0].join(timeout=60)
    assert fork.parent_id in result.deleted and stored[1:] == [fork]
    assert [ref.whole for ref in other.stored_refs("t1")] == [True, True]
    cold = SqlSaver(sql_saver.engine, table_prefix=sql_saver.table_prefix)
    assert cold.get("t1", "fork") == fork


def test_memory_saver_stores_whole_a_delta_whose_parent_is_pruned_as_it_stores_it() -> None:
    """A fork encoded as a delta of a checkpoint that a prune removes before the fork is
    stored: it is stored whole."""
    saver = MemorySaver()
    _, fork = _conversation(saver)
    encode, pruned = saver._incremental.encode, []

    def encode_then_prune(checkpoint: Any, *args: Any, **kwargs: Any) -> Any:
        encoded = encode(checkpoint, *args, **kwargs)
        if checkpoint.checkpoint_id == "fork" and not pruned:
            assert encoded.chain.base_id is not None  # (a delta)
            pruned.append(saver.prune("t1", keep_last=1))
        return encoded

    saver._incremental.encode = encode_then_prune  # type: ignore[method-assign]
    saver.put(fork)
    assert fork.parent_id in pruned[0].deleted
    saver._incremental.forget("t1")  # (read from what is stored)
    assert saver.get("t1", "fork") == fork
    assert [ref.whole for ref in saver.stored_refs("t1")] == [True, True]


def _extend_in_place(old: list[Any], new: list[Any]) -> list[Any]:
    old.extend(new)
    return old


def test_a_reducer_that_changes_its_list_in_place_changes_no_earlier_state(
    saver_factory: Any,
) -> None:
    """A reducer of the user's that extends the list it is given (``operator.iadd``) used to
    extend the list that the parent checkpoint's cached state and every earlier output held:
    history read each checkpoint with the later items, and outputs collected from a stream all
    showed the last state.  It now gets a copy of the list (the same items)."""
    saver = saver_factory()
    graph = StateGraph({"log": Channel(_extend_in_place, list)})
    previous = START
    for node in ("a", "b", "c"):
        graph.add_node(node, lambda s, c, node=node: {"log": [node]})
        graph.add_edge(previous, node)
        previous = node
    app = graph.add_edge(previous, END).compile(CompileConfig(checkpoint_saver=saver))
    outputs = list(app.stream({"log": ["in"]}, CFG))
    assert [output.state["log"] for output in outputs] == [
        ["in"],
        ["in", "a"],
        ["in", "a", "b"],
        ["in", "a", "b", "c"],
        ["in", "a", "b", "c"],
    ]
    app.invoke({"log": ["again"]}, CFG)
    expected = ["in", "a", "b", "c", "again", "a", "b", "c"]
    for read in (saver, saver_factory()):  # (its cache, and a handle with nothing cached)
        lengths = [len(c.values["log"]) for c in read.list("t1")]
        assert lengths == [8, 7, 6, 5, 4, 3, 2, 1]
        for checkpoint in read.list("t1"):
            assert checkpoint.values["log"] == expected[: len(checkpoint.values["log"])]


def _concatenate(old: list[Any], new: list[Any]) -> list[Any]:
    return [*old, *new]


@pytest.mark.parametrize("reducer", [operator.add, _concatenate, _extend_in_place])
def test_a_reducer_that_adds_at_the_end_of_a_list_stores_the_items_added(
    saver_factory: Any, reducer: Any
) -> None:
    """``operator.add`` on a list (LangGraph's ``Annotated[list, operator.add]``), and any
    reducer whose result holds the old list's items and then new ones, stores at each step the
    items it added, not the whole list, as an appender does; it reads back the same from a
    cold handle."""
    saver = saver_factory()
    graph = StateGraph({"messages": Channel(reducer, list)})
    previous = START
    for index in range(4):
        graph.add_node(f"n{index}", lambda s, c, i=index: {"messages": [{"n": i}]})
        graph.add_edge(previous, f"n{index}")
        previous = f"n{index}"
    app = graph.add_edge(previous, END).compile(CompileConfig(checkpoint_saver=saver))
    big = [{"n": -i, "text": "y" * 100} for i in range(500)]
    app.invoke({"messages": big}, CFG)
    app.invoke({"messages": [{"n": "user"}]}, CFG)
    assert [ref.whole for ref in saver.stored_refs("t1")] == [False] * 9 + [True]
    stored = {c.checkpoint_id: c.values for c in saver.list("t1")}
    assert {c.checkpoint_id: c.values for c in saver_factory().list("t1")} == stored
    final = [*big, *({"n": i} for i in range(4)), {"n": "user"}, *({"n": i} for i in range(4))]
    assert app.get_state(CFG).values["messages"] == final
    if isinstance(saver, SqlSaver):
        sizes = _body_sizes(saver)
        assert sizes[0] > 50_000 and max(sizes[1:]) < 2_000


def _as_booleans(old: list[Any], new: list[Any]) -> list[Any]:
    """Items equal to the old ones but not them (``True == 1``), then the new ones."""
    return [bool(item) for item in old] + new


def test_a_reducer_whose_result_only_equals_the_old_items_stores_its_result(
    saver_factory: Any,
) -> None:
    """The items added are stored only when the result holds the old items themselves: equal
    ones (``True`` for ``1``) are stored as the reducer made them, and read back as such."""
    saver = saver_factory()
    graph = StateGraph({"flags": Channel(_as_booleans, list)})
    graph.add_node("a", lambda s, c: {"flags": [0]}).add_edge(START, "a").add_edge("a", END)
    app = graph.compile(CompileConfig(checkpoint_saver=saver))
    app.invoke({"flags": [1]}, CFG)
    app.invoke({"flags": [2]}, CFG)
    for read in (saver, saver_factory()):
        flags = read.get("t1").values["flags"]
        assert flags == [True, False, True, 0] and [type(f) for f in flags] == [bool] * 3 + [int]


def _merge_files(old: dict[str, Any], new: dict[str, Any]) -> dict[str, Any]:
    """A reducer of files by name, as agents keep them: ``None`` removes a file."""
    merged = {**old, **new}
    return {name: body for name, body in merged.items() if body is not None}


def test_a_reducer_that_merges_dicts_stores_the_entries_it_changed(
    saver_factory: Any,
) -> None:
    """A reducer whose result is the old dict with some entries set, added or removed
    (``{**old, **new}``) stores those entries, not the whole dict, and reads back the same
    dict, in the same order, from a cold handle."""
    saver = saver_factory()
    graph = StateGraph({"files": Channel(_merge_files, dict)})
    edits: list[dict[str, Any]] = [
        {"new.txt": "n" * 50},
        {"file-3": "changed"},
        {"file-1": None, "other.txt": "o"},
        {"new.txt": None},
    ]
    previous = START
    for index, edit in enumerate(edits):
        graph.add_node(f"e{index}", lambda s, c, edit=edit: {"files": edit})
        graph.add_edge(previous, f"e{index}")
        previous = f"e{index}"
    app = graph.add_edge(previous, END).compile(CompileConfig(checkpoint_saver=saver))
    files = {f"file-{i}": "x" * 100 for i in range(500)}
    app.invoke({"files": files}, CFG)
    final = app.get_state(CFG).values["files"]
    expected = {**files, "file-3": "changed", "other.txt": "o"}
    del expected["file-1"]
    assert final == expected and list(final) == list(expected)
    stored = {c.checkpoint_id: c.values for c in saver.list("t1")}
    cold = {c.checkpoint_id: c.values for c in saver_factory().list("t1")}
    assert cold == stored
    assert [list(v["files"]) for v in cold.values()] == [list(v["files"]) for v in stored.values()]
    assert [ref.whole for ref in saver.stored_refs("t1")] == [False] * 4 + [True]
    if isinstance(saver, SqlSaver):
        sizes = _body_sizes(saver)
        assert sizes[0] > 50_000 and max(sizes[1:]) < 2_000


def test_a_dict_reducer_that_changes_most_entries_stores_the_dict(saver_factory: Any) -> None:
    """When most entries change (or the order does), the whole dict is stored, and reads back
    as the reducer made it."""
    saver = saver_factory()
    graph = StateGraph(
        {"scores": Channel(lambda old, new: dict(sorted({**old, **new}.items())), dict)}
    )
    graph.add_node("a", lambda s, c: {"scores": {"a": 0, "m": 1}})
    app = (
        graph.add_edge(START, "a").add_edge("a", END).compile(CompileConfig(checkpoint_saver=saver))
    )
    app.invoke({"scores": {"z": 1, "b": 2}}, CFG)
    for read in (saver, saver_factory()):
        scores = read.get("t1").values["scores"]
        assert list(scores.items()) == [("a", 0), ("b", 2), ("m", 1), ("z", 1)]
