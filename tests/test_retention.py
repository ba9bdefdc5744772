"""Issue 12, item 4 (SPEC §10): retention seen from graphs, on every saver.

What ``prune`` keeps is enough to read, resume and fork a thread (the oldest kept checkpoint's
parent is gone and readers cope); a run pruned while it runs on Celery ends as it would have,
each node run once; the reaper's ``checkpoint_ttl`` pass deletes completed threads older than
the TTL and nothing else.  (The saver-level rules are in the conformance suite:
``langgraph_celery/testing/_retention.py``.)
"""

from __future__ import annotations

import itertools
import threading
import time
import uuid
from collections import Counter
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from celery import Celery

from langgraph_celery import (
    END,
    START,
    AgentState,
    Channels,
    CompileConfig,
    CompiledGraph,
    GraphInput,
    GraphStateError,
    NodeError,
    RunnableConfig,
    StateGraph,
)
from langgraph_celery.beat.reaper import reap
from langgraph_celery.celery import CeleryExecutor, RunHandle
from langgraph_celery.checkpoint import (
    BaseCheckpointSaver,
    Keep,
    Kept,
    MemorySaver,
    RunIndex,
    RunStatus,
)
from langgraph_celery.checkpoint._retention import StoredRef, plan_prune
from langgraph_celery.worker.embedded import EmbeddedWorker, embedded_worker_for
from storage_only import StorageOnly

CFG = RunnableConfig(thread_id="thread-1")


def _appending(name: str) -> Any:
    def action(state: AgentState) -> dict[str, Any]:
        return {"log": name}

    return action


def chain(saver: BaseCheckpointSaver, nodes: str, **config: Any) -> CompiledGraph:
    """START -> nodes[0] -> ... -> END (one letter a node), each appending its name to ``log``."""
    graph = StateGraph({"log": Channels.appender()})
    for node in nodes:
        graph.add_node(node, _appending(node))
    graph.add_edge(START, nodes[0])
    for source, target in itertools.pairwise(nodes):
        graph.add_edge(source, target)
    graph.add_edge(nodes[-1], END)
    return graph.compile(CompileConfig(checkpoint_saver=saver, **config))


# -- what is kept, as a pure function ------------------------------------------------------------


def test_what_a_kept_checkpoint_is_read_from_is_kept_with_it() -> None:
    """A delta scheme names the checkpoints each one is read from (``StoredRef.needs``): prune
    keeps them, and what they are read from in turn, whatever their age."""
    refs = [StoredRef(f"c{i}", "r1", f"c{i - 1}" if i else None) for i in range(6)][::-1]
    refs[0] = StoredRef("c5", "r1", "c4", needs=("c2",))
    refs[3] = StoredRef("c2", "r1", "c1", needs=("c0", "c5"))
    kept, deleted = plan_prune(refs, 1, {})
    assert kept == [
        Kept("c5", Keep.LAST),
        Kept("c2", Keep.NEEDED, "c5"),
        Kept("c0", Keep.NEEDED, "c2"),
    ]
    assert deleted == ["c4", "c3", "c1"]
    # a running run's latest keeps its parent, and the parent what it is read from
    kept, deleted = plan_prune(refs[1:], 1, {"c4": RunStatus.RUNNING})
    assert [(k.checkpoint_id, k.reason) for k in kept] == [
        ("c4", Keep.LAST),
        ("c3", Keep.PARENT),
    ]
    assert deleted == ["c2", "c1", "c0"]


# -- in process -----------------------------------------------------------------------------------


def test_a_pruned_parked_thread_reads_resumes_and_forks(saver: BaseCheckpointSaver) -> None:
    graph = chain(saver, "abcde", interrupt_before=("e",))
    graph.invoke({}, CFG)
    assert len(graph.get_state_history(CFG)) == 5

    result = saver.prune("thread-1", keep_last=1)

    history = graph.get_state_history(CFG)
    assert [s.checkpoint_id for s in history] == [k.checkpoint_id for k in result.kept]
    assert [k.reason for k in result.kept] == [Keep.LAST, Keep.PARENT]  # (parked: its parent)
    assert len(result.deleted) == 3
    parked = graph.get_state(CFG)
    assert parked.next == ("e",) and parked.values["log"] == ["a", "b", "c", "d"]
    # The oldest kept snapshot still names its parent, which is gone: reading it says so.
    oldest = history[-1]
    assert oldest.parent_config is not None
    gone = oldest.parent_config.checkpoint_id
    assert gone in result.deleted
    with pytest.raises(GraphStateError, match=f"has no checkpoint '{gone}'"):
        graph.get_state(oldest.parent_config)
    with pytest.raises(GraphStateError, match=f"has no checkpoint '{gone}'"):
        graph.invoke(None, oldest.parent_config)  # (no fork from a pruned checkpoint)
    # The parked run resumes from what is kept and completes as it would have.
    done = graph.invoke(GraphInput.resume(), CFG)
    assert done.value("log") == ["a", "b", "c", "d", "e"]
    assert graph.get_state(CFG).next == ()
    # A fork from the oldest kept checkpoint (after c, next d) runs d and parks before e again.
    forked = graph.invoke(None, CFG.with_changes(checkpoint_id=oldest.checkpoint_id))
    assert forked.value("log") == ["a", "b", "c", "d"]
    assert graph.get_state(CFG).next == ("e",)


