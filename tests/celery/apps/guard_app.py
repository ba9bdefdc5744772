"""A worker app for the test of the guard consumer step (``GuardTaskMessages``).

``celery -A guard_app worker -Q <GUARD_QUEUE>`` builds a Celery app on ``GUARD_BROKER_URL``
(broker and result backend) with a ``CeleryExecutor``, whose guard is turned off when
``GUARD_OFF=1``, and one task, ``guard.add``.
"""

from __future__ import annotations

import os

from celery import Celery

from langgraph_celery.celery import CeleryExecutor

BROKER_URL = os.environ["GUARD_BROKER_URL"]

app = Celery("guard", broker=BROKER_URL, backend=BROKER_URL)
CeleryExecutor(app, guard_task_messages=os.environ.get("GUARD_OFF") != "1")


@app.task(name="guard.add")
def add(x: int, y: int) -> int:
    return x + y
