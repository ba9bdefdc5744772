"""SPEC §6: RetryPolicy."""

from __future__ import annotations

import asyncio
import sys
import threading
from collections.abc import Awaitable, Callable
from concurrent.futures import ThreadPoolExecutor
from datetime import timedelta
from types import SimpleNamespace
from typing import Any

import pytest

from langgraph_celery import (
    END,
    START,
    AgentState,
    Channels,
    CompileConfig,
    GraphInput,
    GraphInterrupt,
    NodeError,
    RetryPolicy,
    RunnableConfig,
    StateGraph,
)
from langgraph_celery.checkpoint import BaseCheckpointSaver

CFG = RunnableConfig(thread_id="thread-1")
FAST = {"retry_delay": 0.001, "max_interval": 0.001}


class Flaky:
    """A plain node that raises ``errors`` in turn, then appends ``ok`` to ``log``; each call
    appends ``"call"`` to ``events`` (a list a test may share)."""

    def __init__(self, *errors: BaseException) -> None:
        self.errors = list(errors)
        self.calls = 0
        self.events: list[Any] = []
        self._lock = threading.Lock()

    def __call__(self, state: AgentState) -> dict[str, Any]:
        with self._lock:
            self.calls += 1
            self.events.append("call")
            error = self.errors.pop(0) if self.errors else None
        if error is not None:
            raise error
        return {"log": "ok"}


class AsyncFlaky(Flaky):
    async def __call__(self, state: AgentState) -> dict[str, Any]:  # type: ignore[override]
        await asyncio.sleep(0)
        return Flaky.__call__(self, state)


class Waits:
    """The retry hook's waits, recorded in ``events`` instead of slept: ``("sleep", seconds)``
    for a blocking ``time.sleep``, ``("await", seconds)`` for an ``asyncio.sleep``, which then
    awaits ``during_await()`` (by default nothing) before it returns."""

    def __init__(self) -> None:
        self.events: list[Any] = []
        self.during_await: Callable[[], Awaitable[Any]] | None = None

    def sleep(self, seconds: float) -> None:
        self.events.append(("sleep", seconds))

    async def async_sleep(self, seconds: float) -> None:
        self.events.append(("await", seconds))
        if self.during_await is not None:
            await asyncio.wait_for(self.during_await(), 10)

    def seconds(self, kind: str) -> list[float]:
        return [e[1] for e in self.events if isinstance(e, tuple) and e[0] == kind]


@pytest.fixture
def waits(monkeypatch: pytest.MonkeyPatch) -> Waits:
    """Record the waits of the module that implements the retry hook, instead of sleeping."""
    recorded = Waits()
    module = sys.modules[type(RetryPolicy(retry_on=OSError).as_hook()).__module__]
    monkeypatch.setattr(module, "time", SimpleNamespace(sleep=recorded.sleep))
    monkeypatch.setattr(module, "asyncio", SimpleNamespace(sleep=recorded.async_sleep))
    return recorded


def graph_with(node: Any, policy: RetryPolicy, saver: BaseCheckpointSaver | None = None) -> Any:
    graph = StateGraph({"log": Channels.appender()})
    graph.add_node("before", lambda s: {"log": "before"}).add_node("flaky", node)
    graph.add_edge(START, "before").add_edge("before", "flaky").add_edge("flaky", END)
    graph.add_wrap_call_node_hook("flaky", policy.as_hook())
    return graph.compile(CompileConfig(checkpoint_saver=saver))


# -- construction ------------------------------------------------------------------------------


def test_retry_on_is_required() -> None:
    with pytest.raises(ValueError, match="retry_on"):
        RetryPolicy()
    with pytest.raises(ValueError):
        RetryPolicy(retry_on=[])
    with pytest.raises(ValueError):
        RetryPolicy(retry_on=[int])  # not an exception class
    with pytest.raises(ValueError):
        RetryPolicy(retry_on=["ValueError"])  # type: ignore[list-item]


def test_defaults() -> None:
    policy = RetryPolicy(retry_on=OSError)
    assert policy.max_attempts == 3
    assert policy.retry_delay == 0.5
    assert policy.backoff_factor == 2.0
    assert policy.max_interval == 128.0
    assert policy.jitter is True
    assert policy.retry_on == (OSError,)