def test_a_completed_thread_pruned_to_its_last_checkpoint_goes_on(
    saver: BaseCheckpointSaver,
) -> None:
    graph = chain(saver, "ab")
    graph.invoke({}, CFG)
    graph.invoke({}, CFG)
    result = saver.prune("thread-1", keep_last=1)
    assert [k.reason for k in result.kept] == [Keep.LAST] and len(result.deleted) == 5
    (only,) = graph.get_state_history(CFG)
    assert only.values["log"] == ["a", "b", "a", "b"]
    assert graph.invoke({}, CFG).value("log") == ["a", "b"] * 3
    history = graph.get_state_history(CFG)
    assert len(history) == 4 and history[-1].checkpoint_id == only.checkpoint_id


def test_a_failed_step_pruned_around_is_retried_by_the_resume(saver: BaseCheckpointSaver) -> None:
    failing = threading.Event()

    def flaky(state: AgentState) -> dict[str, Any]:
        if failing.is_set():
            raise RuntimeError("not yet")
        return {"log": "c"}

    graph = StateGraph({"log": Channels.appender()})
    graph.add_node("a", _appending("a")).add_node("b", _appending("b")).add_node("c", flaky)
    graph.add_edge(START, "a").add_edge("a", "b").add_edge("b", "c").add_edge("c", END)
    compiled = graph.compile(CompileConfig(checkpoint_saver=saver))
    compiled.invoke({}, CFG)
    failing.set()
    with pytest.raises(NodeError, match="not yet"):
        compiled.invoke({}, CFG)
    # the completed run before it goes; the failed step stays, with its parent
    result = saver.prune("thread-1", keep_last=1)
    assert [k.reason for k in result.kept] == [Keep.LAST, Keep.PARENT]
    assert len(result.deleted) == 5
    failing.clear()
    assert compiled.invoke(GraphInput.resume(), CFG).value("log") == ["a", "b", "c"] * 2


class _StoresOnly(StorageOnly):
    """A saver of its own, written before retention: it stores, releases, and nothing more."""


def test_a_saver_without_pruning_says_what_to_implement_and_still_deletes_threads() -> None:
    saver = _StoresOnly()
    graph = chain(saver, "ab")
    graph.invoke({}, CFG)
    with pytest.raises(NotImplementedError) as caught:
        saver.prune("thread-1", keep_last=1)
    assert "_StoresOnly cannot prune checkpoints (it has no stored_refs)" in str(caught.value)
    assert "implement stored_refs and remove_checkpoints" in str(caught.value)
    assert len(saver.list("thread-1")) == 3  # (nothing removed)
    assert saver.delete_thread("thread-1") == 3  # (the default: release)
    assert saver.list("thread-1") == []


@pytest.mark.parametrize("thread_id", [None, "", "t" * 256])
def test_a_saver_of_its_own_refuses_what_cannot_be_a_thread_id(thread_id: Any) -> None:
    """The base class checks the thread id of every saver's ``release`` (and
    ``delete_thread``, ``prune``), its own or not, before the saver's code runs."""
    saver = _StoresOnly()
    chain(saver, "ab").invoke({}, CFG)
    for call in (saver.release, saver.delete_thread):
        with pytest.raises(ValueError, match="thread_id"):
            call(thread_id)
    assert len(saver.list("thread-1")) == 3


# -- on Celery ------------------------------------------------------------------------------------

#: Executions of each node of each step, by thread: a node run twice shows as 2.
_RUNS: Counter[tuple[str, str, int]] = Counter()
_RUNS_LOCK = threading.Lock()


