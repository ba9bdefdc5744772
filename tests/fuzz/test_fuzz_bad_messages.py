"""Bad input fuzzing: whatever lands on the queue, the worker survives, says so in one line, and
no run's state changes.

Three threads are set up on the fuzz worker: one parked at a ``GraphInterrupt`` gate, one parked
by ``interrupt_before``, one completed; their checkpoints, pending writes, markers and the
execution counters of their nodes (in Redis) are their *fingerprint*.  Then:

- hypothesis sends task messages to the node and resume tasks: real envelopes of those threads'
  checkpoints, mutated (fields set to junk of every JSON type, deleted, added; ``config``
  entries; unknown graphs and nodes; strings and nested lists of 1-5 MB; positional
  arguments), or arbitrary keyword arguments.  Each message is refused with one log line that
  says why (or, for an exact copy of a real message, passes as a no-op), no log record carries
  the payload, and the worker keeps running;
- hypothesis publishes raw messages with kombu: pickle, YAML, msgpack, garbage bytes, bodies and
  headers of the wrong shape.  Each is refused with one log record, none stops the worker;
- the client side refuses malformed resume payloads with a clear error, and the thread still
  resumes afterwards.

After each test a normal run completes and the fingerprint is unchanged.
"""

from __future__ import annotations

import json
import re
import uuid
from collections import OrderedDict
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import pytest
from fuzz_support import FuzzStack, fuzz_settings
from hypothesis import event, given
from hypothesis import strategies as st

from celery_support import wait_until
from langgraph_celery import GraphInput, GraphStateError, RunnableConfig, SerializationError
from langgraph_celery.worker.envelope import MalformedMessage, TaskEnvelope
from langgraph_celery.worker.names import RESUME_TASK, node_task_name

GATE, BEFORE = "fixed-gate", "fixed-before"
#: Log records the library writes about a message it refuses (the rest are Celery's).
OURS = re.compile(r"^(rejected |dropping task )")
#: No log record may be this long: payloads are never dumped into the log.
MAX_RECORD = 20_000


@dataclass
class World:
    """The three threads and the real envelopes of every step they took."""

    stack: FuzzStack
    threads: list[str]
    envelopes: list[dict[str, Any]]
    redis: Any

    def fingerprint(self) -> dict[str, Any]:
        """By thread: every checkpoint with its pending writes and markers, and how many times
        each node ran."""
        saver = self.stack.saver
        found = {}
        for thread in self.threads:
            checkpoints = []
            for checkpoint in saver.list(thread):
                writes = sorted(
                    (w.task_id, w.node, json.dumps(w.update, sort_keys=True, default=str))
                    for w in saver.get_writes(thread, checkpoint.checkpoint_id)
                )
                checkpoints.append(
                    (
                        *(checkpoint.checkpoint_id, checkpoint.step, checkpoint.next),
                        *(checkpoint.values, checkpoint.extra, writes),
                    )
                )
            counters = sorted(
                (k, self.redis.get(k)) for k in self.redis.scan_iter(f"ran:{thread}:*")
            )
            found[thread] = (checkpoints, counters)
        return found

    def assert_still_serving(self) -> None:
        """A normal run completes on the worker."""
        assert self.stack.worker is not None and self.stack.worker.alive(), self.stack.log()[-3000:]
        thread = f"after-{uuid.uuid4().hex[:8]}"
        graph = self.stack.graph(GATE)
        handle = graph.start({"thread": thread, "approved": True}, RunnableConfig(thread_id=thread))
        state = handle.wait(timeout=30).as_state_data()
        assert state["log"] == ["a", "gate", "b"]


def _envelopes(stack: FuzzStack, graph_id: str, thread: str) -> list[dict[str, Any]]:
    found = []
    for checkpoint in stack.saver.list(thread):
        base = {
            "graph_id": graph_id,
            "thread_id": thread,
            "run_id": checkpoint.run_id,
            "step": checkpoint.step,
            "checkpoint_id": checkpoint.checkpoint_id,
        }
        found.append({**base, "node": None, "task_id": None})  # a resume of this checkpoint
        found += [{**base, "node": t.node, "task_id": t.id} for t in checkpoint.tasks]
    return found