def test_invalid_timing_is_value_error() -> None:
    with pytest.raises(ValueError):
        RetryPolicy(retry_on=OSError, max_attempts=0)
    with pytest.raises(ValueError):
        RetryPolicy(retry_on=OSError, retry_delay=-1)
    with pytest.raises(ValueError):
        RetryPolicy(retry_on=OSError, max_interval=timedelta(seconds=-1))


def test_timedelta_durations_are_accepted() -> None:
    policy = RetryPolicy(
        retry_on=OSError, retry_delay=timedelta(milliseconds=250), max_interval=timedelta(minutes=2)
    )
    assert policy.retry_delay == 0.25
    assert policy.max_interval == 120.0
    assert policy.base_delay(1) == 0.25
    assert policy.base_delay(3) == 1.0


def test_to_data() -> None:
    policy = RetryPolicy(
        retry_on=[OSError],
        max_attempts=5,
        retry_delay=timedelta(seconds=1.5),
        backoff_factor=3,
        max_interval=60,
        jitter=False,
    )
    data = policy.to_data()
    assert data == {
        "max_attempts": 5,
        "retry_delay": 1.5,
        "backoff_factor": 3.0,
        "max_interval": 60.0,
        "jitter": False,
    }
    import json

    assert json.loads(json.dumps(data)) == data


# -- what is retried ----------------------------------------------------------------------------


def test_classes_and_predicates_are_or_combined() -> None:
    policy = RetryPolicy(retry_on=[KeyError, lambda e: "transient" in str(e), TimeoutError])
    assert policy.should_retry(KeyError("k"))
    assert policy.should_retry(TimeoutError())
    assert policy.should_retry(ValueError("a transient glitch"))
    assert policy.should_retry(RuntimeError("transient"))
    assert not policy.should_retry(ValueError("permanent"))
    assert not policy.should_retry(TypeError())
    # subclasses of a listed class match
    assert RetryPolicy(retry_on=OSError).should_retry(ConnectionResetError())
    assert not RetryPolicy(retry_on=ConnectionResetError).should_retry(OSError())
    # a single predicate
    only = RetryPolicy(retry_on=lambda e: isinstance(e, ZeroDivisionError))
    assert only.should_retry(ZeroDivisionError())
    assert not only.should_retry(ArithmeticError())
    # interruptions are never retried
    assert not RetryPolicy(retry_on=Exception).should_retry(GraphInterrupt("x"))


def test_predicate_match_is_retried_in_a_graph() -> None:
    node = Flaky(ValueError("transient 1"), ValueError("transient 2"))
    policy = RetryPolicy(retry_on=[KeyError, lambda e: "transient" in str(e)], **FAST)
    final = graph_with(node, policy).invoke({})
    assert final.value("log") == ["before", "ok"]
    assert node.calls == 3


def test_max_attempts_counts_the_first_call() -> None:
    node = Flaky(*(ConnectionError(f"down {i}") for i in range(10)))
    with pytest.raises(NodeError) as info:
        graph_with(node, RetryPolicy(retry_on=ConnectionError, max_attempts=3, **FAST)).invoke({})
    assert node.calls == 3
    assert info.value.node_id == "flaky"
    assert info.value.error_type == "ConnectionError"
    assert str(info.value.__cause__) == "down 2"  # the last attempt's error


def test_max_attempts_one_means_no_retry() -> None:
    node = Flaky(ConnectionError("down"))
    with pytest.raises(NodeError):
        graph_with(node, RetryPolicy(retry_on=ConnectionError, max_attempts=1, **FAST)).invoke({})
    assert node.calls == 1


def test_succeeds_on_the_last_allowed_attempt() -> None:
    node = Flaky(ConnectionError("1"), ConnectionError("2"), ConnectionError("3"))
    policy = RetryPolicy(retry_on=ConnectionError, max_attempts=4, **FAST)
    assert graph_with(node, policy).invoke({}).value("log") == ["before", "ok"]
    assert node.calls == 4


