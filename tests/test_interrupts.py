"""SPEC §5: interruptions and resume -- on every checkpoint saver."""

from __future__ import annotations

import asyncio
import threading
from typing import Any

import pytest

from langgraph_celery import (
    END,
    START,
    AgentState,
    Channels,
    CompileConfig,
    CompiledGraph,
    GraphDefinitionError,
    GraphInput,
    GraphInterrupt,
    GraphStateError,
    InterruptibleAction,
    InterruptionMetadata,
    NodeError,
    RunnableConfig,
    StateGraph,
)
from langgraph_celery.checkpoint import BaseCheckpointSaver

CFG = RunnableConfig(thread_id="thread-1")


class Calls:
    """Thread-safe call counter per node."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.counts: dict[str, int] = {}

    def hit(self, node: str) -> int:
        with self._lock:
            self.counts[node] = self.counts.get(node, 0) + 1
            return self.counts[node]

    def __getitem__(self, node: str) -> int:
        return self.counts.get(node, 0)


def appending(name: str, calls: Calls | None = None) -> Any:
    def action(state: AgentState) -> dict[str, Any]:
        if calls is not None:
            calls.hit(name)
        return {"log": name}

    return action


def linear(saver: BaseCheckpointSaver, calls: Calls | None = None, **config: Any) -> CompiledGraph:
    """START -> a -> b -> c -> END."""
    graph = StateGraph({"log": Channels.appender()})
    for node in ("a", "b", "c"):
        graph.add_node(node, appending(node, calls))
    graph.add_edge(START, "a").add_edge("a", "b").add_edge("b", "c").add_edge("c", END)
    return graph.compile(CompileConfig(checkpoint_saver=saver, **config))


def routed(saver: BaseCheckpointSaver, **config: Any) -> CompiledGraph:
    """START -> a -(route on "go", default "b")-> b | c -> END."""
    graph = StateGraph({"log": Channels.appender()})
    for node in ("a", "b", "c"):
        graph.add_node(node, appending(node))
    graph.add_edge(START, "a")
    graph.add_conditional_edges("a", lambda s: s.value("go", "b"), {"b": "b", "c": "c"})
    graph.add_edge("b", END).add_edge("c", END)
    return graph.compile(CompileConfig(checkpoint_saver=saver, **config))


def run(graph: CompiledGraph, graph_input: Any, config: RunnableConfig = CFG) -> Any:
    """Stream to the end; (node ids streamed, GraphResult)."""
    stream = graph.stream(graph_input, config)
    nodes = [output.node for output in stream]
    return nodes, stream.result


# -- static interrupts ------------------------------------------------------------------------


def test_interrupt_before(saver: BaseCheckpointSaver) -> None:
    calls = Calls()
    graph = linear(saver, calls, interrupt_before=("b",))
    nodes, result = run(graph, {"x": 1})
    assert nodes == [START, "a"]
    assert result.is_interruption_metadata()
    metadata = result.as_interruption_metadata()
    assert isinstance(metadata, InterruptionMetadata)
    assert metadata.node_id == "b"
    assert dict(metadata.state.data) == {"log": ["a"], "x": 1}
    assert calls["b"] == 0

    snapshot = graph.get_state(CFG)
    assert snapshot.next == ("b",)
    assert snapshot.values == {"log": ["a"], "x": 1}

    # the resumed interrupt_before node runs without stopping again
    nodes, result = run(graph, GraphInput.resume())
    assert nodes == ["b", "c", END]
    assert result.is_state_data()
    assert result.as_state_data() == {"log": ["a", "b", "c"], "x": 1}
    assert calls.counts == {"a": 1, "b": 1, "c": 1}
    assert graph.get_state(CFG).next == ()


def test_new_input_on_interrupted_thread_starts_over(saver: BaseCheckpointSaver) -> None:
    calls = Calls()
    graph = linear(saver, calls, interrupt_before=("b",))
    graph.invoke({"x": 1}, CFG)
    _, result = run(graph, {"x": 2})
    # a new run from START on the thread's latest state; the parked b is dropped
    assert result.as_interruption_metadata().node_id == "b"
    assert dict(result.as_interruption_metadata().state.data) == {"log": ["a", "a"], "x": 2}
    assert calls.counts == {"a": 2}
    final = graph.invoke(GraphInput.resume(), CFG)
    assert final.value("log") == ["a", "a", "b", "c"]
    assert calls.counts == {"a": 2, "b": 1, "c": 1}


def test_none_as_input_continues_a_pending_run_and_else_starts_one(
    saver: BaseCheckpointSaver,
) -> None:
    """``invoke(None, config)`` continues the thread's parked run, as ``GraphInput.resume()``
    (LangGraph's ``invoke(None)``, LangGraph4j's ``stream(null)``); on a thread whose run
    completed it starts a new one, as ``GraphInput.no_args()``; ``GraphInput.no_args()``
    itself always starts a new run."""
    calls = Calls()
    graph = linear(saver, calls, interrupt_before=("b",))
    graph.invoke({"x": 1}, CFG)
    outputs = [o.node for o in graph.stream(None, CFG)]
    assert outputs == ["b", "c", END]  # resumed: no START, b not stopped at again
    assert graph.get_state(CFG).values["log"] == ["a", "b", "c"]
    assert calls.counts == {"a": 1, "b": 1, "c": 1}
    # nothing pending: a new run from START (which parks before b again)
    assert run(graph, None)[1].as_interruption_metadata().node_id == "b"
    assert calls.counts == {"a": 2, "b": 1, "c": 1}
    # an explicit no_args() on the parked thread starts over rather than resume
    assert run(graph, GraphInput.no_args())[1].as_interruption_metadata().node_id == "b"
    assert calls.counts == {"a": 3, "b": 1, "c": 1}
    assert graph.invoke(None, CFG).value("log") == ["a", "b", "c", "a", "a", "b", "c"]


def test_invoke_returns_state_at_interruption(saver: BaseCheckpointSaver) -> None:
    graph = linear(saver, interrupt_before=("c",))
    state = graph.invoke({}, CFG)
    assert state.value("log") == ["a", "b"]
    last = graph.invoke_final(GraphInput.resume(), CFG)
    assert last is not None
    assert last.node == END
    assert last.state.value("log") == ["a", "b", "c"]


def test_resume_with_update_merges_through_reducers(saver: BaseCheckpointSaver) -> None:
    graph = linear(saver, interrupt_before=("b",))
    graph.invoke({"x": 1}, CFG)
    final = graph.invoke(GraphInput.resume({"log": ["h1", "h2"], "x": 2}), CFG)
    assert dict(final.data) == {"log": ["a", "h1", "h2", "b", "c"], "x": 2}
    # the resume is recorded as its own checkpoint
    sources = [s.metadata["source"] for s in graph.get_state_history(CFG)]
    assert sources == ["loop", "loop", "resume", "loop", "input"]


def test_interrupt_before_stops_again_when_the_node_comes_round_again(
    saver: BaseCheckpointSaver,
) -> None:
    calls = Calls()
    graph = StateGraph({"log": Channels.appender()})
    graph.add_node("a", appending("a", calls)).add_node("b", appending("b", calls))
    graph.add_edge(START, "a").add_edge("a", "b")
    graph.add_conditional_edges("b", lambda s: "a" if len(s.value("log")) < 4 else END)
    compiled = graph.compile(CompileConfig(checkpoint_saver=saver, interrupt_before=("b",)))

    _, result = run(compiled, {})
    assert result.as_interruption_metadata().node_id == "b"
    _, result = run(compiled, GraphInput.resume())
    assert result.is_interruption_metadata()
    assert result.as_interruption_metadata().node_id == "b"
    assert result.as_interruption_metadata().state.value("log") == ["a", "b", "a"]
    _, result = run(compiled, GraphInput.resume())
    assert result.as_state_data()["log"] == ["a", "b", "a", "b"]
    assert calls.counts == {"a": 2, "b": 2}


def test_interrupt_after_evaluates_edges_before_stopping(saver: BaseCheckpointSaver) -> None:
    graph = routed(saver, interrupt_after=("a",))
    nodes, result = run(graph, {})
    assert nodes == [START, "a"]
    metadata = result.as_interruption_metadata()
    assert metadata.node_id == "a"
    assert metadata.state.value("log") == ["a"]
    snapshot = graph.get_state(CFG)
    assert snapshot.values["log"] == ["a"]  # a's step is merged and saved
    assert snapshot.next == ("b",)  # the route already ran (go was unset -> b)

    # the update given on resume comes after the routing decision
    final = graph.invoke(GraphInput.resume({"go": "c"}), CFG)
    assert final.value("log") == ["a", "b"]
    assert final.value("go") == "c"


def test_interrupt_after_before_edge_routes_with_resumed_state(
    saver: BaseCheckpointSaver,
) -> None:
    graph = routed(saver, interrupt_after=("a",), interrupt_before_edge=True)
    nodes, result = run(graph, {})
    assert nodes == [START, "a"]
    metadata = result.as_interruption_metadata()
    assert metadata.node_id == "a"
    assert metadata.state.value("log") == ["a"]
    assert graph.get_state(CFG).values["log"] == ["a"]

    # the route reads "go", which only the resume update sets
    nodes, result = run(graph, GraphInput.resume({"go": "c"}))
    assert nodes[-1] == END
    assert "c" in nodes and "b" not in nodes
    assert result.as_state_data() == {"log": ["a", "c"], "go": "c"}


def test_interrupt_after_before_edge_resume_without_update(saver: BaseCheckpointSaver) -> None:
    graph = routed(saver, interrupt_after=("a",), interrupt_before_edge=True)
    graph.invoke({}, CFG)
    final = graph.invoke(GraphInput.resume(), CFG)
    assert final.value("log") == ["a", "b"]
    with pytest.raises(GraphStateError):
        graph.invoke(GraphInput.resume(), CFG)


@pytest.mark.parametrize("before_edge", [False, True], ids=["edges-first", "before-edge"])
def test_interrupt_after_last_node_then_resume_completes(
    saver: BaseCheckpointSaver, before_edge: bool
) -> None:
    """c's edge leads to END: the run stops after c without completing; a resume completes it
    (END, state data) and only then is there nothing left to resume."""
    calls = Calls()
    graph = linear(saver, calls, interrupt_after=("c",), interrupt_before_edge=before_edge)
    nodes, result = run(graph, {})
    assert nodes == [START, "a", "b", "c"]
    assert result.as_interruption_metadata().node_id == "c"
    assert graph.get_state(CFG).values["log"] == ["a", "b", "c"]
    assert graph.get_state(CFG).next == ()

    nodes, result = run(graph, GraphInput.resume({"x": 1}))
    assert nodes == [END]
    assert result.as_state_data() == {"log": ["a", "b", "c"], "x": 1}
    assert calls.counts == {"a": 1, "b": 1, "c": 1}
    with pytest.raises(GraphStateError, match="nothing pending"):
        graph.invoke(GraphInput.resume(), CFG)


def test_interrupts_need_a_saver() -> None:
    graph = StateGraph().add_node("a", lambda s: None).add_edge(START, "a").add_edge("a", END)
    with pytest.raises(GraphDefinitionError):
        graph.compile(CompileConfig(interrupt_before=("a",)))


# -- dynamic interrupts: InterruptibleAction ------------------------------------------------------


class Approval:
    """A node that asks for approval before it runs."""

    def __init__(self) -> None:
        self.asked: list[tuple[str, dict[str, Any], str | None]] = []
        self.ran = 0

    def interrupt(
        self, node_id: str, state: AgentState, config: RunnableConfig
    ) -> InterruptionMetadata | None:
        self.asked.append((node_id, dict(state.data), config.node_id))
        if state.value("approved"):
            return None
        return InterruptionMetadata(node_id, state, "needs approval", {"ticket": 7})

    def __call__(self, state: AgentState) -> dict[str, Any]:
        self.ran += 1
        return {"log": "approval"}


def approval_graph(saver: BaseCheckpointSaver, action: Approval) -> CompiledGraph:
    graph = StateGraph({"log": Channels.appender()})
    graph.add_node("a", appending("a")).add_node("approval", action)
    graph.add_edge(START, "a").add_edge("a", "approval").add_edge("approval", END)
    return graph.compile(CompileConfig(checkpoint_saver=saver))


def test_interruptible_action_stops_with_its_metadata(saver: BaseCheckpointSaver) -> None:
    action = Approval()
    assert isinstance(action, InterruptibleAction)
    graph = approval_graph(saver, action)

    nodes, result = run(graph, {"x": 1})
    assert nodes == [START, "a"]
    metadata = result.as_interruption_metadata()
    assert metadata.node_id == "approval"
    assert metadata.reason == "needs approval"
    assert dict(metadata.metadata) == {"ticket": 7}
    assert dict(metadata.state.data) == {"log": ["a"], "x": 1}
    assert action.asked == [("approval", {"log": ["a"], "x": 1}, "approval")]
    assert action.ran == 0
    assert graph.get_state(CFG).next == ("approval",)

    # resumed without approval: asked again before it runs, and it stops the run again
    nodes, result = run(graph, GraphInput.resume())
    assert nodes == []
    assert result.as_interruption_metadata().node_id == "approval"
    assert len(action.asked) == 2
    assert action.ran == 0
    assert graph.get_state(CFG).next == ("approval",)

    # resumed with the approval in the update: asked with the merged state, and it runs
    nodes, result = run(graph, GraphInput.resume({"approved": True}))
    assert nodes == ["approval", END]
    assert result.as_state_data() == {"log": ["a", "approval"], "x": 1, "approved": True}
    assert action.asked[-1] == ("approval", {"log": ["a"], "x": 1, "approved": True}, "approval")
    assert len(action.asked) == 3
    assert action.ran == 1


def test_a_resumed_interruptible_action_reads_the_resume_config(
    saver: BaseCheckpointSaver,
) -> None:
    """LangGraph4j's ``InterruptionTest.dynamicInterruption``: the action is asked on resume
    too, with the resume's config, whose metadata may tell it to let the node run."""

    class Flagged(Approval):
        def interrupt(
            self, node_id: str, state: AgentState, config: RunnableConfig
        ) -> InterruptionMetadata | None:
            self.asked.append((node_id, dict(state.data), config.node_id))
            if config.metadata.get("go_on"):
                return None
            return InterruptionMetadata(node_id, state, "stop")

    action = Flagged()
    graph = approval_graph(saver, action)
    run(graph, {"x": 1})
    assert run(graph, GraphInput.resume())[0] == []
    nodes, _ = run(graph, GraphInput.resume(), CFG.put_metadata("go_on", True))
    assert nodes == ["approval", END]
    assert action.ran == 1
    assert len(action.asked) == 3