def _counted(name: str) -> Any:
    def action(state: AgentState, config: RunnableConfig) -> dict[str, Any]:
        with _RUNS_LOCK:
            _RUNS[(config.thread_id or "", name, int(state.value("n", 0)))] += 1
        if name == "tick":
            return {"n": int(state.value("n", 0)) + 1, "log": "tick"}
        return {"log": name}

    return action


def fan_loop(saver: BaseCheckpointSaver, executor: CeleryExecutor, rounds: int) -> CompiledGraph:
    """tick -> (left, right in one step) -> tick ... ``rounds`` times, then END: steps of one
    task and of two (whose first write waits on the step's checkpoint for the second)."""
    graph = StateGraph({"log": Channels.appender()})
    graph.add_node("tick", _counted("tick"))
    graph.add_node("left", _counted("left")).add_node("right", _counted("right"))
    graph.add_edge(START, "tick")
    graph.add_conditional_edges(
        "tick", lambda s: END if s.value("n") >= rounds else ["left", "right"], None
    )
    graph.add_edge("left", "tick").add_edge("right", "tick")
    graph_id = f"fan-{uuid.uuid4().hex[:8]}"
    return graph.compile(
        CompileConfig(checkpoint_saver=saver, executor=executor, graph_id=graph_id)
    )


def celery_executor(**options: Any) -> CeleryExecutor:
    app = Celery(f"retention-{uuid.uuid4().hex[:8]}", broker="memory://", set_as_current=False)
    app.conf.task_default_queue = f"retention-{uuid.uuid4().hex[:8]}"
    return CeleryExecutor(app, **options)


@pytest.fixture
def worker_of() -> Iterator[Any]:
    started: list[EmbeddedWorker] = []

    def start(graph: CompiledGraph) -> EmbeddedWorker:
        worker = embedded_worker_for(graph)
        assert worker is not None
        started.append(worker.start())
        return worker

    yield start
    for worker in started:
        worker.stop()


def test_pruning_a_run_while_it_runs_on_celery_changes_nothing_it_does(
    saver: BaseCheckpointSaver, worker_of: Any
) -> None:
    rounds = 12
    graph = fan_loop(saver, celery_executor(), rounds)
    worker_of(graph)
    thread = f"pruned-{uuid.uuid4().hex[:8]}"
    stop, prunes, held = threading.Event(), [0], Counter[str]()

    def prune_all_the_time() -> None:
        while not stop.is_set():
            result = saver.prune(thread, keep_last=1)
            held.update(k.reason.value for k in result.held)
            prunes[0] += 1

    handle = graph.start({}, RunnableConfig(thread_id=thread))
    pruner = threading.Thread(target=prune_all_the_time)
    pruner.start()
    try:
        result = handle.wait(timeout=60)
    finally:
        stop.set()
        pruner.join(30)
    assert handle.status() == "completed"
    assert result.as_state_data_or_last_checkpoint_state_data()["log"] == (
        ["tick", "left", "right"] * (rounds - 1) + ["tick"]
    )
    ran = {key: count for key, count in _RUNS.items() if key[0] == thread}
    assert set(ran.values()) == {1}, ran  # every node of every step ran once
    assert len(ran) == 3 * (rounds - 1) + 1
    assert prunes[0] > 0, prunes
    if saver.shared_across_processes:  # (it ran while a step was running; the in-memory saver's
        # steps are too quick for the pruner to see one on this machine)
        assert held["parent"] > 0, (prunes, held)
    saver.prune(thread, keep_last=1)
    (last,) = graph.get_state_history(RunnableConfig(thread_id=thread))
    assert last.next == () and last.values["n"] == rounds


def test_a_parked_celery_run_pruned_is_found_followed_and_resumed(
    saver: BaseCheckpointSaver, worker_of: Any
) -> None:
    graph = chain(
        saver, "abcd", executor=celery_executor(), graph_id="pruned-park", interrupt_before=("d",)
    )
    worker_of(graph)
    thread = f"park-{uuid.uuid4().hex[:8]}"
    handle = graph.start({}, RunnableConfig(thread_id=thread))
    assert handle.wait(timeout=30).is_interruption_metadata()

    result = saver.prune(thread, keep_last=1)

    assert [k.reason for k in result.kept] == [Keep.LAST, Keep.PARENT] and result.deleted
    found = RunHandle.from_run_id(graph, handle.run_id)  # (its kept checkpoints name its thread)
    assert (found.thread_id, found.status()) == (thread, "parked")
    outputs = list(graph.stream(GraphInput.resume(), RunnableConfig(thread_id=thread)))
    assert outputs[-1].state.value("log") == ["a", "b", "c", "d"]
    assert handle.wait(timeout=30).as_state_data_or_last_checkpoint_state_data()["log"] == list(
        "abcd"
    )
    # Its outputs from its oldest kept checkpoint on (whose parent is gone), then its end.
    streamed = list(found.stream())
    assert streamed and streamed[-1].state.value("log") == ["a", "b", "c", "d"]