@pytest.fixture
def world(fuzz_stack: FuzzStack, fuzz_redis: Any) -> Iterator[World]:
    parked_gate, parked_before, done = (f"bad-{uuid.uuid4().hex[:10]}" for _ in range(3))
    gate, before = fuzz_stack.graph(GATE), fuzz_stack.graph(BEFORE)
    for graph, thread, extra in (
        (gate, parked_gate, {}),
        (before, parked_before, {}),
        (gate, done, {"approved": True}),
    ):
        graph.invoke({"thread": thread, **extra}, RunnableConfig(thread_id=thread))
    assert gate.get_state(RunnableConfig(thread_id=parked_gate)).next == ("gate",)
    assert before.get_state(RunnableConfig(thread_id=parked_before)).next == ("b",)
    assert gate.get_state(RunnableConfig(thread_id=done)).next == ()
    envelopes = [
        *_envelopes(fuzz_stack, GATE, parked_gate),
        *_envelopes(fuzz_stack, BEFORE, parked_before),
        *_envelopes(fuzz_stack, GATE, done),
    ]
    found = World(fuzz_stack, [parked_gate, parked_before, done], envelopes, fuzz_redis)
    before_all = found.fingerprint()
    yield found
    # no message changed any of the threads (a test that moves one on takes it off the list)
    assert found.fingerprint() == {t: before_all[t] for t in found.threads}
    found.assert_still_serving()
    assert fuzz_redis.llen(fuzz_stack.queue) == 0  # nothing was requeued


# -- strategies -----------------------------------------------------------------------------------

_scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-(2**70), 2**70),
    st.floats(allow_nan=False, allow_infinity=False),
    st.text(max_size=12),
)
_junk = st.recursive(
    _scalars,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=6), inner),
    max_leaves=10,
)
#: 1 to 5 MB (built outside hypothesis's buffer, so shrinking stays cheap).
_huge = st.one_of(
    st.integers(1, 5).map(lambda mb: "x" * (mb * 1_000_000)),
    st.integers(1, 3).map(lambda mb: [["é" * 1_000] * 500] * mb),
)
_plausible = st.one_of(
    st.sampled_from(["", "nosuch", GATE, BEFORE, "a", "gate", "b", "__START__", "__interrupt__"]),
    st.integers(-1, 3),
    st.sampled_from([10**9, 2**63]),
    st.just({"graph_id": "x"}),
    st.just({"metadata": {"run_id": "r"}}),
)
_value = st.one_of(_plausible, _junk, _huge)
_FIELDS = list(TaskEnvelope.model_fields)
_mutation = st.one_of(
    st.tuples(st.just("set"), st.sampled_from(_FIELDS), _value),
    st.tuples(st.just("del"), st.sampled_from(_FIELDS), st.none()),
    st.tuples(st.just("add"), st.sampled_from(["task", "args", "x", "self", ""]), _value),
    st.tuples(
        st.just("config"),
        st.sampled_from(["metadata", "recursion_limit", "clone_state", "zzz"]),
        _value,
    ),
)


def _mutate(base: dict[str, Any], mutations: list[tuple[str, str, Any]]) -> dict[str, Any]:
    message = dict(base)
    for kind, key, value in mutations:
        if kind == "del":
            message.pop(key, None)
        elif kind == "config":
            config = message.get("config")
            message["config"] = {**(config if isinstance(config, dict) else {}), key: value}
        else:
            message[key] = value
    return message


def _expected_line(world: World, name: str, args: list[Any], kwargs: dict[str, Any]) -> str | None:
    """What the one log record about this message must say (``None``: a copy of a real
    message, which may pass quietly)."""
    graph_ids = set(world.stack.bundle.graphs)
    if name not in world.stack.app.tasks:
        return f"Received unregistered task of type {name!r}"
    if "self" in kwargs:  # (refused by the consumer: Celery's own call takes ``self``)
        return "Received invalid task message: task message kwargs name 'self'"
    if args:
        return f"rejected malformed message for {name}: {len(args)} positional"
    try:
        envelope = TaskEnvelope.from_message(kwargs)
    except MalformedMessage as error:
        return f"rejected malformed message for {name}: {str(error)[:40]}"
    if name == RESUME_TASK:  # no checkpoint of these threads is a pending resume
        if envelope.graph_id not in graph_ids:
            return f"rejected resume: unknown graph {envelope.graph_id!r}"
        return "rejected resume: "
    if envelope.graph_id not in graph_ids or name != node_task_name(
        envelope.graph_id, str(envelope.node)
    ):
        return f"rejected message for {name}: it names graph"
    checkpoint = world.stack.saver.get(envelope.thread_id, envelope.checkpoint_id)
    if checkpoint is None:
        return f"dropping task {envelope.node} of thread"
    if not any(t.id == envelope.task_id and t.node == envelope.node for t in checkpoint.tasks):
        return "rejected message: checkpoint"
    return None


def _task_names(world: World) -> list[str]:
    """The tasks messages go to (each registered one thrice as often as an unknown one)."""
    known = [
        *(node_task_name(GATE, node) for node in ("a", "gate", "b")),
        *(node_task_name(BEFORE, node) for node in ("a", "b")),
        RESUME_TASK,
    ]
    return [*known, *known, *known, node_task_name("nosuch", "a"), node_task_name(GATE, "zz")]


