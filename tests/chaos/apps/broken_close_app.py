"""A worker app whose broker connection fails to close once it was lost, as Kombu's can.

``celery -A broken_close_app worker`` builds a Celery app on ``BROKEN_CLOSE_BROKER_URL`` (broker
and result backend), with a ``CeleryExecutor`` when ``BROKEN_CLOSE_EXECUTOR=1`` (one whose
``SurviveBrokerLoss`` step is turned off when it is ``off``, plain Celery when ``0``), and one
task, ``broken_close.add``.  The failure is injected: the first time a connection that Kombu
already collected (its transport detached, its channel still there) is closed again, the close
raises the ``AttributeError`` Kombu's Redis transport raises in that state (reproduced for real,
without injection, by ``lost_connection.py``).  Celery's consumer does exactly that when the
broker goes away; the test checks what the worker does next.
"""

from __future__ import annotations

import os
from typing import Any

from celery import Celery
from kombu.connection import Connection

from langgraph_celery.celery import CeleryExecutor

BROKER_URL = os.environ["BROKEN_CLOSE_BROKER_URL"]

app = Celery("broken_close", broker=BROKER_URL, backend=BROKER_URL)
if os.environ.get("BROKEN_CLOSE_EXECUTOR") == "1":
    CeleryExecutor(app)
elif os.environ.get("BROKEN_CLOSE_EXECUTOR") == "off":
    CeleryExecutor(app, survive_broker_loss=False)

_close = Connection._close
_injected: list[bool] = []


def _close_once_failing(connection: Any) -> None:
    if not _injected and connection._transport is None and connection._default_channel:
        _injected.append(True)
        raise AttributeError("'NoneType' object has no attribute 'hostname' (injected)")
    _close(connection)


Connection._close = _close_once_failing  # type: ignore[method-assign]


@app.task(name="broken_close.add")
def add(x: int, y: int) -> int:
    return x + y
