"""Differential fuzzing: random graphs give the same results in process and on Celery workers.

A graph is a spec drawn from a seed (``apps/fuzz_graphs.py``): chains, fan-outs and joins,
conditional routes (by parity, bounded loops, label lists, ``Command``), command nodes (a
``Command`` goto among their destinations), streaming nodes (chunks, then the update), ``Send``
fan-outs, appender, reducer and overwrite keys, ``RemoveByHash``/``ReplaceAllWith``/
``MARK_FOR_REMOVAL``, non-JSON values (tuple, bytes, date, frozenset), async nodes,
``GraphInterrupt`` gates, failing nodes, ``interrupt_before``/``interrupt_after`` (with and
without ``interrupt_before_edge``), a node built as a merged subgraph (not a command node), one
built as a compiled subgraph (its child's outputs and chunks streamed with the child's ids; the
child runs' checkpoints on the child thread compared too).
The worker compiled seeds ``0..N-1`` at import; hypothesis picks a seed and what the run is
given (input, metadata, recursion limit, the updates of each resume, a second run on the
thread; the durability mode follows from those) and the test runs the same calls on the
in-process graph (``MemorySaver``) and on the worker's (``SqlSaver`` on PostgreSQL, nodes as
Celery tasks).  Every call must end the same way (state, interruption node and reason, or error
class), stream the same ``(step, node)`` outputs
and the same chunks before each step's outputs (see :func:`check_tails` for a step that stopped
the run), and leave the same checkpoint history (step, node, next, values and source of every
checkpoint).

Examples: ``LGC_FUZZ_EXAMPLES`` (default 150 here, 300 for the in-process properties);
graphs: ``LGC_FUZZ_GRAPHS`` (default 40).
"""

from __future__ import annotations

import json
import uuid
import zlib
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from fuzz_graphs import CHILD_NODES, build, compile_options, graph_id, spec_from_seed
from fuzz_support import FUZZ_GRAPHS, FuzzStack, fuzz_settings
from hypothesis import assume, event, given, note
from hypothesis import strategies as st

from celery_support import wait_until
from langgraph_celery import (
    CompileConfig,
    CompiledGraph,
    GraphError,
    GraphInput,
    GraphStateError,
    NodeError,
    RunnableConfig,
    StreamingOutput,
    StreamMode,
)
from langgraph_celery.checkpoint import MemorySaver, RunStatus, WriteKind
from langgraph_celery.worker.names import celery_task_id

#: Calls one example makes at most on its thread (the first run, then resumes / a second run).
MAX_CALLS = 5


@dataclass(frozen=True)
class Case:
    """What one example gives the graph: the first input, the metadata tag, the recursion
    limit, the update of each resume (``None``: a bare resume) and, once a run completed,
    whether a second run starts on the same thread (with ``again``)."""

    input: dict[str, Any]
    tag: str
    recursion_limit: int | None
    resumes: tuple[dict[str, Any] | None, ...]
    again: dict[str, Any] | None

    @property
    def durability(self) -> str:
        """The run's durability mode, a third of the cases each: derived from what is drawn (a
        stable hash, not ``hash()``), so that adding it kept the examples drawn before."""
        return ("sync", "exit", "async")[zlib.crc32(repr(self).encode()) % 3]


_resume_updates = st.one_of(
    st.none(),
    st.just({"approved": True}),
    st.just({"approved": False}),
    st.builds(lambda n: {"total": n}, st.integers(0, 5)),
    st.just({"log": ["human"]}),
    st.builds(lambda n: {"approved": True, "total": n}, st.integers(0, 3)),
)

cases = st.builds(
    Case,
    input=st.fixed_dictionaries(
        {"total": st.integers(0, 9), "items": st.lists(st.integers(0, 5), max_size=3)},
        optional={"x0": st.text(max_size=5), "approved": st.booleans()},
    ),
    tag=st.text(st.characters(codec="utf-8", exclude_categories=("Cs",)), max_size=6),
    recursion_limit=st.one_of(st.none(), st.integers(3, 12)),
    resumes=st.lists(_resume_updates, min_size=MAX_CALLS - 1, max_size=MAX_CALLS - 1).map(tuple),
    again=st.one_of(st.none(), st.builds(lambda n: {"total": n}, st.integers(0, 4))),
)


