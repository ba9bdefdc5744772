"""What ``langgraph-celery`` prints while it follows a run: node updates, the outcome, and the
commands that resume a parked run or start a worker."""

from __future__ import annotations

import _thread
import argparse
import json
import math
import os
import re
import shlex
import sys
import threading
from collections.abc import Callable, Mapping
from contextlib import nullcontext
from typing import IO, TYPE_CHECKING, Any

from langgraph_celery._cli_secrets import masked

if TYPE_CHECKING:
    from langgraph_celery.graph.compiled import CompiledGraph, GraphStream
    from langgraph_celery.graph.types import InterruptionMetadata, StateSnapshot

__all__ = [
    "ENV_VARIABLES",
    "JSON_HELP",
    "PROG",
    "absolute_sqlite",
    "check_reachable",
    "environment_flags",
    "follow",
    "resume_command",
    "snapshot_json",
    "to_json",
    "worker_command",
]

PROG = "langgraph-celery"
#: The CLI options that set environment variables, and those variables.
ENV_VARIABLES = {
    "broker": "LGC_BROKER_URL",
    "result_backend": "LGC_RESULT_BACKEND",
    "db": "LGC_DATABASE_URL",
}
#: Seconds without progress before a run on external workers prints a hint.
WAIT_HINT_AFTER = 15.0
#: What the commands that print JSON say about it in their help.
JSON_HELP = (
    "The output is strict JSON (RFC 8259). Values JSON cannot hold are shown so: the floats NaN, "
    'inf and -inf as the strings "NaN", "Infinity" and "-Infinity"; a key that is not a string '
    'as its JSON text (1 as "1", the tuple (1, "a") as "[1, \\"a\\"]"); a lone surrogate in a '
    "string as its \\uXXXX escape; tuples as arrays; any other object as its str()."
)
_NON_FINITE = {math.inf: "Infinity", -math.inf: "-Infinity"}
_SURROGATE = re.compile(r"[\ud800-\udfff]")


def environment_flags(args: argparse.Namespace) -> list[str]:
    """The environment options given, as flags to repeat in a suggested command (with the
    passwords in their URLs masked: what is printed ends up in terminals and logs)."""
    flags: list[str] = []
    for option in ENV_VARIABLES:
        value = getattr(args, option, None)
        if value:
            flags += [f"--{option.replace('_', '-')}", masked(value)]
    return flags


def worker_command(module: str, settings: Mapping[str, str] | None = None) -> str:
    """How to start a worker for ``module`` with this command's environment, and ``settings``
    over it (passwords masked)."""
    environment = {v: os.environ[v] for v in ENV_VARIABLES.values() if os.environ.get(v)}
    environment.update(settings or {})
    assignments = [f"{name}={shlex.quote(masked(value))}" for name, value in environment.items()]
    return " ".join([*assignments, "celery", "-A", module, "worker"])


def absolute_sqlite(url: str) -> str:
    """``url`` with a relative SQLite file path made absolute (a worker started in another
    directory then opens the same file); any other URL as it is."""
    prefix = "sqlite:///"
    path = url[len(prefix) :] if url.startswith(prefix) else ""
    if not path or path.startswith("/") or path.startswith(":memory:"):
        return url
    return prefix + os.path.abspath(path)


def _float(value: float) -> float | str:
    return value if math.isfinite(value) else _NON_FINITE.get(value, "NaN")


def _key(key: Any) -> str:
    """A dict key as a JSON object's name: strings as they are, anything else as its JSON text."""
    if isinstance(key, str):
        return key
    if isinstance(key, float):
        return json.dumps(_float(key)).strip('"')  # "1.5", "NaN": no quotes inside the name
    if key is None or isinstance(key, bool | int | tuple):
        return to_json(key)
    return str(key)


def _strict(value: Any) -> Any:
    """``value`` with what JSON cannot hold replaced (see :data:`JSON_HELP`); loops, not
    comprehensions, so that each level of nesting takes one frame."""
    if isinstance(value, float):
        return _float(value)
    if isinstance(value, dict):
        names: dict[str, Any] = {}
        for key, item in value.items():
            names[_key(key)] = _strict(item)
        return names
    if isinstance(value, list | tuple):
        items = []
        for item in value:
            items.append(_strict(item))
        return items
    return value


def to_json(value: Any, indent: int | None = None) -> str:
    """``value`` as strict JSON text, whatever it holds (see :data:`JSON_HELP`)."""
    text = json.dumps(
        _strict(value), indent=indent, default=str, ensure_ascii=False, allow_nan=False
    )
    # A lone surrogate cannot be written as UTF-8; inside a JSON string its escape is valid.
    return _SURROGATE.sub(lambda match: f"\\u{ord(match.group()):04x}", text)


