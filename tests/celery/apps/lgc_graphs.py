"""The graphs of the Celery integration tests, shared by the test process and the workers.

Every builder returns a fresh :class:`StateGraph`; :data:`GRAPHS` says how each one is compiled
(``graph_id`` is its key).  The ``parity`` scenarios are also compiled in process with a
``MemorySaver`` and their results compared with the workers' (``test_parity.py``).

Nodes that need to talk to the outside world (attempt counters, fix flags) use the Redis test db
named by ``LGC_REDIS_URL``; nodes that say where they ran read ``WORKER_NAME``.
"""

from __future__ import annotations

import enum
import operator
import os
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Annotated, Any

from lgc_stream_graphs import STREAM_GRAPHS
from lgc_subgraphs import SUBGRAPH_GRAPHS
from pydantic import BaseModel

from langgraph_celery import (
    END,
    START,
    AgentState,
    Channel,
    Channels,
    Command,
    Done,
    GraphInput,
    GraphInterrupt,
    RetryPolicy,
    Send,
    StateGraph,
)

Action = Callable[..., Any]


def _redis() -> Any:
    import redis

    return redis.Redis.from_url(os.environ["LGC_REDIS_URL"])


def log_node(name: str) -> Action:
    def action(state: AgentState) -> dict[str, Any]:
        return {"log": [name]}

    return action


def log_graph() -> StateGraph:
    return StateGraph({"log": Channels.appender(), "results": Channels.appender()})


# -- parity scenarios ------------------------------------------------------------------------------


def chain() -> StateGraph:
    """START -> a -> b -> c -> END."""
    graph = log_graph()
    for node in ("a", "b", "c"):
        graph.add_node(node, log_node(node))
    return graph.add_edge(START, "a").add_edge("a", "b").add_edge("b", "c").add_edge("c", END)


def fanout_join() -> StateGraph:
    """START -> a -> (b | c) -> join d -> END; b and c run in one step."""
    graph = log_graph()
    for node in ("a", "b", "c", "d"):
        graph.add_node(node, log_node(node))
    graph.add_edge(START, "a").add_edge("a", "b").add_edge("a", "c")
    return graph.add_edge(["b", "c"], "d").add_edge("d", END)


def conditional() -> StateGraph:
    """START -> a -(go: left/right/done)-> b | c | END; b loops back to a once."""
    graph = log_graph()
    for node in ("a", "b", "c"):
        graph.add_node(node, log_node(node))

    def route(state: AgentState) -> str:
        log = state.value("log", [])
        if log.count("a") > 1:
            return "done"
        return str(state.value("go", "left"))

    graph.add_edge(START, "a")
    graph.add_conditional_edges("a", route, {"left": "b", "right": "c", "done": END})
    return graph.add_edge("b", "a").add_edge("c", "a")


def map_reduce() -> StateGraph:
    """START -> plan -(Send per item)-> work x N -> total -> END."""
    graph = log_graph()
    graph.add_node("plan", log_node("plan"))

    def work(state: AgentState) -> dict[str, Any]:
        return {"results": [state.value("item") * 10], "log": ["work"]}

    def total(state: AgentState) -> dict[str, Any]:
        return {"total": sum(state.value("results", [])), "log": ["total"]}

    graph.add_node("work", work).add_node("total", total)
    graph.add_edge(START, "plan")
    graph.add_conditional_edges(
        "plan", lambda s: [Send("work", {"item": item}) for item in s.value("items", [])]
    )
    return graph.add_edge("work", "total").add_edge("total", END)


def command() -> StateGraph:
    """START -> a -(Command(goto=c, update))-> c -> END (b is skipped)."""
    graph = log_graph()
    for node in ("a", "b", "c"):
        graph.add_node(node, log_node(node))
    graph.add_edge(START, "a")
    graph.add_conditional_edges(
        "a", lambda s: Command(goto="c", update={"routed_by": "command"}), {"b": "b", "c": "c"}
    )
    return graph.add_edge("b", END).add_edge("c", END)