def test_unmatched_error_fails_at_once() -> None:
    node = Flaky(TypeError("bad input"), TypeError("again"))
    with pytest.raises(NodeError) as info:
        graph_with(node, RetryPolicy(retry_on=[ValueError, KeyError], **FAST)).invoke({})
    assert node.calls == 1
    assert info.value.error_type == "TypeError"
    assert isinstance(info.value.__cause__, TypeError)


def test_unmatched_error_after_a_retry_fails_at_once() -> None:
    node = Flaky(ValueError("retry me"), TypeError("stop"), ValueError("never reached"))
    with pytest.raises(NodeError) as info:
        graph_with(node, RetryPolicy(retry_on=ValueError, max_attempts=5, **FAST)).invoke({})
    assert node.calls == 2
    assert info.value.error_type == "TypeError"


def test_graph_interrupt_is_not_retried(saver: BaseCheckpointSaver) -> None:
    calls = []

    def ask(state: AgentState) -> None:
        calls.append(1)
        raise GraphInterrupt("human please")

    stream = graph_with(ask, RetryPolicy(retry_on=Exception, **FAST), saver).stream({}, CFG)
    list(stream)
    assert stream.result.as_interruption_metadata().node_id == "flaky"
    assert stream.result.as_interruption_metadata().reason == "human please"
    assert calls == [1]


# -- failed attempts are never merged or checkpointed ---------------------------------------------


def test_failed_attempts_are_not_merged_or_checkpointed(saver: BaseCheckpointSaver) -> None:
    attempts: list[int] = []

    def node(state: AgentState) -> dict[str, Any]:
        attempts.append(len(attempts) + 1)
        # mutate the node's copy of the state, as a careless node might
        state.value("log").append(f"partial-{len(attempts)}")
        if len(attempts) < 3:
            raise ConnectionError(f"attempt {len(attempts)}")
        return {"log": "appended"}

    graph = graph_with(node, RetryPolicy(retry_on=ConnectionError, **FAST), saver)
    final = graph.invoke({}, CFG)
    assert final.value("log") == ["before", "appended"]
    assert attempts == [1, 2, 3]

    history = graph.get_state_history(CFG)
    assert [s.step for s in history] == [1, 0, -1]
    assert [s.values["log"] for s in history] == [["before", "appended"], ["before"], []]
    assert [s.metadata["source"] for s in history] == ["loop", "loop", "input"]


def test_exhausted_retries_leave_the_last_checkpoint_and_resume(
    saver: BaseCheckpointSaver,
) -> None:
    node = Flaky(*(ConnectionError("down") for _ in range(3)))
    graph = graph_with(node, RetryPolicy(retry_on=ConnectionError, max_attempts=2, **FAST), saver)
    with pytest.raises(NodeError):
        graph.invoke({}, CFG)
    assert node.calls == 2
    snapshot = graph.get_state(CFG)
    assert snapshot.next == ("flaky",)
    assert snapshot.values == {"log": ["before"]}
    # one more failure is left, then success: resume retries again
    final = graph.invoke(GraphInput.resume(), CFG)
    assert final.value("log") == ["before", "ok"]
    assert node.calls == 4


# -- delays -------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("retry_delay", "factor", "cap"),
    [(0.5, 2.0, 128.0), (0.1, 3.0, 2.0), (1.0, 1.0, 10.0), (0.25, 1.5, 0.3)],
)
def test_base_delay_formula(retry_delay: float, factor: float, cap: float) -> None:
    policy = RetryPolicy(
        retry_on=OSError, retry_delay=retry_delay, backoff_factor=factor, max_interval=cap
    )
    for k in range(1, 15):
        assert policy.base_delay(k) == pytest.approx(min(retry_delay * factor ** (k - 1), cap))


def test_base_delay_concrete_values() -> None:
    policy = RetryPolicy(retry_on=OSError, retry_delay=0.5, backoff_factor=2.0, max_interval=5)
    assert [policy.base_delay(k) for k in range(1, 7)] == [0.5, 1.0, 2.0, 4.0, 5.0, 5.0]