def test_interruptible_action_that_lets_the_run_through(saver: BaseCheckpointSaver) -> None:
    action = Approval()
    graph = approval_graph(saver, action)
    final = graph.invoke({"approved": True}, CFG)
    assert final.value("log") == ["a", "approval"]
    assert len(action.asked) == 1
    assert action.ran == 1


class AsyncApproval:
    """Async interrupt() and async node taking (state, config)."""

    def __init__(self) -> None:
        self.asked = 0
        self.configs: list[str | None] = []

    async def interrupt(
        self, node_id: str, state: AgentState, config: RunnableConfig
    ) -> InterruptionMetadata | None:
        self.asked += 1
        await asyncio.sleep(0)
        if state.value("approved"):
            return None
        return InterruptionMetadata(node_id, state, "async approval")

    async def __call__(self, state: AgentState, config: RunnableConfig) -> dict[str, Any]:
        self.configs.append(config.node_id)
        return {"log": "approved"}


def test_async_interruptible_action(saver: BaseCheckpointSaver) -> None:
    action = AsyncApproval()
    graph = StateGraph({"log": Channels.appender()})
    graph.add_node("gate", action).add_edge(START, "gate").add_edge("gate", END)
    compiled = graph.compile(CompileConfig(checkpoint_saver=saver))
    nodes, result = run(compiled, {})
    assert nodes == [START]
    assert result.as_interruption_metadata().node_id == "gate"
    assert result.as_interruption_metadata().reason == "async approval"
    assert compiled.get_state(CFG).next == ("gate",)
    final = compiled.invoke(GraphInput.resume({"approved": True}), CFG)
    assert final.value("log") == ["approved"]
    assert action.asked == 2
    assert action.configs == ["gate"]