def gate() -> StateGraph:
    """START -> a -> gate (raises GraphInterrupt until approved) -> b -> END."""
    graph = log_graph()

    def gate_node(state: AgentState) -> dict[str, Any]:
        if not state.value("approved"):
            raise GraphInterrupt("needs approval", {"asked": "approve?"})
        return {"log": ["gate"]}

    graph.add_node("a", log_node("a")).add_node("gate", gate_node).add_node("b", log_node("b"))
    return graph.add_edge(START, "a").add_edge("a", "gate").add_edge("gate", "b").add_edge("b", END)


def forever() -> StateGraph:
    """START -> a -> a -> ... (never ends: a recursion-limit overflow)."""
    graph = log_graph()
    graph.add_node("a", log_node("a"))
    return graph.add_edge(START, "a").add_edge("a", "a")


def merge_levels(old: dict[str, list[str]] | None, new: dict[str, list[str]]) -> Any:
    """Per node id, the hook levels recorded so far, without repeats, in order."""
    merged = {node: list(levels) for node, levels in (old or {}).items()}
    for node, levels in new.items():
        merged[node] = list(dict.fromkeys([*merged.get(node, []), *levels]))
    return merged


def hooked() -> StateGraph:
    """fanout_join with hooks as LangGraph4j's nested-hooks test has them: two global before-call
    hooks and a wrap hook record themselves per node under ``hooks`` (a reducer), and ``b``'s own
    before-call hook appends to ``log``; the hooks' updates are part of each node's update."""
    graph = StateGraph(
        {
            "log": Channels.appender(),
            "results": Channels.appender(),
            "hooks": Channel(merge_levels, default=dict),
        }
    )
    for node in ("a", "b", "c", "d"):
        graph.add_node(node, log_node(node))
    graph.add_edge(START, "a").add_edge("a", "b").add_edge("a", "c")
    graph.add_edge(["b", "c"], "d").add_edge("d", END)

    def level(name: str) -> Action:
        return lambda node, state, config: {"hooks": {node: [name]}}

    def wrap(node: str, state: AgentState, config: Any, action: Action) -> Any:
        return {**action(state, config), "hooks": {node: ["wrap"]}}

    graph.add_wrap_call_node_hook(wrap)
    graph.add_before_call_node_hook(level("before-1")).add_before_call_node_hook(level("before-2"))
    return graph.add_before_call_node_hook("b", lambda node, state, config: {"log": ["pre-b"]})


def command_nodes() -> StateGraph:
    """Command nodes (SPEC §9): START -> triage, which returns Command(goto=[a Send to work per
    item, "count"]); work -> review and count -> review; review returns Command("again") back to
    triage for a second round, then Command("done") to END with the total."""
    graph = log_graph()

    def triage(state: AgentState) -> Command:
        round_ = state.value("round", 0) + 1
        sends = [Send("work", {"item": item * round_}) for item in state.value("items", [])]
        return Command(goto=[*sends, "count"], update={"log": ["triage"], "round": round_})

    def work(state: AgentState) -> dict[str, Any]:
        return {"results": [state.value("item") * 10], "log": ["work"]}

    async def review(state: AgentState) -> Command:
        if state.value("round") < 2:
            return Command("again", {"log": ["review: again"]})
        return Command("done", {"log": ["review: done"], "total": sum(state.value("results"))})

    graph.add_node("triage", triage, ["work", "count"])
    graph.add_node("work", work).add_node("count", log_node("count"))
    graph.add_node("review", review, {"again": "triage", "done": END})
    graph.add_edge(START, "triage").add_edge("work", "review").add_edge("count", "review")
    return graph


def command_outside() -> StateGraph:
    """START -> a -> b, a command node whose Command names a label outside its
    destinations."""
    graph = log_graph().add_node("a", log_node("a"))
    graph.add_node("b", lambda state: Command("elsewhere", {"log": ["b"]}), {"done": END})
    return graph.add_edge(START, "a").add_edge("a", "b")


class Mood(enum.Enum):
    CALM = "calm"
    GLAD = "glad"


class Note(BaseModel):
    """A field type of :class:`Chat`: compiling registers it (and :class:`Mood`) with the
    saver's serializer, in the test process and on the workers."""

    author: str
    text: str
    mood: Mood = Mood.CALM


