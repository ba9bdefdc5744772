"""More of what a publisher on the broker can do to a worker with the guard on
(``CeleryExecutor(app)``), each against a real worker process:

- on RabbitMQ, a header ``py-amqp`` cannot decode (a timestamp past the year 9999, tables nested
  deeper than Python's recursion limit, a content type that is not UTF-8) stopped the worker as
  it read the frame, and the message, never acknowledged, stopped the next one;
- on RabbitMQ, an ``eta`` header of AMQP's timestamp type (which Celery takes as it is) was not
  held to the visibility timeout, as an ``eta`` text is;
- a message of *another* task (the resume task) under a step's own task id, expired, put that id
  among the worker's revoked ids: the step's next delivery was discarded as revoked and its run
  cancelled; due in a year, it was held as scheduled under that id, which is what the reaper
  asks the workers about before it sends a lost step again.
"""

from __future__ import annotations

import struct
import uuid
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from celery import Celery

from app_kit import app_env
from celery_support import APPS_DIR, CeleryStack, ServiceProcess, launch_worker, wait_until
from langgraph_celery import RunnableConfig
from langgraph_celery.worker.names import RESUME_TASK, celery_task_id, node_task_name
from services import flushed_redis_db

#: The Redis db of this module (broker and result backend of its Redis stack; the result
#: backend of its RabbitMQ worker).
REDIS_DB = 4

#: The app of the RabbitMQ worker: a graph's node tasks and a plain task, guard on.
_AMQP_APP = """
import os
from celery import Celery
from lgc_graphs import chain
from langgraph_celery import CompileConfig
from langgraph_celery.celery import CeleryExecutor
from langgraph_celery.checkpoint import SqlSaver

app = Celery("attacks", broker=os.environ["ATTACK_BROKER"], backend=os.environ["ATTACK_BACKEND"])
app.conf.task_default_queue = os.environ["ATTACK_QUEUE"]
executor = CeleryExecutor(app)
saver = SqlSaver(os.environ["ATTACK_DB"])
saver.setup()
chain().compile(CompileConfig(checkpoint_saver=saver, graph_id="attack-chain", executor=executor))


@app.task(name="attack.add")
def add(x, y):
    return x + y
"""


@pytest.fixture(scope="module")
def celery_redis_url(_redis_server: str) -> Iterator[str]:
    with flushed_redis_db(_redis_server, REDIS_DB) as url:
        yield url


class AmqpWorker:
    def __init__(self, worker: ServiceProcess, client: Celery, queue: str, url: str) -> None:
        self.worker, self.client, self.queue, self.url = worker, client, queue, url

    def serves(self, x: int) -> None:
        result = self.client.send_task("attack.add", (x, 1), queue=self.queue)
        assert result.get(timeout=30) == x + 1
        assert self.worker.alive(), self.worker.log()[-3000:]
        assert "Unrecoverable error" not in self.worker.log()

    def queued(self) -> int:
        import amqp

        connection = amqp.Connection("127.0.0.1:5672", userid="guest", password="guest")
        connection.connect()
        try:
            return int(connection.channel().queue_declare(self.queue, passive=True).message_count)
        finally:
            connection.close()