# -- dynamic interrupts: GraphInterrupt ---------------------------------------------------------


def test_graph_interrupt_stops_at_the_node_and_reruns_it(saver: BaseCheckpointSaver) -> None:
    calls = Calls()

    def ask(state: AgentState) -> dict[str, Any]:
        calls.hit("ask")
        if state.value("answer") is None:
            raise GraphInterrupt("what is the answer?", {"field": "answer"})
        return {"log": f"answer={state.value('answer')}"}

    graph = StateGraph({"log": Channels.appender()})
    graph.add_node("a", appending("a")).add_node("ask", ask).add_node("c", appending("c"))
    graph.add_edge(START, "a").add_edge("a", "ask").add_edge("ask", "c").add_edge("c", END)
    compiled = graph.compile(CompileConfig(checkpoint_saver=saver))

    nodes, result = run(compiled, {})
    assert nodes == [START, "a"]
    metadata = result.as_interruption_metadata()
    assert metadata.node_id == "ask"
    assert metadata.reason == "what is the answer?"
    assert dict(metadata.metadata) == {"field": "answer"}
    assert dict(metadata.state.data) == {"log": ["a"]}
    assert calls["ask"] == 1
    snapshot = compiled.get_state(CFG)
    assert snapshot.next == ("ask",)
    assert snapshot.values == {"log": ["a"]}

    # resuming without the answer: it runs again and interrupts again
    _, result = run(compiled, GraphInput.resume())
    assert result.as_interruption_metadata().node_id == "ask"
    assert calls["ask"] == 2

    nodes, result = run(compiled, GraphInput.resume({"answer": 42}))
    assert nodes == ["ask", "c", END]
    assert result.as_state_data() == {"log": ["a", "answer=42", "c"], "answer": 42}
    assert calls["ask"] == 3