class Chat(BaseModel):
    """A typed state (SPEC §9): a pydantic model with Annotated reducers and defaults."""

    notes: Annotated[list[Note], operator.add] = []
    log: Annotated[list[str], Channels.appender()] = []
    count: int = 0
    verdict: str | None = None


def typed() -> StateGraph:
    """A pydantic state: START -> draft -> check (a command node: to finish, or back to draft)
    -> finish -> END; draft writes ``count`` as a string, stored as the int it validates to."""
    graph = StateGraph(Chat)

    def draft(state: AgentState) -> dict[str, Any]:
        number = sum(1 for note in state["notes"] if note.author == "ai") + 1
        note = Note(author="ai", text=f"draft {number}", mood=Mood.GLAD)
        return {"notes": [note], "log": ["draft"], "count": str(number)}

    def check(state: AgentState) -> Command:
        goto = "finish" if state["count"] >= 2 else "redo"
        return Command(goto, {"log": [f"check: {goto}"]})

    def finish(state: AgentState) -> dict[str, Any]:
        return {"log": ["finish"], "verdict": state.value("verdict") or "unreviewed"}

    graph.add_node(draft).add_node(check, destinations={"redo": "draft", "finish": "finish"})
    graph.add_node(finish)
    return graph.add_edge(START, "draft").add_edge("draft", "check").add_edge("finish", END)


def typed_invalid() -> StateGraph:
    """START -> ok -> bad -> END on :class:`Chat`: ``bad`` writes a note that is not a Note."""
    graph = StateGraph(Chat).add_node("ok", lambda state: {"log": ["ok"]})
    graph.add_node("bad", lambda state: {"notes": [{"author": "ai"}], "log": ["bad"]})
    return graph.add_edge(START, "ok").add_edge("ok", "bad").add_edge("bad", END)


def merged_subgraph() -> StateGraph:
    """START -> intake -> review -(done | again)-> finish | intake; ``review`` is a merged
    subgraph (SPEC §9) with a conditional entry (check | skip), a nested merged subgraph
    (``notes``), a before-call hook on its nodes, and an END reached by a label; compiled with
    ``interrupt_before=("review-human",)``, an inner node."""
    notes = log_graph().add_node("note", log_node("note"))
    notes.add_edge(START, "note").add_edge("note", END)
    review = log_graph().add_node("check", log_node("check")).add_node("notes", notes)
    review.add_node("human", lambda state: {"log": [f"human: {state.value('approved')}"]})
    review.add_node("skip", log_node("skip"))
    review.add_before_call_node_hook(lambda node, state, config: {"log": [f"hook: {node}"]})
    review.add_conditional_edges(
        START, lambda s: "go" if s.value("topic") else "skip", {"go": "check", "skip": "skip"}
    )
    review.add_edge("check", "notes").add_edge("notes", "human")
    review.add_conditional_edges("human", lambda s: "end", {"end": END, "again": "check"})
    review.add_edge("skip", END)
    graph = log_graph().add_node("intake", log_node("intake")).add_node("review", review)
    graph.add_node("finish", log_node("finish"))
    graph.add_edge(START, "intake").add_edge("intake", "review")
    graph.add_conditional_edges("review", lambda s: "done", {"done": "finish", "again": "intake"})
    return graph.add_edge("finish", END)


def lg4j_edges() -> StateGraph:
    """LangGraph4j's ``InterruptionTest``: START -> A -> B -(route: D after B, else the last
    log entry)-> A | C | D | END; C, D -> END."""
    graph = log_graph()
    for node in ("A", "B", "C", "D"):
        graph.add_node(node, log_node(node))

    def route(state: AgentState) -> str:
        log = state.value("log", [])
        last = log[-1] if log else END
        return "D" if last == "B" else str(last)

    graph.add_conditional_edges("B", route, ["A", "C", "D", END])
    return graph.add_edge(START, "A").add_edge("A", "B").add_edge("C", END).add_edge("D", END)


