"""Kombu's failed close of a lost Redis connection, on the consumer of a real Celery worker.

``python lost_connection.py <broker_url> <broker_pid> plain|guarded`` builds a worker (not
started) on an app that is plain Celery or has a ``CeleryExecutor``, puts its consumer's
connection in the state Kombu's Redis transport leaves it in when the broker dies under a busy
worker (a ``BRPOP`` in flight, an unacknowledged task message on the consumer's channel, a
second channel, like the worker's control channel, holding an auto-delete fanout queue), kills
the broker (``SIGKILL`` to ``broker_pid``) and calls the consumer's handler of a lost
connection, as Celery's consumer does.  It prints ``{"raised": <exception type or null>,
"let_go": <whether the consumer let go of the connection>}``.

A process of its own: building a worker sets process-wide Celery state.
"""

from __future__ import annotations

import json
import os
import signal
import sys
from typing import Any

from celery import Celery
from kombu import Consumer, Exchange, Producer, Queue


def half_closed_consumer(app: Any, broker_pid: int) -> Any:
    worker = app.WorkController(
        hostname="lost-connection@test", pool_cls="solo", without_mingle=True, without_gossip=True
    )
    consumer = worker.consumer
    connection = app.connection_for_read()
    channel = connection.default_channel
    queue = Queue("lost-connection-tasks")
    Producer(channel).publish({"n": 1}, routing_key=queue.name, declare=[queue])
    received: list[Any] = []
    Consumer(channel, [queue], callbacks=[lambda body, message: received.append(message)]).consume()
    connection.drain_events(timeout=5)
    if not received:
        raise RuntimeError("the task message was not delivered")
    control = connection.channel()
    fanout = Queue(
        "lost-connection.pidbox",
        Exchange("lost-connection.pidbox", type="fanout"),
        auto_delete=True,
    )
    Consumer(control, [fanout], callbacks=[lambda body, message: None]).consume()
    channel._brpop_start()  # what the worker's event loop does while it waits for messages
    os.kill(broker_pid, signal.SIGKILL)
    consumer.connection = connection
    return consumer


def main(broker_url: str, broker_pid: int, kind: str) -> dict[str, Any]:
    app = Celery(kind, broker=broker_url)
    if kind == "guarded":
        from langgraph_celery.celery import CeleryExecutor

        CeleryExecutor(app)
    consumer = half_closed_consumer(app, broker_pid)
    try:
        consumer.on_connection_error_after_connected(ConnectionError("the broker went away"))
    except Exception as error:
        return {"raised": type(error).__name__, "let_go": consumer.connection is None}
    return {"raised": None, "let_go": consumer.connection is None}


if __name__ == "__main__":
    print(json.dumps(main(sys.argv[1], int(sys.argv[2]), sys.argv[3])))