def test_graph_interrupt_update_discarded_sibling_kept(saver: BaseCheckpointSaver) -> None:
    calls = Calls()

    def sibling(state: AgentState) -> dict[str, Any]:
        calls.hit("sibling")
        return {"log": "sibling", "sibling_done": True}

    def ask(state: AgentState) -> dict[str, Any]:
        n = calls.hit("ask")
        if not state.value("ok"):
            raise GraphInterrupt(f"attempt {n}")
        return {"log": "ask"}

    def join(state: AgentState) -> dict[str, Any]:
        calls.hit("join")
        return {"log": "join", "seen": sorted(state.value("log"))}

    graph = StateGraph({"log": Channels.appender()})
    graph.add_node("sibling", sibling).add_node("ask", ask).add_node("join", join)
    graph.add_edge(START, "sibling").add_edge(START, "ask")
    graph.add_edge(["sibling", "ask"], "join").add_edge("join", END)
    compiled = graph.compile(CompileConfig(checkpoint_saver=saver))

    _, result = run(compiled, {})
    metadata = result.as_interruption_metadata()
    assert metadata.node_id == "ask"
    assert metadata.reason == "attempt 1"
    assert calls.counts == {"sibling": 1, "ask": 1}
    assert compiled.get_state(CFG).next == ("sibling", "ask")

    nodes, result = run(compiled, GraphInput.resume({"ok": True}))
    # the sibling's update is kept and it does not run again; ask runs again
    assert calls.counts == {"sibling": 1, "ask": 2, "join": 1}
    assert nodes == ["sibling", "ask", "join", END]
    state = result.as_state_data()
    assert state["log"] == ["sibling", "ask", "join"]
    assert state["sibling_done"] is True
    assert state["seen"] == ["ask", "sibling"]