def lg4j_uneven_branches() -> StateGraph:
    """LangGraph4j's ``LG4JTest.testWithParallelBranchWithErrors`` (refused there, supersteps
    here): START -> A -> (A1 | A2 | A3); A1, A2 -> B; A3 -> C; B -> C -> END."""
    graph = log_graph()
    for node in ("A", "A1", "A2", "A3", "B", "C"):
        graph.add_node(node, log_node(node))
    graph.add_edge(START, "A").add_edge("A", "A1").add_edge("A", "A2").add_edge("A", "A3")
    graph.add_edge("A1", "B").add_edge("A2", "B").add_edge("A3", "C")
    return graph.add_edge("B", "C").add_edge("C", END)


@dataclass(frozen=True)
class Scenario:
    """A graph, how to compile it, and the calls a test makes on one thread, in order.

    Each call is ``(input, expected)``: ``expected`` is ``"completed"``, ``"interrupted"`` or
    the name of the error class the call raises.
    """

    build: Callable[[], StateGraph]
    calls: tuple[tuple[Any, str], ...]
    compile: Mapping[str, Any] = field(default_factory=dict)


SCENARIOS: dict[str, Scenario] = {
    "chain": Scenario(chain, (({"topic": "x"}, "completed"),)),
    "fanout_join": Scenario(fanout_join, (({"topic": "x"}, "completed"),)),
    "conditional": Scenario(conditional, (({"go": "right"}, "completed"),)),
    "map_reduce": Scenario(map_reduce, (({"items": [1, 2, 3]}, "completed"),)),
    "command": Scenario(command, ((None, "completed"),)),
    "command_nodes": Scenario(command_nodes, (({"items": [1, 2, 3]}, "completed"),)),
    "command_outside": Scenario(command_outside, ((None, "InvalidUpdateError"),)),
    "typed": Scenario(
        typed,
        (
            ({"notes": [Note(author="user", text="hello")]}, "interrupted"),
            (GraphInput.resume({"verdict": "approved"}), "completed"),
        ),
        {"interrupt_before": ("finish",)},
    ),
    "typed_invalid": Scenario(typed_invalid, ((None, "InvalidUpdateError"),)),
    "hooks": Scenario(hooked, (({"topic": "x"}, "completed"),)),
    "interrupt_before": Scenario(
        chain,
        (
            ({"topic": "x"}, "interrupted"),
            (GraphInput.resume({"approved": "yes", "log": ["human"]}), "completed"),
        ),
        {"interrupt_before": ("b",)},
    ),
    "interrupt_after": Scenario(
        fanout_join,
        (({"topic": "x"}, "interrupted"), (GraphInput.resume(), "completed")),
        {"interrupt_after": ("a",)},
    ),
    "graph_interrupt": Scenario(
        gate,
        (
            ({"topic": "x"}, "interrupted"),
            (GraphInput.resume(), "interrupted"),
            (GraphInput.resume({"approved": True}), "completed"),
        ),
    ),
    "recursion": Scenario(forever, ((None, "GraphRecursionError"),), {"recursion_limit": 4}),
    "merged_subgraph": Scenario(
        merged_subgraph,
        (
            ({"topic": "x"}, "interrupted"),
            (GraphInput.resume({"approved": "yes"}), "completed"),
        ),
        {"interrupt_before": ("review-human",)},
    ),
    # LangGraph4j's InterruptionTest.interruptAfterEdgeEvaluation: B's edges were evaluated
    # before it stopped, so the resume's "C" changes nothing (D runs)
    "lg4j_interrupt_after_edge": Scenario(
        lg4j_edges,
        ((None, "interrupted"), (GraphInput.resume({"log": ["C"]}), "completed")),
        {"interrupt_after": ("B",)},
    ),
    # ... and interruptBeforeEdgeEvaluation: they are evaluated on resume (C runs)
    "lg4j_interrupt_before_edge": Scenario(
        lg4j_edges,
        ((None, "interrupted"), (GraphInput.resume({"log": ["C"]}), "completed")),
        {"interrupt_after": ("B",), "interrupt_before_edge": True},
    ),
    "lg4j_uneven_branches": Scenario(lg4j_uneven_branches, ((None, "completed"),)),
}