def _outcome(stream: Any) -> Any:
    result = stream.result
    if result.is_interruption_metadata():
        interruption = result.as_interruption_metadata()
        return ["interrupted", interruption.node_id, interruption.reason]
    return ["completed", result.as_state_data()]


def in_order(chunks: list[str]) -> list[str]:
    """``chunks`` (of one node in one step), sorted, after checking that each of the node's
    streams gave its chunks in order: a stream is the chunks with the same text before their
    index, and several tasks of one node (``Send``) may stream the same one."""
    streams: dict[str, list[int]] = {}
    for chunk in chunks:
        stream, _, index = chunk.rpartition(":")
        streams.setdefault(stream, []).append(int(index))
    for stream, indexes in streams.items():
        counts: dict[int, int] = {}
        for index in indexes:
            counts[index] = counts.get(index, 0) + 1
            assert index == 0 or counts[index] <= counts.get(index - 1, 0), (stream, indexes)
    return sorted(chunks)


def chunks_by_step(
    events: list[tuple[Any, ...]],
) -> tuple[list[tuple[int, str, list[str]]], dict[str, list[str]]]:
    """What streaming nodes streamed in a call: ``(step, node, chunks)`` for the chunks that came
    before the outputs of step ``step`` (checked in order, then sorted: parallel tasks' chunks
    interleave differently from run to run), and the chunks after the last step output (of a
    step that parked or failed) by node."""
    committed: list[tuple[int, str, list[str]]] = []
    pending: dict[str, list[str]] = {}
    for event_ in events:
        if event_[0] == "chunk":
            pending.setdefault(event_[1], []).append(event_[2])
        else:
            committed.extend((event_[1], node, in_order(c)) for node, c in pending.items())
            pending = {}
    return sorted(committed), {node: in_order(c) for node, c in pending.items()}


def check_tails(actual: list[dict[str, list[str]]], expected: list[dict[str, list[str]]]) -> None:
    """A call that stopped in a step (parked, failed) streams, on Celery, what the step's nodes
    streamed before the client read the stop: of each node, some of what it streams in process.
    A sibling of the node that stopped the run may still be running, in process as on Celery,
    so how far each stream got is timing (each is in order: :func:`in_order`): the streams
    must be the in-process ones, of the nodes that streamed there."""
    assert len(actual) == len(expected)
    for got, want in zip(actual, expected, strict=True):
        for node, chunks in got.items():
            if node in want:
                assert _streams(chunks) <= _streams(want[node]), (node, got, want)


#: in a call's tail: the outputs of a compiled child's nodes after the parent's last output
CHILD_TAIL = "(child outputs)"


def _child_tail(
    streamed: list[tuple[int, str]],
) -> tuple[list[tuple[int, str]], list[tuple[int, str]]]:
    """``streamed`` split after the parent's last output: the outputs of a compiled child's
    nodes after it are the step that stopped the call, whose sibling (the node that failed or
    parked) may stop the call on Celery before the child's outputs come; in process the call
    returns once the child has run.  They are compared as the chunks of that step are."""
    last = max((i for i, (_, node) in enumerate(streamed) if node not in CHILD_NODES), default=-1)
    return streamed[: last + 1], streamed[last + 1 :]


def _streams(chunks: list[str]) -> set[str]:
    """The streams ``chunks`` come from (a chunk is its stream's text, then its index)."""
    return {chunk.rpartition(":")[0] for chunk in chunks}