def test_graph_interrupt_in_parallel_step_twice(saver: BaseCheckpointSaver) -> None:
    """Interrupted again on the first resume: the sibling still never runs twice."""
    calls = Calls()

    def sibling(state: AgentState) -> dict[str, Any]:
        calls.hit("sibling")
        return {"log": "sibling"}

    def ask(state: AgentState) -> dict[str, Any]:
        calls.hit("ask")
        if not state.value("ok"):
            raise GraphInterrupt("wait")
        return {"log": "ask"}

    graph = StateGraph({"log": Channels.appender()})
    graph.add_node("sibling", sibling).add_node("ask", ask)
    graph.add_edge(START, "sibling").add_edge(START, "ask")
    graph.add_edge("sibling", END).add_edge("ask", END)
    compiled = graph.compile(CompileConfig(checkpoint_saver=saver))
    compiled.invoke({}, CFG)
    compiled.invoke(GraphInput.resume(), CFG)
    assert calls.counts == {"sibling": 1, "ask": 2}
    final = compiled.invoke(GraphInput.resume({"ok": True}), CFG)
    assert final.value("log") == ["sibling", "ask"]
    assert calls.counts == {"sibling": 1, "ask": 3}


def test_graph_interrupt_in_async_node(saver: BaseCheckpointSaver) -> None:
    calls = Calls()

    async def ask(state: AgentState) -> dict[str, Any]:
        calls.hit("ask")
        await asyncio.sleep(0)
        if state.value("answer") is None:
            raise GraphInterrupt("async question")
        return {"log": "ask"}

    graph = StateGraph({"log": Channels.appender()})
    graph.add_node("ask", ask).add_edge(START, "ask").add_edge("ask", END)
    compiled = graph.compile(CompileConfig(checkpoint_saver=saver))

    async def main() -> tuple[Any, Any]:
        stream = compiled.astream({}, CFG)
        async for _ in stream:
            pass
        first = stream.result
        final = await compiled.ainvoke(GraphInput.resume({"answer": 1}), CFG)
        return first, final

    first, final = asyncio.run(main())
    assert first.as_interruption_metadata().reason == "async question"
    assert final.value("log") == ["ask"]
    assert calls["ask"] == 2