@pytest.fixture(scope="module")
def amqp_worker(
    amqp_url: str, celery_redis_url: str, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[AmqpWorker]:
    folder = tmp_path_factory.mktemp("attacks-amqp")
    (folder / "attack_amqp_app.py").write_text(_AMQP_APP)
    queue = f"attacks-{uuid.uuid4().hex[:8]}"
    settings = {
        "ATTACK_BROKER": amqp_url,
        "ATTACK_BACKEND": celery_redis_url,
        "ATTACK_QUEUE": queue,
        "ATTACK_DB": f"sqlite:///{folder / 'checkpoints.db'}",
    }
    env = app_env(folder, settings, {"PYTHONPATH": str(APPS_DIR)})
    worker = launch_worker("attack_amqp_app", [queue], queue, env, folder / "worker.log", 1)
    client = Celery("attacks-client", broker=amqp_url, backend=celery_redis_url)
    try:
        found = AmqpWorker(worker, client, queue, amqp_url)
        found.serves(1)
        yield found
    finally:
        worker.kill()
        from kombu import Connection

        with Connection(amqp_url) as connection:
            connection.default_channel.queue_delete(queue)
        client.close()


def _item(key: str, value: bytes) -> bytes:
    """An entry of an AMQP field table: its name, then its typed value."""
    name = key.encode()
    return struct.pack(">B", len(name)) + name + value


def _table(entries: bytes) -> bytes:
    return struct.pack(">I", len(entries)) + entries


def _text(value: bytes) -> bytes:
    return b"S" + struct.pack(">I", len(value)) + value


def _properties(headers: bytes, content_type: bytes = b"application/json") -> bytes:
    """AMQP basic properties as they go on the wire: content type, encoding, headers table,
    delivery mode (what ``py-amqp`` would encode, but from raw bytes)."""
    flags = 0x8000 | 0x4000 | 0x2000 | 0x1000
    encoding = b"utf-8"
    return (
        struct.pack(">H", flags)
        + struct.pack(">B", len(content_type))
        + content_type
        + struct.pack(">B", len(encoding))
        + encoding
        + _table(headers)
        + struct.pack(">B", 2)
    )


def _publish_raw(queue: str, properties: bytes, body: bytes) -> None:
    """Publish ``body`` to ``queue`` with ``properties`` exactly as given, as any AMQP client
    (not necessarily ``py-amqp``) can: RabbitMQ passes them on unread."""
    import amqp

    class RawMessage(amqp.Message):  # type: ignore[misc]
        def _serialize_properties(self) -> bytes:
            return properties

    connection = amqp.Connection("127.0.0.1:5672", userid="guest", password="guest")
    connection.connect()
    try:
        connection.channel().basic_publish(RawMessage(body), exchange="", routing_key=queue)
    finally:
        connection.close()


def _nested_tables(levels: int) -> bytes:
    inner = b""
    for _ in range(levels):
        inner = _item("a", b"F" + _table(inner))
    return inner


#: Headers ``py-amqp`` raised on as it decoded them, over a good ``attack.add`` message's.
_UNDECODABLE: dict[str, tuple[bytes, bytes]] = {
    # AMQP timestamps are 64-bit: past the year 9999 Python's datetime overflows
    "timestamp-past-9999": (_item("x", b"T" + struct.pack(">Q", 2**63)), b"application/json"),
    # 3,000 levels in 21 KB: decoded recursively, past Python's recursion limit
    "nested-tables": (_nested_tables(3000), b"application/json"),
    # a content type (a short string) that is not UTF-8
    "content-type": (b"", b"\xff\xfe"),
}


def test_amqp_properties_py_amqp_cannot_decode_leave_the_worker_serving(
    amqp_worker: AmqpWorker,
) -> None:
    """``py-amqp`` decodes a message's properties as the worker's event loop reads the frame;
    RabbitMQ passes them on as published.  Each of these raised there: the guarded worker
    stopped ("Unrecoverable error"), and the message, never acknowledged, would stop the next
    worker.  With :func:`~langgraph_celery.worker.envelopes.guard_amqp_properties` they are
    decoded as none (logged), Celery's consumer refuses the message, and the worker serves on;
    nothing is left on the queue."""
    good = (
        _item("lang", _text(b"py"))
        + _item("task", _text(b"attack.add"))
        + _item("id", _text(uuid.uuid4().hex.encode()))
    )
    for headers, content_type in _UNDECODABLE.values():
        _publish_raw(amqp_worker.queue, _properties(good + headers, content_type), b"[[1,1],{},{}]")
    amqp_worker.serves(2)
    log = amqp_worker.worker.log()
    assert log.count("whose AMQP properties py-amqp cannot decode") == len(_UNDECODABLE), log
    for reason in ("OverflowError", "RecursionError", "UnicodeDecodeError"):
        assert f"cannot decode (decoded as none): {reason}" in log
    assert amqp_worker.queued() == 0


def test_an_amqp_timestamp_eta_of_a_node_task_message_is_held_to_the_visibility_timeout(
    amqp_worker: AmqpWorker,
) -> None:
    """On RabbitMQ a header can be of AMQP's timestamp type, which ``py-amqp`` decodes to a
    datetime and Celery takes as the message's ``eta`` as it is: a copy of a node task message
    due in the year 9999 was held as scheduled (the reaper, which asks the workers whether a
    lost step's task is alive, would wait for it) although the guard refuses the same ``eta``
    as a text."""
    task_id = celery_task_id("run", "checkpoint", "a")
    with amqp_worker.client.producer_or_acquire() as producer:
        producer.publish(
            [[], {}, {}],
            exchange="",
            routing_key=amqp_worker.queue,
            serializer="json",
            headers={
                "lang": "py",
                "task": node_task_name("attack-chain", "a"),
                "id": task_id,
                "eta": datetime(9999, 12, 31, 23, 59),  # (py-amqp sends a timestamp)
            },
        )
    worker = amqp_worker.worker
    reason = "node task message eta '9999-12-31 23:59:00' is more than 3600 s ahead"
    taken = (reason, f"Task {node_task_name('attack-chain', 'a')}[{task_id}] received")
    wait_until(lambda: any(t in worker.log() for t in taken), 30, 0.05, "the message taken")
    held = amqp_worker.client.control.inspect(timeout=2.0).query_task(task_id) or {}
    assert not any(held.values()), held  # (not held as scheduled)
    assert reason in worker.log()
    amqp_worker.serves(3)


def _held_in_a(stack: CeleryStack, thread: str, redis_client: Any) -> tuple[Any, str, Any]:
    """A run of ``slow`` held in its node ``a`` until the test deletes ``hold:<thread>:a``:
    its handle, the step's own Celery task id, ``a``'s message (its keyword arguments)."""
    redis_client.set(f"hold:{thread}:a", 1)
    handle = stack.graph("slow").start({"thread": thread}, RunnableConfig(thread_id=thread))
    wait_until(lambda: redis_client.get(f"started:{thread}:a"), 20, 0.02, "a to start")
    checkpoint = stack.saver.get(thread)
    runtime = stack.executor.runtime("slow")
    assert checkpoint is not None and runtime is not None
    own = celery_task_id(checkpoint.run_id, checkpoint.checkpoint_id, "a")
    return handle, own, runtime.envelope(checkpoint, checkpoint.tasks[0]).to_message()


def test_an_expired_message_of_another_task_under_a_steps_id_cancels_nothing(
    celery_stack: CeleryStack, thread: str, redis_client: Any
) -> None:
    """The guard refuses an expired *node* task message, which Celery would discard as revoked
    and whose id it would keep among the worker's revoked ids.  A message of the resume task
    under the running step's own id, expired, did the same: the step's next delivery (a copy
    here, as a retry or a redelivery is) was discarded as revoked, and the run cancelled,
    although nobody cancelled it.  It is refused now; the run completes."""
    handle, own, envelope = _held_in_a(celery_stack, thread, redis_client)
    past = datetime.now(UTC) - timedelta(hours=1)
    celery_stack.app.send_task(RESUME_TASK, kwargs={}, task_id=own, expires=past)
    reason = f"task message under a step's task id ({own!r}) has an expires"
    taken = (reason, f"Discarding revoked task: {RESUME_TASK}[{own}]")
    wait_until(lambda: any(t in celery_stack.worker_logs() for t in taken), 15, 0.05, "taken")
    name = node_task_name("slow", "a")
    celery_stack.app.send_task(name, kwargs=envelope, task_id=own)  # the step's next delivery
    discarded = f"Discarding revoked task: {name}[{own}]"

    def ran_again() -> bool:
        return int(redis_client.get(f"started:{thread}:a") or 0) == 2

    wait_until(lambda: ran_again() or discarded in celery_stack.worker_logs(), 15, 0.02, "a")
    redis_client.delete(f"hold:{thread}:a")
    outcome = handle.wait(timeout=30)
    logs = celery_stack.worker_logs()
    assert "its task was revoked, run" not in logs  # (... cancelled)
    assert "Discarding revoked task" not in logs
    assert outcome.as_state_data()["log"] == ["a", "b", "c"]
    assert handle.status() == "completed"
    assert reason in logs


def test_a_message_of_another_task_under_a_steps_id_is_due_within_the_visibility_timeout(
    celery_stack: CeleryStack, thread: str
) -> None:
    """A message of the resume task under a step's task id, due in a year, was held as
    scheduled under that id: the reaper, which asks the workers (``query_task``) whether they
    hold a lost step's task before it sends it again, would wait for it, as for a node task
    message due in a year (which the guard refuses).  It is refused too now."""
    own = celery_task_id(f"run-{thread}", "checkpoint", "a")
    later = datetime.now(UTC) + timedelta(days=365)
    celery_stack.app.send_task(RESUME_TASK, kwargs={}, task_id=own, eta=later)
    reason = f"task message under a step's task id ({own!r}) eta"
    taken = (reason, f"Task {RESUME_TASK}[{own}] received")
    wait_until(lambda: any(t in celery_stack.worker_logs() for t in taken), 15, 0.05, "taken")
    held = celery_stack.app.control.inspect(timeout=2.0).query_task(own) or {}
    assert not any(held.values()), held  # (not held as scheduled)
    assert reason in celery_stack.worker_logs()
    celery_stack.wait_until_quiet()