def run_case(
    graph: CompiledGraph,
    case: Case,
    thread: str,
    settle: Callable[[RunnableConfig], None] | None = None,
    children: tuple[str, ...] = (),
) -> dict[str, Any]:
    """Make the case's calls on ``thread``: how each ended and what it streamed, then the
    thread's final state and history, and the history of the child threads of compiled
    subgraph nodes ``children``.  ``settle(config)`` runs after a node stopped the run
    (interrupted it or failed), before it is resumed."""
    config = RunnableConfig(
        thread_id=thread,
        stream_mode=StreamMode.SNAPSHOTS,
        metadata={"tag": case.tag},
        recursion_limit=case.recursion_limit,
        durability=case.durability,  # type: ignore[arg-type]
    )
    calls: list[dict[str, Any]] = []
    tails: list[dict[str, list[str]]] = []
    next_input: Any = case.input
    resumes = list(case.resumes)
    again = case.again
    while next_input is not None and len(calls) < MAX_CALLS:
        streamed: list[tuple[int, str]] = []
        events: list[tuple[Any, ...]] = []
        stream = graph.stream(next_input, config)
        try:
            for output in stream:
                if isinstance(output, StreamingOutput):
                    events.append(("chunk", output.node, output.chunk))
                else:
                    streamed.append((output.step, output.node))
                    if output.node not in CHILD_NODES:
                        # (a compiled child's outputs come while the parent's step runs, in
                        # process as they come: chunks of a sibling may come before or after)
                        events.append(("step", output.step))
        except GraphError as error:
            outcome: Any = ["error", type(error).__name__, getattr(error, "error_type", None)]
        else:
            outcome = _outcome(stream)
        chunks, tail = chunks_by_step(events)
        late: list[tuple[int, str]] = []
        if outcome[0] != "completed":
            streamed, late = _child_tail(streamed)
        calls.append({"streamed": sorted(streamed), "chunks": chunks, "outcome": outcome})
        tails.append({**tail, CHILD_TAIL: [f"{step}:{node}:" for step, node in late]})
        stopped_by_a_node = outcome[0] == "interrupted" and outcome[2] is not None
        if settle is not None and (stopped_by_a_node or outcome[1:2] == ["NodeError"]):
            settle(config)
        if outcome[0] == "completed":
            next_input, again = again, None
        else:  # interrupted or failed: the run resumes (a failed step runs again)
            next_input = GraphInput.resume(resumes.pop(0)) if resumes else None
    history = graph.get_state_history(config)
    saver = graph.config.checkpoint_saver
    assert saver is not None
    return {
        "children": [
            (c.step, c.next, dict(c.values), c.metadata.get("source"))
            for child in children
            for c in reversed(saver.list(f"{thread}/{child}"))
        ],
        "calls": calls,
        "tails": tails,
        "state": dict(history[0].state.data) if history else None,
        "history": [
            (s.step, s.node, s.next, dict(s.state.data), s.metadata.get("source"))
            for s in reversed(history)
        ],
    }


def settle_on(stack: FuzzStack, children: tuple[str, ...]) -> Callable[[RunnableConfig], None]:
    """Wait until every task of the thread's latest step has finished on the worker, and the
    child run of each compiled subgraph node among them (``children``) has ended or parked.

    A client learns of a park (or failure) as soon as the node that parked marks it, while the
    other nodes of that step may still be running; in process the call returns once they all
    ran.  A resume sent in between runs those nodes again, on the resumed state: a known
    difference, kept out of the comparison by waiting for them.  A compiled subgraph node's
    task hands its child run to the workers, so its run is waited for as well.  A step of one
    task has no other nodes (and, carried with "exit" or "async", its task stores no result
    to wait for).
    """

    def settle(config: RunnableConfig) -> None:
        latest = stack.saver.get(config.thread_id)
        if latest is None or len(latest.tasks) < 2:  # (the entry point failed: nothing ran)
            return
        ids = [celery_task_id(latest.run_id, latest.checkpoint_id, t.id) for t in latest.tasks]
        results = [stack.app.AsyncResult(task_id) for task_id in ids]
        wait_until(lambda: all(r.ready() for r in results), 20, 0.01, "the step's node tasks")
        for child in {t.node for t in latest.tasks} & set(children):
            thread = f"{config.thread_id}/{child}"
            wait_until(lambda t=thread: not _child_running(stack, t), 20, 0.01, thread)

    return settle