# -- resume errors ------------------------------------------------------------------------------


def test_resume_when_nothing_pending_is_graph_state_error(saver: BaseCheckpointSaver) -> None:
    graph = linear(saver)
    graph.invoke({}, CFG)
    history_before = len(graph.get_state_history(CFG))
    with pytest.raises(GraphStateError, match="nothing pending"):
        graph.invoke(GraphInput.resume(), CFG)
    with pytest.raises(GraphStateError):
        graph.invoke(GraphInput.resume({"x": 1}), CFG)
    assert len(graph.get_state_history(CFG)) == history_before


def test_resume_on_empty_thread_is_graph_state_error(saver: BaseCheckpointSaver) -> None:
    graph = linear(saver, interrupt_before=("b",))
    with pytest.raises(GraphStateError):
        graph.invoke(GraphInput.resume(), RunnableConfig(thread_id="never-used"))
    with pytest.raises(GraphStateError):
        list(graph.stream(GraphInput.resume({"x": 1}), RunnableConfig(thread_id="never-used")))
    assert list(saver.list("never-used")) == []


@pytest.mark.parametrize("pinned", [False, True], ids=["thread-config", "checkpoint-config"])
def test_second_resume_of_the_same_parked_checkpoint(
    saver: BaseCheckpointSaver, pinned: bool
) -> None:
    """Two resumes of one parked checkpoint: the second (after the first completed) is a
    GraphStateError, whether it names the thread or the parked checkpoint itself."""
    calls = Calls()
    graph = linear(saver, calls, interrupt_before=("b",))
    graph.invoke({}, CFG)
    parked = graph.get_state(CFG)
    config = parked.config if pinned else CFG
    assert config is not None
    first = graph.invoke(GraphInput.resume(), config)
    assert first.value("log") == ["a", "b", "c"]
    history = len(graph.get_state_history(CFG))
    with pytest.raises(GraphStateError, match="nothing pending"):
        graph.invoke(GraphInput.resume({"log": "again"}), config)
    assert calls.counts == {"a": 1, "b": 1, "c": 1}
    assert graph.get_state(CFG).values["log"] == ["a", "b", "c"]
    assert len(graph.get_state_history(CFG)) == history
    # forking from the parked checkpoint is still possible, explicitly: the fork stops before
    # b again (a fork is not a resume), and resuming the thread then runs the branch
    forked = graph.invoke(None, parked.config)
    assert forked.value("log") == ["a"]
    assert graph.get_state(CFG).next == ("b",)
    assert calls.counts == {"a": 1, "b": 1, "c": 1}
    assert graph.invoke(GraphInput.resume(), CFG).value("log") == ["a", "b", "c"]
    assert calls.counts == {"a": 1, "b": 2, "c": 2}


