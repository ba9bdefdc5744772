"""The ``langgraph-celery`` commands that start something and stay: ``demo`` (the demo graph,
run and approved on Celery), ``worker`` (a Celery worker on a module's app, by ``exec``) and
``console`` (the web console); :mod:`langgraph_celery.cli` parses their arguments."""

from __future__ import annotations

import argparse
import os
import sys
import uuid
from typing import IO

from langgraph_celery._cli_input import UsageError
from langgraph_celery._cli_load import DEMO_TARGET, import_module, load_graph
from langgraph_celery._cli_output import (
    PROG,
    absolute_sqlite,
    environment_flags,
    follow,
    resume_command,
    worker_command,
)
from langgraph_celery._cli_secrets import masked

__all__ = ["cmd_console", "cmd_demo", "cmd_worker"]


def cmd_demo(args: argparse.Namespace, out: IO[str]) -> int:
    from langgraph_celery.graph.types import GraphInput
    from langgraph_celery.worker.embedded import needs_embedded_worker

    graph = load_graph(DEMO_TARGET)
    from langgraph_celery import demo

    env = environment_flags(args)
    thread_id = args.thread or f"demo-{uuid.uuid4().hex[:12]}"
    embedded = needs_embedded_worker(graph)
    database = os.environ.get(demo.DATABASE_ENV) or demo.DEFAULT_DATABASE_URL
    print(
        f"{PROG} demo: every node runs as a Celery task on "
        f"{'a worker thread of this process' if embedded else 'your Celery workers'}\n"
        f"  broker:      {masked(str(demo.app.conf.broker_url))}\n"
        f"  checkpoints: {masked(database)}\n"
        f"  thread:      {thread_id}",
        file=out,
    )
    if not embedded:
        # (the workers must open the same checkpoint store: a relative SQLite path, made absolute)
        same_store = {demo.DATABASE_ENV: absolute_sqlite(database)}
        print(f"  workers:     {worker_command('langgraph_celery.demo', same_store)}", file=out)
    print("\n" + graph.get_graph("mermaid").content + "\n", file=out)
    start = {"topic": args.topic, "recipient": "team@example.com"}
    interruption = follow(graph, start, thread_id, target=DEMO_TARGET, env=env, out=out)
    if interruption is None or args.park:
        return 0
    approval = {"approved": True}
    print(
        f"\napproving now, as `{resume_command(DEMO_TARGET, thread_id, approval, env)}` would:",
        file=out,
    )
    follow(graph, GraphInput.resume(approval), thread_id, target=DEMO_TARGET, env=env, out=out)
    return 0


def cmd_worker(args: argparse.Namespace, out: IO[str]) -> int:
    module_name, _, attribute = args.module.partition(":")
    module = import_module(module_name)
    app = getattr(module, attribute or "app", None) or getattr(module, "celery", None)
    if app is None or not hasattr(app, "conf"):
        raise UsageError(f"module {module_name!r} has no Celery app (expected `app` or `celery`)")
    if str(app.conf.broker_url or "").startswith("memory://"):
        raise UsageError(
            f"{args.module} uses the in-memory broker (memory://), which no other process can "
            "reach; `run`, `resume` and `demo` start a worker thread for it themselves. For "
            "separate workers, give a real broker: --broker redis://..."
        )
    celery_args = list(args.celery_args)
    if not any(arg.startswith(("-l", "--loglevel")) for arg in celery_args):
        celery_args.insert(0, "--loglevel=INFO")
    argv = [sys.executable, "-m", "celery", "-A", args.module, "worker", *celery_args]
    out.flush()
    sys.stderr.flush()
    os.execv(sys.executable, argv)  # replaces this process; the environment carries over
    return 0  # pragma: no cover - not reached


def cmd_console(args: argparse.Namespace, out: IO[str]) -> int:
    from langgraph_celery.console.command import run

    return run(args, out, import_module, UsageError)