def _child_running(stack: FuzzStack, thread: str) -> bool:
    """Whether the latest run on child thread ``thread`` is running."""
    latest = stack.saver.get(thread)
    run = stack.saver.get_run(latest.run_id) if latest is not None else None
    return run is not None and run.status is RunStatus.RUNNING


def local_graph(spec: Mapping[str, Any], **overrides: Any) -> CompiledGraph:
    options = {**compile_options(spec), **overrides}
    return build(spec).compile(CompileConfig(checkpoint_saver=MemorySaver(), **options))


def _describe(spec: Mapping[str, Any], case: Case) -> None:
    note(f"spec: {json.dumps(spec)}")
    note(f"case: {case!r}")
    event("a merged subgraph" if spec.get("merged") else "no merged subgraph")
    event("a compiled subgraph" if spec.get("compiled") else "no compiled subgraph")


@pytest.mark.timeout(900)
@fuzz_settings(150)
@given(seed=st.integers(0, FUZZ_GRAPHS - 1), case=cases)
def test_celery_runs_match_in_process_runs(fuzz_stack: FuzzStack, seed: int, case: Case) -> None:
    spec = spec_from_seed(seed)
    _describe(spec, case)
    thread = f"diff-{seed}-{uuid.uuid4().hex[:12]}"
    children = (spec["compiled"],) if spec.get("compiled") else ()
    expected = run_case(local_graph(spec), case, thread, children=children)
    graph = fuzz_stack.graph(graph_id(seed))
    actual = run_case(graph, case, thread, settle_on(fuzz_stack, children), children)
    for call in expected["calls"]:
        kind = call["outcome"][0]
        event(f"call ended: {kind} {call['outcome'][1] if kind == 'error' else ''}")
    event(f"checkpoints: {len(expected['history']) // 5 * 5}+")
    if any(call["chunks"] for call in expected["calls"]):
        event("streamed chunks")
    event(f"durability {case.durability}")
    assert actual["calls"] == expected["calls"]
    check_tails(actual["tails"], expected["tails"])
    assert actual["state"] == expected["state"]
    if case.durability == "exit":
        # stored where the run stops, in both; on Celery also before a step of several nodes
        # or one that starts a child run (and a child run's steps): the last ones agree
        assert actual["history"][-1:] == expected["history"][-1:]
        return
    assert actual["history"] == expected["history"]
    assert actual["children"] == expected["children"]


# -- in process only: cheap properties over many more graphs --------------------------------------


@fuzz_settings(300)
@given(seed=st.integers(0, 10**6), case=cases)
def test_in_process_runs_are_deterministic(seed: int, case: Case) -> None:
    """Two in-process runs of one spec (fresh graphs, fresh savers) agree exactly: the
    reference the Celery comparison relies on has no hidden nondeterminism (thread timing of
    parallel nodes, set iteration order, ...)."""
    spec = spec_from_seed(seed)
    _describe(spec, case)
    first = run_case(local_graph(spec), case, "t")
    second = run_case(local_graph(spec), case, "t")
    first_tails, second_tails = first.pop("tails"), second.pop("tails")
    assert first == second
    # In a step that stopped the run (a node failed or parked), a streaming sibling may still be
    # running: how far it got before the stop is thread timing.  Of each node, one run's chunks
    # are a prefix of the other's.
    assert len(first_tails) == len(second_tails)
    for one, other in zip(first_tails, second_tails, strict=True):
        for node in set(one) | set(other):
            a, b = one.get(node, []), other.get(node, [])
            shorter, longer = (a, b) if len(a) <= len(b) else (b, a)
            assert longer[: len(shorter)] == shorter, (node, one, other)