def test_resume_naming_the_latest_parked_checkpoint(saver: BaseCheckpointSaver) -> None:
    graph = linear(saver, interrupt_before=("b",))
    graph.invoke({}, CFG)
    parked = graph.get_state(CFG)
    assert parked.config is not None
    final = graph.invoke(GraphInput.resume({"log": "h"}), parked.config)
    assert final.value("log") == ["a", "h", "b", "c"]


def test_resume_from_another_saver_handle(saver_factory: Any) -> None:
    """Park with one saver handle, resume with a graph compiled on another (as another process
    would)."""
    calls = Calls()
    first = linear(saver_factory(), calls, interrupt_before=("b",))
    first.invoke({"x": 1}, CFG)
    second = linear(saver_factory(), calls, interrupt_before=("b",))
    assert second.get_state(CFG).next == ("b",)
    final = second.invoke(GraphInput.resume({"x": 2}), CFG)
    assert dict(final.data) == {"log": ["a", "b", "c"], "x": 2}
    assert calls.counts == {"a": 1, "b": 1, "c": 1}
    with pytest.raises(GraphStateError):
        first.invoke(GraphInput.resume(), CFG)


def test_unserializable_resume_update_leaves_the_thread_parked(
    saver: BaseCheckpointSaver,
) -> None:
    from langgraph_celery import SerializationError

    calls = Calls()
    graph = linear(saver, calls, interrupt_before=("b",))
    graph.invoke({}, CFG)
    with pytest.raises(SerializationError, match="handle"):
        graph.invoke(GraphInput.resume({"handle": object()}), CFG)
    assert calls["b"] == 0
    assert graph.get_state(CFG).next == ("b",)
    assert graph.invoke(GraphInput.resume(), CFG).value("log") == ["a", "b", "c"]


# -- failures ----------------------------------------------------------------------------------