def test_delay_without_jitter_is_the_base() -> None:
    policy = RetryPolicy(retry_on=OSError, retry_delay=0.3, backoff_factor=2, jitter=False)
    assert [policy.delay(k) for k in (1, 2, 3)] == [0.3, 0.6, 1.2]
    assert policy.delay(2) == policy.delay(2)


def test_jitter_bounds() -> None:
    policy = RetryPolicy(retry_on=OSError, retry_delay=0.5, backoff_factor=2.0, max_interval=3.0)
    for k in (1, 2, 3, 4, 8):
        base = policy.base_delay(k)
        samples = [policy.delay(k) for _ in range(500)]
        assert all(base <= d <= 2 * base for d in samples), (k, min(samples), max(samples))
        # jitter really varies, and covers most of the range
        assert len(set(samples)) > 400
        assert min(samples) < base * 1.2
        assert max(samples) > base * 1.8
    # with the cap, jitter can reach nearly twice max_interval but never more
    assert max(policy.delay(20) for _ in range(500)) <= 6.0


def test_retries_wait_the_policy_delays_between_attempts(waits: Waits) -> None:
    node = Flaky(ConnectionError("1"), ConnectionError("2"))
    node.events = waits.events
    policy = RetryPolicy(retry_on=ConnectionError, retry_delay=0.04, backoff_factor=2, jitter=False)
    assert graph_with(node, policy).invoke({}).value("log") == ["before", "ok"]
    assert waits.events == ["call", ("sleep", 0.04), "call", ("sleep", 0.08), "call"]


def test_retry_delays_grow_to_max_interval_with_jitter_on_top(waits: Waits) -> None:
    node = Flaky(*(OSError(str(i)) for i in range(4)))
    policy = RetryPolicy(
        retry_on=OSError, max_attempts=5, retry_delay=1, backoff_factor=3, max_interval=5
    )
    assert graph_with(node, policy).invoke({}).value("log") == ["before", "ok"]
    assert node.calls == 5
    delays = waits.seconds("sleep")
    bases = [1, 3, 5, 5]
    assert all(base <= delay <= 2 * base for delay, base in zip(delays, bases, strict=True)), delays
    assert delays != bases  # the jitter added something


# -- sync and async nodes -----------------------------------------------------------------------


@pytest.mark.parametrize("kind", [Flaky, AsyncFlaky], ids=["sync", "async"])
def test_retry_with_tiny_delays(kind: type[Flaky]) -> None:
    node = kind(ConnectionError("1"), TimeoutError("2"))
    policy = RetryPolicy(retry_on=[ConnectionError, TimeoutError], retry_delay=0.001)
    final = graph_with(node, policy).invoke({})
    assert final.value("log") == ["before", "ok"]
    assert node.calls == 3


@pytest.mark.parametrize("kind", [Flaky, AsyncFlaky], ids=["sync", "async"])
def test_retry_exhausted_sync_and_async(kind: type[Flaky]) -> None:
    node = kind(*(ConnectionError(str(i)) for i in range(5)))
    policy = RetryPolicy(retry_on=ConnectionError, max_attempts=4, retry_delay=0.001)
    with pytest.raises(NodeError) as info:
        graph_with(node, policy).invoke({})
    assert node.calls == 4
    assert info.value.node_id == "flaky"


def test_async_retry_in_ainvoke() -> None:
    node = AsyncFlaky(ConnectionError("1"))
    graph = graph_with(node, RetryPolicy(retry_on=ConnectionError, **FAST))
    final = asyncio.run(graph.ainvoke({}))
    assert final.value("log") == ["before", "ok"]
    assert node.calls == 2