def test_waiting_on_a_run_whose_thread_was_deleted_says_so(
    saver: BaseCheckpointSaver, worker_of: Any
) -> None:
    graph = chain(saver, "ab", executor=celery_executor(), graph_id="deleted-wait")
    worker_of(graph)
    thread = f"deleted-{uuid.uuid4().hex[:8]}"
    handle = graph.start({}, RunnableConfig(thread_id=thread))
    assert handle.wait(timeout=30).as_state_data()["log"] == ["a", "b"]

    assert saver.delete_thread(thread) > 0

    # (a clear error, not a bare AssertionError from deep inside the client, nor "completed"
    # for a run nothing is known of any more)
    with pytest.raises(GraphStateError, match=f"thread '{thread}' was released or deleted"):
        handle.wait(timeout=5)
    with pytest.raises(GraphStateError, match=f"thread '{thread}' was released or deleted"):
        handle.status()


def test_a_run_pruned_away_keeps_its_status_and_says_its_result_is_gone(
    saver: BaseCheckpointSaver, worker_of: Any
) -> None:
    graph = chain(
        saver, "ab", executor=celery_executor(), graph_id="pruned-run", interrupt_before=("b",)
    )
    worker_of(graph)
    thread = f"pruned-{uuid.uuid4().hex[:8]}"
    config = RunnableConfig(thread_id=thread)
    first = graph.start({}, config)
    assert first.wait(timeout=30).is_interruption_metadata()
    graph.invoke(GraphInput.resume(), config)
    assert first.status() == "completed"
    later = graph.start(GraphInput.no_args(), config)  # parks before b again
    assert later.wait(timeout=30).is_interruption_metadata()

    saver.prune(thread, keep_last=1)  # (the first run's checkpoints are gone, its record stays)

    assert not [c for c in saver.list(thread) if c.run_id == first.run_id]
    # its own status from the run index, not the later run's "parked"
    assert (first.status(), later.status()) == ("completed", "parked")
    rebuilt = RunHandle.from_run_id(graph, first.run_id)  # (found by its record)
    assert (rebuilt.thread_id, rebuilt.status()) == (thread, "completed")
    with pytest.raises(GraphStateError, match=f"run {first.run_id} completed.*pruned"):
        first.wait(timeout=5)
    assert first.cancel() is False  # (nothing to cancel: the later run is left parked)
    assert later.status() == "parked"
    unknown = RunHandle("0" * 32, thread, graph)
    message = f"no checkpoint of run {unknown.run_id} and no record of it"
    with pytest.raises(GraphStateError, match=message):
        unknown.status()
    assert unknown.cancel() is False


# -- the reaper's checkpoint_ttl ------------------------------------------------------------------


def test_the_reaper_deletes_completed_threads_older_than_the_ttl(
    saver: BaseCheckpointSaver, worker_of: Any
) -> None:
    ttl = 3600.0
    executor = celery_executor(checkpoint_ttl=ttl)
    graph = chain(saver, "ab", executor=executor, graph_id="ttl-chain")
    parked = chain(saver, "ab", executor=executor, graph_id="ttl-parked", interrupt_before=("b",))
    worker_of(graph)  # (one worker serves both: they share the app)

    def cfg(thread: str) -> RunnableConfig:
        return RunnableConfig(thread_id=thread)

    graph.invoke({}, cfg("done"))
    graph.invoke({}, cfg("twice"))
    graph.invoke({}, cfg("twice"))  # (two runs: the older one's record is passed over)
    graph.invoke({}, cfg("updated"))
    parked.invoke({}, cfg("parked"))
    assert parked.get_state(cfg("parked")).next == ("b",)
    now = datetime.now(UTC)
    time.sleep(0.3)
    graph.update_state(cfg("updated"), {"log": "late"})  # (after the run completed)

    assert reap(executor, now=now + timedelta(seconds=ttl / 2)).deleted == []
    assert saver.get("done") is not None

    latest_update = saver.get("updated")
    assert latest_update is not None
    # the runs completed over 0.3 s before the update: older than the TTL, the update not
    report = reap(executor, now=latest_update.created_at + timedelta(seconds=ttl - 0.1))

    assert sorted(report.deleted) == ["done", "twice"] and report.errors == []
    assert isinstance(saver, RunIndex)
    for thread in ("done", "twice"):
        assert saver.get(thread) is None and saver.list(thread) == []
    assert [r.thread_id for r in saver.list_runs("ttl-chain")] == ["updated"]
    assert saver.get("updated") is not None
    assert parked.get_state(cfg("parked")).next == ("b",)  # parked: never deleted
    assert saver.list_runs("ttl-parked", RunStatus.PARKED)
    # Once the parked run completes, its thread goes too (and the update, old enough).
    assert parked.invoke(GraphInput.resume(), cfg("parked")).value("log") == ["a", "b"]
    much_later = datetime.now(UTC) + timedelta(seconds=ttl + 1)
    assert sorted(reap(executor, now=much_later).deleted) == ["parked", "updated"]
    assert saver.get("parked") is None and saver.get("updated") is None
    assert reap(executor, now=much_later).deleted == []