def test_failed_node_then_resume_runs_the_failed_step(saver: BaseCheckpointSaver) -> None:
    broken = {"on": True}
    calls = Calls()

    def flaky(state: AgentState) -> dict[str, Any]:
        calls.hit("b")
        if broken["on"]:
            raise RuntimeError("backend down")
        return {"log": "b"}

    graph = StateGraph({"log": Channels.appender()})
    graph.add_node("a", appending("a", calls)).add_node("b", flaky)
    graph.add_node("c", appending("c", calls))
    graph.add_edge(START, "a").add_edge("a", "b").add_edge("b", "c").add_edge("c", END)
    compiled = graph.compile(CompileConfig(checkpoint_saver=saver))

    with pytest.raises(NodeError) as info:
        compiled.invoke({"x": 1}, CFG)
    error = info.value
    assert error.node_id == "b"
    assert error.error_type == "RuntimeError"
    assert isinstance(error.__cause__, RuntimeError)
    assert "backend down" in str(error)

    # the last checkpoint is intact and still names the failed node
    snapshot = compiled.get_state(CFG)
    assert snapshot.next == ("b",)
    assert snapshot.values == {"log": ["a"], "x": 1}
    assert len(compiled.get_state_history(CFG)) == 2

    # resuming while still broken fails the same way, without side effects on the state
    with pytest.raises(NodeError):
        compiled.invoke(GraphInput.resume(), CFG)
    assert compiled.get_state(CFG).values == {"log": ["a"], "x": 1}
    assert compiled.get_state(CFG).next == ("b",)

    broken["on"] = False
    nodes, result = run(compiled, GraphInput.resume())
    assert nodes == ["b", "c", END]
    assert result.as_state_data() == {"log": ["a", "b", "c"], "x": 1}
    assert calls.counts == {"a": 1, "b": 3, "c": 1}
    with pytest.raises(GraphStateError):
        compiled.invoke(GraphInput.resume(), CFG)


def test_failed_async_node_is_node_error_and_resumable(saver: BaseCheckpointSaver) -> None:
    broken = {"on": True}

    async def flaky(state: AgentState) -> dict[str, Any]:
        await asyncio.sleep(0)
        if broken["on"]:
            raise KeyError("missing")
        return {"log": "flaky"}

    graph = StateGraph({"log": Channels.appender()})
    graph.add_node("a", appending("a")).add_node("flaky", flaky)
    graph.add_edge(START, "a").add_edge("a", "flaky").add_edge("flaky", END)
    compiled = graph.compile(CompileConfig(checkpoint_saver=saver))
    with pytest.raises(NodeError) as info:
        asyncio.run(compiled.ainvoke({}, CFG))
    assert (info.value.node_id, info.value.error_type) == ("flaky", "KeyError")
    assert isinstance(info.value.__cause__, KeyError)
    assert compiled.get_state(CFG).next == ("flaky",)
    broken["on"] = False
    assert asyncio.run(compiled.ainvoke(GraphInput.resume(), CFG)).value("log") == [
        "a",
        "flaky",
    ]


def test_failed_parallel_node_keeps_sibling_update(saver: BaseCheckpointSaver) -> None:
    broken = {"on": True}
    calls = Calls()

    def flaky(state: AgentState) -> dict[str, Any]:
        calls.hit("flaky")
        if broken["on"]:
            raise ValueError("nope")
        return {"log": "flaky"}

    graph = StateGraph({"log": Channels.appender()})
    graph.add_node("steady", appending("steady", calls)).add_node("flaky", flaky)
    graph.add_edge(START, "steady").add_edge(START, "flaky")
    graph.add_edge("steady", END).add_edge("flaky", END)
    compiled = graph.compile(CompileConfig(checkpoint_saver=saver))

    with pytest.raises(NodeError) as info:
        compiled.invoke({}, CFG)
    assert info.value.node_id == "flaky"
    assert info.value.error_type == "ValueError"
    assert compiled.get_state(CFG).values == {"log": []}  # nothing merged from the failed step
    assert compiled.get_state(CFG).next == ("steady", "flaky")

    broken["on"] = False
    final = compiled.invoke(GraphInput.resume(), CFG)
    assert final.value("log") == ["steady", "flaky"]
    assert calls.counts == {"steady": 1, "flaky": 2}
