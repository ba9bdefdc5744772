"""A node task whose pool process died before its hard time limit is lost, not timed out.

Billiard gives a job whose pool process died ``lost_worker_timeout`` seconds (10 by default)
to deliver a result it may have sent before Celery reports it with ``WorkerLostError``; the
message then goes back to the queue (``reject_on_worker_lost``) and the node runs again.  When
the job's hard time limit falls within that wait, the pool's timeout handler gets there first
and reports ``TimeLimitExceeded``: the message is acknowledged and the run would fail with
"ran past its hard time limit", though the node was killed (``kill -9``, the OOM killer) well
before its time was up.

:class:`NodeRequest` (the node and resume tasks' request class) tells the two apart when the
hard limit is reported: the pool kills the process of a task that really ran past its limit
only after reporting it, so a process already gone (billiard marked the job's worker lost, or
the process no longer runs) means the task was lost.  It is then reported as Celery reports a
lost worker: ``WorkerLostError``, the message requeued, the delivery counted (see
``CeleryExecutor.max_deliveries``).
"""

from __future__ import annotations

import logging
import os
from typing import Any

from billiard.einfo import ExceptionInfo
from billiard.exceptions import WorkerLostError
from celery.exceptions import TimeLimitExceeded
from celery.worker.request import Request

__all__ = ["NodeRequest", "process_gone"]

log = logging.getLogger("langgraph_celery.worker")


def process_gone(pid: int | None) -> bool:
    """Whether process ``pid`` has ended (reaped, or a zombie waiting to be); ``False`` when it
    cannot be told (no pid)."""
    if not pid:
        return False
    try:
        with open(f"/proc/{pid}/stat", encoding="ascii", errors="replace") as stat:
            # "pid (comm) state ...": comm may hold spaces and parentheses, the state follows
            # the last ")"
            return stat.read().rsplit(")", 1)[-1].split()[0] in ("Z", "X")
    except FileNotFoundError:
        return True
    except OSError:
        pass
    try:  # (no /proc: a zombie still counts as running here)
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    except OSError:
        return False
    return False


class NodeRequest(Request):  # type: ignore[misc]
    """Reports a task whose pool process died before its hard time limit as lost (see the
    module's text); every other outcome is Celery's."""

    _lost_before_limit = False

    def _worker_lost(self) -> bool:
        job = self._apply_result() if self._apply_result is not None else None
        if job is not None and getattr(job, "_worker_lost", None):
            return True
        return process_gone(self.worker_pid)

    def on_failure(
        self, exc_info: Any, send_failed_event: bool = True, return_ok: bool = False
    ) -> None:
        exc = getattr(exc_info.exception, "exc", exc_info.exception)  # (ExceptionWithTraceback)
        if isinstance(exc, TimeLimitExceeded) and self._worker_lost():
            self._lost_before_limit = True
            log.warning(
                "task %s[%s]: its pool process (pid %s) died before the hard time limit; "
                "reported as a lost worker (the message goes back to the queue)",
                self.name,
                self.id,
                self.worker_pid,
            )
            try:
                raise WorkerLostError("Worker exited prematurely: its process died.")
            except WorkerLostError:
                exc_info = ExceptionInfo()
        super().on_failure(exc_info, send_failed_event=send_failed_event, return_ok=return_ok)

    def on_timeout(self, soft: bool, timeout: float) -> None:
        if not soft and self._lost_before_limit:
            return  # reported as lost by on_failure (which the pool calls first)
        super().on_timeout(soft, timeout)