def snapshot_json(snapshot: StateSnapshot, thread_id: str) -> dict[str, Any]:
    return {
        "thread_id": thread_id,
        "checkpoint_id": snapshot.checkpoint_id,
        "step": snapshot.step,
        "node": snapshot.node,
        "next": list(snapshot.next),
        "created_at": snapshot.created_at.isoformat() if snapshot.created_at else None,
        "values": dict(snapshot.values),
        "metadata": dict(snapshot.metadata),
    }


class _WaitHint:
    """Prints a hint on stderr when a run on external workers shows no progress for a while:
    ``message()`` is asked then (it may ask the workers)."""

    def __init__(self, message: Callable[[], str] | None, after: float = WAIT_HINT_AFTER) -> None:
        self.message, self.after = message, after
        self._timer: threading.Timer | None = None

    def poke(self) -> None:
        self.cancel()
        if self.message is not None:
            self._timer = threading.Timer(self.after, self._say)
            self._timer.daemon = True
            self._timer.start()

    def _say(self) -> None:
        assert self.message is not None
        text = self.message()
        print(f"(no progress for {self.after:.0f} s) {text}", file=sys.stderr, flush=True)

    def cancel(self) -> None:
        if self._timer is not None:
            self._timer.cancel()


def resume_command(
    target: str, thread_id: str, update: Mapping[str, Any] | None, env: list[str]
) -> str:
    words = [PROG, "resume", target, "--thread", thread_id]
    if update is not None:
        words += ["--update", to_json(dict(update))]
    return " ".join(shlex.quote(word) for word in words + env)


def _report_interruption(
    out: IO[str], interruption: InterruptionMetadata, target: str, thread_id: str, env: list[str]
) -> None:
    reason = f": {interruption.reason}" if interruption.reason else ""
    print(f"parked at node {interruption.node_id!r}{reason}", file=out)
    metadata = {k: v for k, v in interruption.metadata.items() if k != "resume_with"}
    if metadata:
        print(f"  {to_json(metadata)}", file=out)
    suggested = interruption.metadata.get("resume_with")
    update = dict(suggested) if isinstance(suggested, Mapping) else None
    print("resume it (from any process, now or later) with:", file=out)
    print(f"  {resume_command(target, thread_id, update, env)}", file=out)
    if update is None:
        print("  (add --update JSON to change the state first)", file=out)


def _latest_run(graph: CompiledGraph, thread_id: str | None) -> str | None:
    """The run id of the thread's latest checkpoint (``None`` without a saver or a checkpoint:
    a run that is not stored cannot be named later)."""
    saver = graph.checkpoint_saver
    latest = saver.get(thread_id) if saver is not None and thread_id else None
    return latest.run_id if latest is not None else None


def _resumed_run(graph: CompiledGraph, graph_input: Any, thread_id: str | None) -> str | None:
    """The run a resume of ``thread_id`` continues: its latest checkpoint's, when something is
    pending there (else the resume is refused, and no run is named)."""
    from langgraph_celery.graph._marks import has_pending
    from langgraph_celery.graph.types import GraphInput

    saver = graph.checkpoint_saver
    if not isinstance(graph_input, GraphInput) or not graph_input.is_resume:
        return None
    latest = saver.get(thread_id) if saver is not None and thread_id else None
    return latest.run_id if latest is not None and has_pending(latest) else None


#: Seconds the CLI gives the broker and the result backend to answer before it says which one
#: it cannot reach (Celery's own retries would take about 20 s before a vaguer error).
REACH_TIMEOUT = 5.0


def check_reachable(app: Any) -> None:
    """Refuse at once, naming it (password masked), a Celery broker or result backend this
    process cannot reach: a wrong host or port, a server that is down, a refused password."""
    from langgraph_celery._cli_input import UsageError

    broker = masked(str(app.conf.broker_url or ""))
    try:
        with app.connection_for_write() as connection:
            connection.ensure_connection(max_retries=1, interval_start=0, timeout=REACH_TIMEOUT)
    except Exception as error:
        raise UsageError(
            f"cannot reach the Celery broker at {broker} ({type(error).__name__}: {error}); "
            "check that it runs and that its URL (host, port, user, password) is right: "
            "--broker (LGC_BROKER_URL), or the app's configuration"
        ) from None
    ping = getattr(getattr(app.backend, "client", None), "ping", None)
    if not callable(ping):
        return  # (a backend with no connection to check: the database's is checked on use)
    try:
        ping()
    except Exception as error:
        backend = masked(str(app.conf.result_backend or ""))
        raise UsageError(
            f"cannot reach the Celery result backend at {backend} ({type(error).__name__}: "
            f"{error}); check that it runs and that its URL (host, port, user, password) is "
            "right: --result-backend (LGC_RESULT_BACKEND), or the app's configuration"
        ) from None