def test_without_a_ttl_the_reaper_deletes_nothing(
    saver: BaseCheckpointSaver, worker_of: Any
) -> None:
    graph = chain(saver, "ab", executor=celery_executor(), graph_id="no-ttl")
    worker_of(graph)
    graph.invoke({}, RunnableConfig(thread_id="kept"))
    report = reap(graph.config.executor, now=datetime.now(UTC) + timedelta(days=3650))
    assert report.deleted == [] and saver.get("kept") is not None


class _NoExpiry(MemorySaver):
    """A saver written before retention: RunIndex's completed_runs is not implemented."""

    completed_runs = RunIndex.completed_runs  # type: ignore[assignment]


def test_a_saver_that_cannot_find_completed_threads_is_named_in_the_log(
    worker_of: Any, caplog: pytest.LogCaptureFixture
) -> None:
    saver = _NoExpiry()
    graph = chain(saver, "ab", executor=celery_executor(checkpoint_ttl=1), graph_id="old-saver")
    worker_of(graph)
    graph.invoke({}, RunnableConfig(thread_id="t"))
    with caplog.at_level("ERROR", logger="langgraph_celery.beat"):
        report = reap(graph.config.executor, now=datetime.now(UTC) + timedelta(hours=1))
    assert report.deleted == [] and saver.get("t") is not None
    assert "checkpoint_ttl not applied to graph 'old-saver'" in caplog.text
    assert "_NoExpiry does not implement RunIndex.completed_runs" in caplog.text


@pytest.mark.parametrize(
    "ttl", [0, -5, float("nan"), float("inf"), timedelta(0), timedelta(days=-1), True, "3600"]
)
def test_checkpoint_ttl_is_positive_seconds(ttl: Any) -> None:
    with pytest.raises(ValueError, match="checkpoint_ttl"):
        celery_executor(checkpoint_ttl=ttl)
    assert celery_executor(checkpoint_ttl=2).checkpoint_ttl == 2.0
    assert celery_executor().checkpoint_ttl is None


def test_checkpoint_ttl_takes_a_timedelta() -> None:
    # (as RetryPolicy's durations do: seconds or a timedelta, not a TypeError from a comparison)
    assert celery_executor(checkpoint_ttl=timedelta(days=7)).checkpoint_ttl == 7 * 86400.0


@pytest.mark.parametrize(
    "option", ["reap_interval", "stalled_after", "interrupt_timeout", "node_timeout"]
)
def test_every_duration_of_the_executor_takes_seconds_or_a_timedelta(option: str) -> None:
    assert getattr(celery_executor(**{option: timedelta(minutes=2)}), option) == 120.0
    assert getattr(celery_executor(**{option: 5}), option) == 5.0
    for bad in (0, -1, float("nan"), float("inf"), timedelta(0), True, "60", 1e12):
        with pytest.raises(ValueError, match=rf"^{option}=.*a positive number or a timedelta"):
            celery_executor(**{option: bad})
    if option in ("interrupt_timeout", "node_timeout"):
        assert getattr(celery_executor(**{option: None}), option) is None
    else:
        with pytest.raises(ValueError, match=option):
            celery_executor(**{option: None})


# -- child threads of compiled subgraphs -----------------------------------------------------------