# -- graphs of the other tests ---------------------------------------------------------------------


def where_node(name: str) -> Action:
    """A node that records ``[name, the worker it ran on]``."""

    def action(state: AgentState) -> dict[str, Any]:
        return {"ran_on": [[name, os.environ.get("WORKER_NAME", "?")]]}

    return action


def where() -> StateGraph:
    """START -> a -> n -> b -> END; every node records the worker it ran on."""
    graph = StateGraph({"ran_on": Channels.appender()})
    for node in ("a", "n", "b"):
        graph.add_node(node, where_node(node))
    return graph.add_edge(START, "a").add_edge("a", "n").add_edge("n", "b").add_edge("b", END)


class Transient(ConnectionError):
    """What the flaky node raises while it is 'broken'."""


RETRY = RetryPolicy(retry_on=Transient, max_attempts=3, retry_delay=0.05, jitter=False)


def flaky() -> StateGraph:
    """START -> a -> flaky -> b -> END; ``flaky`` fails ``fail_times`` times (counted in Redis
    per thread) unless the thread's ``fixed`` flag is set, and has a RetryPolicy."""
    graph = log_graph()

    def flaky_node(state: AgentState) -> dict[str, Any]:
        thread = state.value("thread")
        client = _redis()
        try:
            attempt = int(client.incr(f"attempts:{thread}"))
            if not client.get(f"fixed:{thread}") and attempt <= int(state.value("fail_times")):
                raise Transient(f"attempt {attempt} failed")
        finally:
            client.close()
        return {"log": ["flaky"]}

    graph.add_node("a", log_node("a")).add_node("flaky", flaky_node).add_node("b", log_node("b"))
    graph.add_wrap_call_node_hook("flaky", RETRY.as_hook())
    return (
        graph.add_edge(START, "a").add_edge("a", "flaky").add_edge("flaky", "b").add_edge("b", END)
    )


def _picky(old: Any, new: Any) -> Any:
    if new == "poison":
        raise ValueError("no poison here")
    return new


def poison() -> StateGraph:
    """START -> p -> END (with ``fan``, START -> p and q -> END; with ``then``, p goes on to
    r -> END): ``p`` returns what ``mode`` asks: ``unserializable`` an object no serializer
    takes, ``huge_int`` an int past Python's int-to-str limit (no JSON text holds it),
    ``refused`` a value the reducer of ``checked`` raises on, else a good update.  Each
    node counts its calls in Redis."""
    graph = StateGraph(
        {"log": Channels.appender(), "checked": Channel(reducer=_picky), "blob": Channel()}
    )

    def counted(name: str, update: Callable[[AgentState], dict[str, Any]]) -> Action:
        def action(state: AgentState) -> dict[str, Any]:
            client = _redis()
            try:
                client.incr(f"calls:{state.value('thread')}:{name}")
            finally:
                client.close()
            return update(state)

        return action

    def p_update(state: AgentState) -> dict[str, Any]:
        mode = state.value("mode")
        if mode == "unserializable":
            return {"blob": object()}
        if mode == "huge_int":
            return {"blob": 10**5000}
        if mode == "refused":
            return {"checked": "poison"}
        return {"log": ["p"]}

    graph.add_node("p", counted("p", p_update))
    graph.add_node("q", counted("q", lambda state: {"log": ["q"]}))
    graph.add_node("r", counted("r", lambda state: {"log": ["r"]}))
    graph.add_conditional_edges(START, lambda state: ["p", "q"] if state.value("fan") else "p")
    graph.add_conditional_edges("p", lambda state: "r" if state.value("then") else END)
    return graph.add_edge("q", END).add_edge("r", END)