def _send_and_check(
    world: World, send: Callable[[], Any], expected: str | None, done: Callable[[], bool]
) -> None:
    """Send one message; once it is handled, the records it caused must be as expected."""
    stack = world.stack
    before = stack.mark()

    def said() -> bool:
        return expected is not None and any(expected in t for _, t in stack.records(before))

    send()
    # (a message the consumer refuses leaves no result: its log record tells it was handled)
    wait_until(lambda: done() or said(), 30, 0.01, "the message to be handled")
    if expected is not None:
        wait_until(said, 10, 0.01, f"{expected!r} in the worker log")
    stack.wait_until_quiet()  # a second record, or a redelivery, would be there by now
    records = stack.records(before)
    assert stack.worker is not None and stack.worker.alive(), stack.log()[-3000:]
    assert not [r for r in records if r[0] == "CRITICAL" and "Can't decode" not in r[1]]
    assert all(len(text) < MAX_RECORD for _, text in records), [t[:200] for _, t in records]
    ours = [(level, text) for level, text in records if level != "INFO" and OURS.match(text)]
    if expected is None:
        assert ours == [], ours
    elif expected.startswith(("Received ", "Refusing ")):
        assert ours == [], ours
        assert len([t for _, t in records if expected in t]) == 1, records
    else:
        assert len(ours) == 1, records
        text = ours[0][1]
        assert expected in text and "\n" not in text and len(text) < 1_000, text


@pytest.mark.timeout(600)
@fuzz_settings(100)
@given(data=st.data())
def test_forged_task_messages_are_refused_in_one_line_and_change_nothing(
    world: World, data: st.DataObject
) -> None:
    base = data.draw(st.sampled_from(world.envelopes), label="real envelope")
    own = RESUME_TASK if base["node"] is None else node_task_name(base["graph_id"], base["node"])
    name = data.draw(st.one_of(st.just(own), st.sampled_from(_task_names(world))), "task name")
    # a real field of another step (shape right, references wrong), or junk
    references = ["graph_id", "thread_id", "checkpoint_id", "node", "task_id", "run_id"]
    swap = st.sampled_from(references).flatmap(
        lambda field: st.tuples(
            st.just("set"),
            st.just(field),
            st.sampled_from([e.get(field) for e in world.envelopes] + ["0123abcd" * 4]),
        )
    )
    kwargs = data.draw(
        st.one_of(
            st.lists(swap, max_size=2).map(lambda m: _mutate(base, m)),
            st.lists(swap, min_size=1, max_size=2).map(lambda m: _mutate(base, m)),
            st.lists(st.one_of(swap, _mutation), max_size=2).map(lambda m: _mutate(base, m)),
            st.dictionaries(st.text(max_size=8), _value, max_size=4),
        ),
        label="kwargs",
    )
    positional = st.lists(_value, min_size=1, max_size=2)
    args = data.draw(st.one_of(st.just([]), st.just([]), st.just([]), positional), "args")
    expected = _expected_line(world, name, args, kwargs)
    event(f"expected: {expected[:40] if expected else 'a quiet no-op'}")
    result: list[Any] = []

    def send() -> None:
        result.append(world.stack.app.send_task(name, args=args, kwargs=kwargs))

    _send_and_check(world, send, expected, lambda: result[0].ready())


# -- raw messages on the queue --------------------------------------------------------------------

_CONTENT = st.sampled_from(
    [
        ("application/x-python-serialize", "binary"),  # pickle
        ("application/x-yaml", "utf-8"),
        ("application/x-msgpack", "binary"),
        ("application/data", "binary"),
        ("application/octet-stream", "binary"),
        ("text/plain", "utf-8"),
        ("application/json", "utf-8"),
        ("application/json", "binary"),
    ]
)
_json_body = st.one_of(
    _junk,
    st.tuples(_junk, _junk, _junk).map(list),
    st.tuples(
        st.lists(_scalars, max_size=2), st.dictionaries(st.text(max_size=4), _scalars), _junk
    ).map(list),
).map(lambda body: json.dumps(body).encode())
_header_values = {
    "id": st.one_of(st.uuids().map(str), _scalars),
    "eta": st.one_of(st.none(), _scalars, st.just("2020-01-01T00:00:00")),
    "expires": st.one_of(st.none(), _scalars),
    "timelimit": st.one_of(st.none(), _junk, st.just([None, None])),
    "retries": _scalars,
    "argsrepr": _scalars,
    "root_id": _scalars,
    "parent_id": _scalars,
    "group": _scalars,
    "shadow": _scalars,
    "ignore_result": _scalars,
}