def with_subgraph(
    saver: BaseCheckpointSaver, child_config: CompileConfig | None = None, **config: Any
) -> CompiledGraph:
    """a -> sub (the compiled w -> x -> z -> y, on the parent's saver) -> b."""
    child = StateGraph({"log": Channels.appender()})
    for node in "wxzy":
        child.add_node(node, _appending(node))
    child.add_edge(START, "w").add_edge("w", "x").add_edge("x", "z").add_edge("z", "y")
    child.add_edge("y", END)
    graph = StateGraph({"log": Channels.appender()})
    graph.add_node("a", _appending("a")).add_node("sub", child.compile(child_config))
    graph.add_node("b", _appending("b"))
    graph.add_edge(START, "a").add_edge("a", "sub").add_edge("sub", "b").add_edge("b", END)
    return graph.compile(CompileConfig(checkpoint_saver=saver, **config))


def test_delete_thread_deletes_its_child_threads_and_no_other(saver: BaseCheckpointSaver) -> None:
    graph = with_subgraph(saver)
    threads = ["a", "a/sub", "ab", "A", "a_", "a%", "a\\"]
    for thread in threads:
        graph.invoke({}, RunnableConfig(thread_id=thread))
    assert saver.get("a/sub") is not None and saver.get("ab/sub") is not None
    parent, child = len(saver.list("a")), len(saver.list("a/sub"))
    child_child = len(saver.list("a/sub/sub"))  # (the thread "a/sub" had a child of its own)
    assert saver.delete_thread("a") == parent + child + child_child
    for gone in ("a", "a/sub", "a/sub/sub"):
        assert saver.list(gone) == [] and saver.get(gone) is None
    # neither "ab/..." (a prefix without the slash), another case, nor LIKE wildcards
    for kept in ["ab", "A", "a_", "a%", "a\\"]:
        assert saver.get(kept) is not None and saver.get(f"{kept}/sub") is not None, kept
    assert saver.delete_thread("a_") > 0 and saver.get("ab/sub") is not None
    assert saver.delete_thread("a%") > 0 and saver.get("ab/sub") is not None
    assert saver.delete_thread("a\\") > 0 and saver.get("ab/sub") is not None
    if isinstance(saver, RunIndex):
        assert not [r for r in saver.list_runs(limit=500) if r.thread_id.startswith("a/")]


def test_release_thread_releases_the_child_threads_too(saver: BaseCheckpointSaver) -> None:
    graph = with_subgraph(saver, release_thread=True)
    result = graph.invoke({}, RunnableConfig(thread_id="t"))
    assert result is not None
    assert saver.list("t") == [] and saver.list("t/sub") == []


def test_prune_of_a_parent_parked_in_its_child_keeps_what_the_resume_needs(
    saver: BaseCheckpointSaver,
) -> None:
    graph = with_subgraph(saver, CompileConfig(checkpoint_saver=saver, interrupt_before=("y",)))
    graph.invoke({}, CFG)
    assert graph.get_state(CFG).next == ("sub",)
    child_before = saver.list("thread-1/sub")
    assert child_before[0].next == ("y",) and len(child_before) >= 3

    saver.prune("thread-1", keep_last=1)

    child_after = saver.list("thread-1/sub")
    # the child thread was pruned as well, keeping its parked run's head (with its parent)
    # and the run's input, which the resume reads
    kept = [c.checkpoint_id for c in child_after]
    assert kept == [c.checkpoint_id for c in (*child_before[:2], child_before[-1])]
    done = graph.invoke(GraphInput.resume(), CFG)
    assert done.value("log") == ["a", "w", "x", "z", "y", "b"]


def test_the_reaper_deletes_a_completed_threads_child_threads(
    saver: BaseCheckpointSaver, worker_of: Any
) -> None:
    ttl = 3600.0
    executor = celery_executor(checkpoint_ttl=ttl)
    graph = with_subgraph(saver, executor=executor, graph_id="ttl-sub")
    worker_of(graph)
    assert graph.invoke({}, CFG).value("log") == ["a", "w", "x", "z", "y", "b"]
    assert saver.get("thread-1/sub") is not None
    report = reap(executor, now=datetime.now(UTC) + timedelta(seconds=ttl + 1))
    assert "thread-1" in report.deleted and report.errors == []
    assert saver.list("thread-1") == [] and saver.list("thread-1/sub") == []
    assert isinstance(saver, RunIndex)
    assert not [r for r in saver.list_runs(limit=500) if r.thread_id.startswith("thread-1")]