def dying() -> StateGraph:
    """START -> a -> die -> END: ``die`` counts its calls in Redis, then ends its worker process
    with ``sys.exit`` (unless the thread's ``fixed`` flag is set)."""
    graph = log_graph()

    def die(state: AgentState) -> dict[str, Any]:
        import sys

        thread = state.value("thread")
        client = _redis()
        try:
            client.incr(f"calls:{thread}:die")
            fixed = client.get(f"fixed:{thread}")
        finally:
            client.close()
        if not fixed:
            sys.exit(3)
        return {"log": ["die"]}

    graph.add_node("a", log_node("a")).add_node("die", die)
    return graph.add_edge(START, "a").add_edge("a", "die").add_edge("die", END)


NAP_RETRY = RetryPolicy(retry_on=TimeoutError, max_attempts=2, retry_delay=0.05, jitter=False)


def napping() -> StateGraph:
    """START -> nap -> END, ``nap`` limited to 0.5 s: it sleeps ``naps[attempt]`` seconds on
    each attempt (counted in Redis); with ``stubborn`` it ignores the soft time limit and keeps
    sleeping (the hard limit kills its process).  A RetryPolicy retries timeouts once."""
    graph = log_graph()

    def nap(state: AgentState) -> dict[str, Any]:
        from celery.exceptions import SoftTimeLimitExceeded

        thread = state.value("thread")
        client = _redis()
        try:
            attempt = int(client.incr(f"calls:{thread}:nap"))
        finally:
            client.close()
        naps = state.value("naps")
        seconds = float(naps[min(attempt, len(naps)) - 1])
        try:
            time.sleep(seconds)
        except SoftTimeLimitExceeded:
            if not state.value("stubborn"):
                raise
            time.sleep(seconds)
        return {"log": ["nap"]}

    graph.add_node("nap", nap, timeout=0.5)
    graph.add_wrap_call_node_hook("nap", NAP_RETRY.as_hook())
    return graph.add_edge(START, "nap").add_edge("nap", END)


#: How long a node of ``slow`` waits at most for a test to release it.
HOLD_LIMIT = 60.0


def slow() -> StateGraph:
    """START -> a (sleeps ``sleep`` s) -> b (``sleep_b``) -> c (``sleep_c``) -> END; each node
    counts its starts and its completed calls in Redis per thread.  A node started while the
    Redis key ``hold:<thread>:<node>`` exists waits until a test deletes it (at most
    :data:`HOLD_LIMIT` s) before it sleeps."""
    graph = log_graph()

    def sleeper(name: str, key: str) -> Action:
        def action(state: AgentState) -> dict[str, Any]:
            client = _redis()
            thread = state.value("thread")
            try:
                client.incr(f"started:{thread}:{name}")
                deadline = time.monotonic() + HOLD_LIMIT
                while client.exists(f"hold:{thread}:{name}") and time.monotonic() < deadline:
                    time.sleep(0.01)
                time.sleep(float(state.value(key, 0)))
                client.incr(f"calls:{thread}:{name}")
            finally:
                client.close()
            return {"log": [name]}

        return action

    graph.add_node("a", sleeper("a", "sleep")).add_node("b", sleeper("b", "sleep_b"))
    graph.add_node("c", sleeper("c", "sleep_c"))
    return graph.add_edge(START, "a").add_edge("a", "b").add_edge("b", "c").add_edge("c", END)


def outside_gate() -> StateGraph:
    """START -> a -> (b | c) -> join d -> END; b raises GraphInterrupt unless the Redis key
    ``allow:<thread>`` exists (a decision outside the state, as an LLM's or a clock's), and
    counts its calls in ``calls:<thread>:b``."""
    graph = log_graph()

    def b(state: AgentState) -> dict[str, Any]:
        client = _redis()
        thread = state.value("thread")
        try:
            client.incr(f"calls:{thread}:b")
            if not client.exists(f"allow:{thread}"):
                raise GraphInterrupt("b needs a person")
        finally:
            client.close()
        return {"log": ["b"]}

    for node in ("a", "c", "d"):
        graph.add_node(node, log_node(node))
    graph.add_node("b", b)
    graph.add_edge(START, "a").add_edge("a", "b").add_edge("a", "c")
    return graph.add_edge(["b", "c"], "d").add_edge("d", END)