def test_hook_called_with_an_async_action_returns_an_awaitable_that_retries() -> None:
    """The hook called by hand (as LangGraph4j's RetryPolicyTest calls ``applyWrap``) with an
    async action, or a plain one returning an awaitable (LangGraph4j's ``failedFuture``)."""
    hook = RetryPolicy(retry_on=ConnectionError, **FAST).as_hook()
    calls: list[str] = []

    async def attempt(name: str) -> dict[str, Any]:
        calls.append(name)
        if len(calls) < 3:
            raise ConnectionError(name)
        return {"result": name}

    async def async_action(state: AgentState, config: RunnableConfig) -> dict[str, Any]:
        return await attempt("async")

    def returns_awaitable(state: AgentState, config: RunnableConfig) -> Awaitable[Any]:
        return attempt("awaitable")

    async def run(action: Any) -> Any:
        result = hook("node", AgentState({}), CFG, action)
        assert asyncio.iscoroutine(result)
        return await result

    assert asyncio.run(run(async_action)) == {"result": "async"}
    assert calls == ["async"] * 3
    calls.clear()
    assert asyncio.run(run(returns_awaitable)) == {"result": "awaitable"}
    assert calls == ["awaitable"] * 3


def test_async_retry_waits_without_blocking_the_event_loop(waits: Waits) -> None:
    """While an async node waits for its retry, a sibling async node makes progress: the wait
    lasts until the sibling has ticked, which it starts doing only once the wait began."""
    waiting, ticked = asyncio.Event(), asyncio.Event()

    async def until_ticked() -> None:
        waiting.set()
        await ticked.wait()

    waits.during_await = until_ticked

    async def ticker(state: AgentState) -> dict[str, Any]:
        await asyncio.wait_for(waiting.wait(), 10)
        for tick in range(5):
            waits.events.append(("tick", tick))
            await asyncio.sleep(0)
        ticked.set()
        return {"log": "ticker"}

    node = AsyncFlaky(ConnectionError("1"))
    node.events = waits.events
    graph = StateGraph({"log": Channels.appender()})
    graph.add_node("flaky", node).add_node("ticker", ticker)
    graph.add_edge(START, "flaky").add_edge(START, "ticker")
    graph.add_edge("flaky", END).add_edge("ticker", END)
    policy = RetryPolicy(retry_on=ConnectionError, retry_delay=0.08, jitter=False)
    graph.add_wrap_call_node_hook("flaky", policy.as_hook())
    final = graph.compile().invoke({})
    assert sorted(final.value("log")) == ["ok", "ticker"]
    ticks = [("tick", tick) for tick in range(5)]
    assert waits.events == ["call", ("await", 0.08), *ticks, "call"]


def test_a_plain_nodes_back_off_leaves_its_executor_free(waits: Waits) -> None:
    """A plain node on an executor of one thread (``parallel_executors``) that fails: the
    retry's back-off is awaited on the loop, so during it the executor runs other work, and
    the next attempt runs on the executor again (LangGraph4j's GraphExecutorTest)."""
    executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="the-executor")
    threads: list[str] = []

    async def other_work_on_the_executor() -> None:
        loop = asyncio.get_running_loop()
        threads.append(await loop.run_in_executor(executor, lambda: "free"))

    waits.during_await = other_work_on_the_executor

    class OnItsThread(Flaky):
        def __call__(self, state: AgentState) -> dict[str, Any]:
            threads.append(threading.current_thread().name)
            return Flaky.__call__(self, state)

    node = OnItsThread(ConnectionError("1"))
    node.events = waits.events
    policy = RetryPolicy(retry_on=ConnectionError, retry_delay=0.05, jitter=False)
    try:
        final = graph_with(node, policy).invoke(
            {}, RunnableConfig(parallel_executors={"flaky": executor})
        )
    finally:
        executor.shutdown()
    assert final.value("log") == ["before", "ok"]
    assert waits.events == ["call", ("await", 0.05), "call"]
    assert threads == ["the-executor_0", "free", "the-executor_0"]


def test_global_retry_hook_applies_to_every_node() -> None:
    first = Flaky(ConnectionError("x"))
    second = Flaky(ConnectionError("y"))
    graph = StateGraph({"log": Channels.appender()})
    graph.add_node("first", first).add_node("second", second)
    graph.add_edge(START, "first").add_edge("first", "second").add_edge("second", END)
    graph.add_wrap_call_node_hook(RetryPolicy(retry_on=ConnectionError, **FAST).as_hook())
    assert graph.compile().invoke({}).value("log") == ["ok", "ok"]
    assert (first.calls, second.calls) == (2, 2)