@fuzz_settings(300)
@given(seed=st.integers(0, 10**6), case=cases)
def test_static_interrupts_do_not_change_where_a_run_ends(seed: int, case: Case) -> None:
    """Stopping at ``interrupt_before``/``interrupt_after`` and resuming with no update ends in
    the same state as running straight through (gates resumed with the same updates)."""
    spec = spec_from_seed(seed)
    assume(spec["interrupt_before"] or spec["interrupt_after"])
    _describe(spec, case)
    straight = local_graph(spec, interrupt_before=(), interrupt_after=())
    stopping = local_graph(spec)
    ends = []
    for graph in (straight, stopping):
        config = RunnableConfig(thread_id="t", metadata={"tag": case.tag}, recursion_limit=50)
        next_input: Any = case.input
        for _ in range(20):
            stream = graph.stream(next_input, config)
            try:
                for _output in stream:
                    pass
            except GraphError as error:
                # (where the state stops differs: interrupt_before_edge runs a failing route
                # on resume, after the step's checkpoint, instead of before it)
                ends.append(["error", type(error).__name__])
                break
            result = stream.result
            if not result.is_interruption_metadata():
                ends.append(["completed", result.as_state_data()])
                break
            gate = result.as_interruption_metadata().reason is not None
            next_input = GraphInput.resume({"approved": True} if gate else None)
        else:
            ends.append(["still interrupted"])
    assume(ends[0][:2] != ["error", "GraphRecursionError"])  # limits count per invocation
    assert ends[1] == ends[0]


def test_a_failing_entry_point_leaves_the_thread_usable_on_celery(fuzz_stack: FuzzStack) -> None:
    """In process, a run whose conditional entry point raises leaves the thread as it was; the
    same calls on the worker must too."""
    from fuzz_app import entry_graph

    local = entry_graph().compile(CompileConfig(checkpoint_saver=MemorySaver()))
    for graph in (local, fuzz_stack.graph("fixed-entry")):
        thread = f"entry-{uuid.uuid4().hex[:8]}"
        config = RunnableConfig(thread_id=thread)
        assert graph.invoke({"thread": thread}, config).data["log"] == ["a"]
        with pytest.raises(NodeError, match="the entry point fails"):
            graph.invoke({"fail": True}, config)
        assert graph.invoke({"fail": False}, config).data["log"] == ["a", "a"]


def test_a_claim_left_by_a_dead_client_is_taken_over_once_stale(fuzz_stack: FuzzStack) -> None:
    """A client that died between claiming a thread's latest checkpoint and storing its run
    leaves a claim: refused as busy while it is younger than ``stalled_after``, taken over
    after that."""
    graph = fuzz_stack.graph("fixed-entry")
    saver = fuzz_stack.saver
    stalled_after = fuzz_stack.bundle.executor.stalled_after
    thread = f"claim-{uuid.uuid4().hex[:8]}"
    config = RunnableConfig(thread_id=thread)
    assert graph.invoke({"thread": thread}, config).data["log"] == ["a"]
    latest = saver.get(thread)
    claimed_at = datetime.now(UTC)
    claim = WriteKind.CLAIM
    saver.put_writes(
        thread,
        latest.checkpoint_id,
        "__claim__",
        "dead",
        {"claimed_at": claimed_at.isoformat()},
        claim,
    )
    with pytest.raises(GraphStateError, match="busy: another process just started"):
        graph.invoke({"fail": False}, config)
    assert saver.get(thread) == latest
    saver.delete_write(thread, latest.checkpoint_id, "__claim__", "dead")
    old = claimed_at - timedelta(seconds=stalled_after + 1)
    saver.put_writes(
        thread, latest.checkpoint_id, "__claim__", "dead", {"claimed_at": old.isoformat()}, claim
    )
    assert graph.invoke({"fail": False}, config).data["log"] == ["a", "a"]
    claims = [w for w in saver.get_writes(thread, latest.checkpoint_id) if w.task_id == "__claim__"]
    assert [w.node for w in claims] != ["dead"]  # the dead client's claim was replaced