def fickle() -> StateGraph:
    """START -> a -(b on a's first call on the thread, c after)-> b -> END | c -> d -> END: a
    node that routes differently when its message comes again (it counts its calls in Redis),
    onto a line of another length."""
    graph = log_graph()

    def a(state: AgentState) -> dict[str, Any]:
        client = _redis()
        try:
            calls = int(client.incr(f"calls:{state.value('thread')}:a"))
        finally:
            client.close()
        return {"log": ["a"], "go": "b" if calls == 1 else "c"}

    graph.add_node("a", a)
    for node in ("b", "c", "d"):
        graph.add_node(node, log_node(node))
    graph.add_edge(START, "a")
    graph.add_conditional_edges("a", lambda s: str(s.value("go")), {"b": "b", "c": "c"})
    return graph.add_edge("b", END).add_edge("c", "d").add_edge("d", END)


#: How long a node of ``streaming`` waits at most for a test to acknowledge its first token.
ACK_LIMIT = 10.0


def streaming() -> StateGraph:
    """START -> llm -> tail -> END.  ``llm`` waits while the Redis key ``hold:<thread>:llm``
    exists (at most :data:`HOLD_LIMIT` s: a test's gate, to attach followers before anything is
    streamed), emits ``"start"`` (``config.emit``), then streams ``tokens`` from a generator;
    after the first token it waits until the Redis key ``ack:<thread>`` exists (at most
    :data:`ACK_LIMIT` s): its final update says whether the ack came (``live``), that is whether
    a client got the token while the node ran.  ``tail`` streams two tokens from an async
    generator ending with ``Done``."""
    graph = log_graph()

    def llm(state: AgentState, config: Any) -> dict[str, Any]:
        thread = state.value("thread")
        gate = _redis()
        try:
            deadline = time.monotonic() + HOLD_LIMIT
            while gate.exists(f"hold:{thread}:llm") and time.monotonic() < deadline:
                time.sleep(0.01)
        finally:
            gate.close()
        config.emit("start")

        def tokens() -> Any:
            client = _redis()
            try:
                live = False
                for index, token in enumerate(state.value("tokens")):
                    yield token
                    if index == 0:
                        deadline = time.monotonic() + ACK_LIMIT
                        while time.monotonic() < deadline and not live:
                            live = bool(client.exists(f"ack:{thread}"))
                            time.sleep(0.01)
            finally:
                client.close()
            return {"live": live}

        return {"log": ["llm"], "answer": tokens()}

    async def tail(state: AgentState) -> dict[str, Any]:
        async def tokens() -> Any:
            yield "t1"
            yield "t2"
            yield Done({"log": ["tail"]})

        return {"stream": tokens()}

    graph.add_node("llm", llm).add_node("tail", tail)
    return graph.add_edge(START, "llm").add_edge("llm", "tail").add_edge("tail", END)


#: graph_id -> (builder, compile options); ``parity-<name>`` for each scenario.
GRAPHS: dict[str, tuple[Callable[[], StateGraph], Mapping[str, Any]]] = {
    **{f"parity-{name}": (s.build, s.compile) for name, s in SCENARIOS.items()},
    "flaky": (flaky, {}),
    "slow": (slow, {}),
    "fickle": (fickle, {}),
    "gate": (gate, {}),
    "outside_gate": (outside_gate, {}),
    "poison": (poison, {}),
    "dying": (dying, {}),
    "napping": (napping, {}),
    "streaming": (streaming, {}),
    **STREAM_GRAPHS,
    **SUBGRAPH_GRAPHS,
}


def where_too() -> StateGraph:
    """START -> a -> b -> END, recording workers as :func:`where` does (and without its ``n``)."""
    graph = StateGraph({"ran_on": Channels.appender()})
    for node in ("a", "b"):
        graph.add_node(node, where_node(node))
    return graph.add_edge(START, "a").add_edge("a", "b").add_edge("b", END)


#: graphs compiled with the executor that routes node ``n`` (of where) to the special queue and
#: node ``b`` of where-too to the default queue.
ROUTED_GRAPHS: dict[str, tuple[Callable[[], StateGraph], Mapping[str, Any]]] = {
    "where": (where, {}),
    "where-too": (where_too, {}),
}