def follow(
    graph: CompiledGraph,
    graph_input: Any,
    thread_id: str | None,
    *,
    target: str,
    env: list[str],
    out: IO[str],
) -> InterruptionMetadata | None:
    """Run (or resume) ``graph``, printing the run's id (``run: ID``, first, once the run is
    stored), each node's update as it finishes and the outcome.

    Returns the interruption when the run parked, ``None`` when it completed."""
    from langgraph_celery.graph.config import RunnableConfig
    from langgraph_celery.graph.types import END, StreamMode
    from langgraph_celery.worker._following import RunCancelled
    from langgraph_celery.worker.embedded import EmbeddedWorkerError, embedded_worker_for
    from langgraph_celery.worker.handle import RunHandle

    config = RunnableConfig(thread_id=thread_id, stream_mode=StreamMode.UPDATES)
    # If the worker thread dies, the run cannot progress: wake this thread up to say so.
    worker = embedded_worker_for(graph, on_crash=_thread.interrupt_main)
    on_celery = getattr(graph.config.executor, "app", None) is not None

    def why_waiting() -> str:
        source = graph._source
        saver = graph.checkpoint_saver
        latest = saver.get(thread_id) if saver is not None and thread_id else None
        why = source.why_waiting(latest) if hasattr(source, "why_waiting") else ""
        return f"{why}; a worker for it: {worker_command(target.partition(':')[0])}"

    if on_celery and worker is None:
        check_reachable(graph.config.executor.app)
    hint = _WaitHint(why_waiting if on_celery and worker is None else None)
    # A resume continues the run of the thread's latest checkpoint: its id is known at once.
    run_id = _resumed_run(graph, graph_input, thread_id)
    if run_id is not None:
        print(f"run: {run_id}", file=out, flush=True)
    stream: GraphStream | None = None
    try:
        with worker or nullcontext():
            stream = graph.stream(graph_input, config)
            hint.poke()
            for output in stream:
                hint.poke()
                if run_id is None:  # the run has stored its first checkpoint: read its id
                    run_id = _latest_run(graph, thread_id)
                    if run_id is not None:
                        print(f"run: {run_id}", file=out, flush=True)
                if output.node != END:
                    print(f"{output.node}: {to_json(output.update or {})}", file=out, flush=True)
    except KeyboardInterrupt:
        if stream is not None:  # (interrupted between two outputs: the run stops here)
            stream.close()
        if worker is not None and worker.crashed:
            why = "" if worker.crashed is True else f" ({worker.crashed!r})"
            raise EmbeddedWorkerError(
                f"the in-process Celery worker stopped{why}; the run stays at its last "
                f"checkpoint on thread {thread_id!r}"
            ) from None
        if on_celery and worker is None and run_id is not None:
            words = (PROG, "cancel", target, run_id, *env)
            cancel = " ".join(shlex.quote(word) for word in words)
            print(
                f"\nthe run goes on on the Celery workers; stop it with:\n  {cancel}",
                file=sys.stderr,
            )
        elif run_id is not None and thread_id:  # stopped here: recorded cancelled, resumable
            if worker is not None:  # (its messages go with this process: cancel the run)
                RunHandle(run_id, thread_id, graph).cancel()
            resume = resume_command(target, thread_id, None, env)
            print(
                f"\nrun {run_id} stopped (cancelled); continue it with:\n  {resume}",
                file=sys.stderr,
            )
        raise
    except RunCancelled as cancelled:  # (from elsewhere: `cancel`, the console, a RunHandle)
        resume = resume_command(target, thread_id or "", None, env)
        how = f"its checkpoints stay; continue it with:\n  {resume}"
        raise RunCancelled(cancelled.run_id, how) from None
    finally:
        hint.cancel()
    result = stream.result
    if result.is_interruption_metadata():
        interruption = result.as_interruption_metadata()
        _report_interruption(out, interruption, target, thread_id or "", env)
        return interruption
    print("completed:", file=out)
    print(to_json(result.as_state_data_or_last_checkpoint_state_data(), indent=2), file=out)
    return None