@st.composite
def raw_messages(draw: st.DrawFn, names: list[str]) -> tuple[bytes, str, str, dict[str, Any]]:
    content_type, encoding = draw(_CONTENT, label="content type")
    body = draw(
        _json_body if content_type == "application/json" else st.binary(max_size=64), "body"
    )
    headers: dict[str, Any] = {"lang": "py", "id": str(uuid.uuid4())}
    if draw(st.booleans(), "protocol 2 (task in headers)"):
        headers["task"] = draw(st.sampled_from(names), "task")
    for key in draw(st.lists(st.sampled_from(sorted(_header_values)), max_size=3, unique=True)):
        headers[key] = draw(_header_values[key], key)
    return body, content_type, encoding, headers


@pytest.mark.timeout(600)
@fuzz_settings(100)
@given(data=st.data())
def test_raw_messages_of_any_content_type_never_stop_the_worker(
    world: World, data: st.DataObject
) -> None:
    body, content_type, encoding, headers = data.draw(raw_messages(_task_names(world)))
    stack = world.stack
    queue = stack.app.amqp.queues[stack.queue]
    task = headers.get("task")
    expected: str | None = None  # refused by Celery or by the library: checked below
    if task is not None and task not in stack.app.tasks:  # (before the body is looked at)
        usable_id = isinstance(headers.get("id"), str) and headers["id"]
        expected = "Received unregistered task" if usable_id else "Received and deleted unknown"
    elif task is not None and content_type != "application/json":
        # kombu hands over the raw bytes of application/data: the library's guard refuses them
        raw = content_type == "application/data"
        expected = "task message body must be" if raw else "Refusing to deserialize untrusted"

    def send() -> None:
        with stack.app.producer_or_acquire() as producer:
            producer.publish(
                body,
                exchange=queue.exchange,
                routing_key=queue.routing_key,
                declare=[queue],
                content_type=content_type,
                content_encoding=encoding,
                headers=headers,
            )

    before = stack.mark()
    send()
    # handled when it is off the queue and the worker said something (or ran it quietly)
    wait_until(lambda: world.redis.llen(stack.queue) == 0, 30, 0.01, "the queue to drain")
    wait_until(lambda: stack.records(before), 10, 0.01, "a log record about it")
    stack.wait_until_quiet()  # a second record, or a redelivery, would be there by now
    records = stack.records(before)
    assert stack.worker is not None and stack.worker.alive(), stack.log()[-3000:]
    assert not any("Unrecoverable error" in text for _, text in records), records
    assert all(len(text) < MAX_RECORD for _, text in records)
    problems = [r for r in records if r[0] in ("WARNING", "ERROR", "CRITICAL")]
    if expected is not None:
        assert [text for _, text in problems if expected in text], records
    # one record says what was wrong with it (Celery adds its traceback after ours for a Reject)
    said = [t for _, t in problems if OURS.match(t) or t.startswith(("Received", "Can't decode"))]
    if problems or expected is not None:
        assert len(said) == 1, records


# -- the client side ------------------------------------------------------------------------------


class NotSerializable:
    pass


@pytest.mark.parametrize(
    ("update", "error", "text"),
    [
        ("not a mapping", TypeError, "GraphInput.resume takes a mapping, got str"),
        (["approved"], TypeError, "GraphInput.resume takes a mapping, got list"),
        ({"approved": NotSerializable()}, SerializationError, "state key 'approved'"),
        ({"log": [{1, 2}, NotSerializable()]}, SerializationError, "NotSerializable"),
        ({"approved": OrderedDict(yes=True)}, SerializationError, "collections.OrderedDict"),
    ],
)
def test_malformed_resume_payloads_are_clear_errors_and_change_nothing(
    world: World, update: Any, error: type[Exception], text: str
) -> None:
    thread = world.threads[0]  # parked at the gate
    graph = world.stack.graph(GATE)
    config = RunnableConfig(thread_id=thread)
    before = world.fingerprint()
    with pytest.raises(error, match=re.escape(text)):
        graph.invoke(GraphInput.resume(update), config)
    assert world.fingerprint() == before
    # nor is the thread blocked: a proper resume approves the gate
    state = graph.invoke(GraphInput.resume({"approved": True}), config)
    assert state.data["log"] == ["a", "gate", "b"]
    world.threads.remove(thread)  # (it moved on, as it should)


def test_resuming_a_completed_thread_is_refused_and_changes_nothing(world: World) -> None:
    thread = world.threads[2]  # completed
    before = world.fingerprint()
    with pytest.raises(GraphStateError, match="nothing pending to resume"):
        world.stack.graph(GATE).invoke(
            GraphInput.resume({"approved": True}), RunnableConfig(thread_id=thread)
        )
    assert world.fingerprint() == before
