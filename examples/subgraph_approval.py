"""An agent whose refunds wait for a person: a compiled subgraph parks the whole run at its
approval node until someone resumes it, possibly from another process, in process or on Celery.

The parent graph ``plan -> approval -> act``: ``plan`` reads the request, ``approval`` is a
compiled subgraph (``draft -> review``) used as one node, ``act`` carries out what was decided.
``review`` raises ``GraphInterrupt`` until the state holds a ``decision``: the child run parks,
and so does the parent, at the inner node (its ``InterruptionMetadata`` names ``review``, and
``metadata["subgraph_path"]`` is ``["approval", "review"]``).  A resume on the parent's thread
(``GraphInput.resume({"decision": "approve"})``) continues the child where it stopped, then the
parent.

In process, with the checkpoints in memory (the run parks, then this process approves it)::

    python examples/subgraph_approval.py "refund order 42"

In process with a database: the run parks and this process ends; another one resumes it::

    python examples/subgraph_approval.py --db sqlite:////tmp/approval.sqlite "refund order 42"
    python examples/subgraph_approval.py --db sqlite:////tmp/approval.sqlite --resume THREAD

On Celery with the in-memory broker, a worker thread of each process serves the tasks (the run
parks, and another process with its own worker thread resumes it from the database)::

    python examples/subgraph_approval.py --broker memory:// --db sqlite:////tmp/approval.sqlite
    python examples/subgraph_approval.py --broker memory:// --db sqlite:////tmp/approval.sqlite \\
        --resume THREAD

On Celery with Redis as broker and result backend and checkpoints in a database that the
workers and the clients all reach (PostgreSQL; SQLite if they run on one machine), start a
worker that imports this module with the same settings::

    export LGC_EXAMPLE_BROKER=redis://127.0.0.1:6379/0
    export LGC_EXAMPLE_DATABASE=sqlite:////tmp/approval.sqlite
    celery --workdir examples -A subgraph_approval worker --loglevel=INFO

then start the run, and resume it from another process (``--decision reject`` to refuse)::

    python examples/subgraph_approval.py --broker "$LGC_EXAMPLE_BROKER" \\
        --db "$LGC_EXAMPLE_DATABASE" "refund order 42"
    python examples/subgraph_approval.py --broker "$LGC_EXAMPLE_BROKER" \\
        --db "$LGC_EXAMPLE_DATABASE" --resume THREAD --decision approve
"""

from __future__ import annotations

import argparse
import contextlib
import operator
import os
import sys
import uuid
from collections.abc import Sequence
from typing import Annotated, Any, TypedDict

from langgraph_celery import (
    END,
    START,
    AgentState,
    CompileConfig,
    CompiledGraph,
    GraphInput,
    GraphInterrupt,
    GraphResult,
    RunnableConfig,
    StateGraph,
)
from langgraph_celery.worker.embedded import embedded_worker_for

BROKER_ENV = "LGC_EXAMPLE_BROKER"
DATABASE_ENV = "LGC_EXAMPLE_DATABASE"
GRAPH_ID = "subgraph-approval"
#: What a reviewer may answer.
DECISIONS = ("approve", "reject")


class Refund(TypedDict):
    request: str
    amount: int
    messages: Annotated[list[str], operator.add]
    draft: str
    decision: str
    outcome: str


def plan(state: AgentState) -> dict[str, Any]:
    """Read the request: a refund of a (made-up) amount."""
    request = str(state.value("request", ""))
    amount = 20 + sum(map(ord, request)) % 80
    return {"amount": amount, "messages": [f"plan: refund {amount} EUR"]}


def draft(state: AgentState) -> dict[str, Any]:
    """Write what will be sent once the refund is approved."""
    text = f"Dear customer, {state.value('amount')} EUR are on their way back to you."
    return {"draft": text, "messages": ["draft"]}


def review(state: AgentState) -> dict[str, Any]:
    """A person decides: until the state holds a decision, the run parks here."""
    decision = state.value("decision")
    if decision not in DECISIONS:
        raise GraphInterrupt(
            "approve the refund?", {"amount": state.value("amount"), "choices": list(DECISIONS)}
        )
    return {"messages": [f"review: {decision}"]}


def act(state: AgentState) -> dict[str, Any]:
    """Carry out the decision."""
    if state.value("decision") == "approve":
        outcome = f"refunded {state.value('amount')} EUR; sent: {state.value('draft')}"
    else:
        outcome = "refund refused"
    return {"outcome": outcome, "messages": ["act"]}


def approval_subgraph() -> CompiledGraph:
    """``draft -> review``, compiled with no saver or executor: it uses the parent's."""
    child = StateGraph(Refund).add_node(draft).add_node(review)
    return (
        child.add_edge(START, "draft").add_edge("draft", "review").add_edge("review", END).compile()
    )


def build_graph() -> StateGraph:
    graph = StateGraph(Refund)
    graph.add_node(plan).add_node("approval", approval_subgraph()).add_node(act)
    graph.add_edge(START, "plan").add_edge("plan", "approval").add_edge("approval", "act")
    return graph.add_edge("act", END)


def in_process_graph(database_url: str | None = None) -> CompiledGraph:
    """The graph run in this process: checkpoints in memory, or in ``database_url``."""
    from langgraph_celery.checkpoint import MemorySaver, SqlSaver

    saver = SqlSaver(database_url) if database_url else MemorySaver()
    return build_graph().compile(CompileConfig(checkpoint_saver=saver, graph_id=GRAPH_ID))


def celery_graph(broker_url: str, database_url: str) -> tuple[Any, CompiledGraph]:
    """The Celery app and the graph compiled on it (workers and clients build both alike)."""
    from celery import Celery

    from langgraph_celery.celery import CeleryExecutor
    from langgraph_celery.checkpoint import SqlSaver

    # (with the in-memory broker, the results stay in this process too)
    backend = "cache+memory://" if broker_url.startswith("memory://") else broker_url
    celery_app = Celery("subgraph_approval", broker=broker_url, backend=backend)
    compiled = build_graph().compile(
        CompileConfig(
            checkpoint_saver=SqlSaver(database_url),
            executor=CeleryExecutor(celery_app),
            graph_id=GRAPH_ID,
        )
    )
    return celery_app, compiled


def report(result: GraphResult, thread_id: str, out: Any = None) -> dict[str, Any]:
    """Print where the run stopped; what was printed, as data (for tests and scripts)."""
    out = out if out is not None else sys.stdout
    if not result.is_interruption_metadata():
        state = dict(result.as_state_data())
        out.write(f"thread {thread_id}: completed\n")
        out.write(f"outcome: {state['outcome']}\nmessages: {state['messages']}\n")
        return {"thread": thread_id, "status": "completed", "state": state}
    parked = result.as_interruption_metadata()
    path = list(parked.metadata.get("subgraph_path", []))
    out.write(
        f"thread {thread_id}: parked at {parked.node_id!r} (subgraph path {path}): "
        f"{parked.reason} {dict(parked.metadata)}\n"
    )
    return {
        "thread": thread_id,
        "status": "parked",
        "node": parked.node_id,
        "reason": parked.reason,
        "subgraph_path": path,
        "amount": parked.metadata.get("amount"),
    }


def run(graph: CompiledGraph, graph_input: Any, thread_id: str) -> GraphResult:
    """Stream a run to where it stops; its result (the final state or the interruption)."""
    stream = graph.stream(graph_input, RunnableConfig(thread_id=thread_id))
    for _ in stream:
        pass
    return stream.result


def start(graph: CompiledGraph, request: str, thread_id: str | None = None) -> dict[str, Any]:
    """Run the agent on ``request`` until it parks for the review (or ends)."""
    thread_id = thread_id or f"refund-{uuid.uuid4().hex[:8]}"
    return report(run(graph, {"request": request}, thread_id), thread_id)


def resume(graph: CompiledGraph, thread_id: str, decision: str) -> dict[str, Any]:
    """Give the parked run of ``thread_id`` the reviewer's ``decision`` and let it finish."""
    return report(run(graph, GraphInput.resume({"decision": decision}), thread_id), thread_id)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("request", nargs="?", default="refund order 42")
    parser.add_argument("--broker", help="run on Celery: a Redis URL (broker and backend)")
    parser.add_argument("--db", help="the checkpoint database URL (needed with --broker)")
    parser.add_argument("--resume", metavar="THREAD", help="resume the run parked on THREAD")
    parser.add_argument("--decision", choices=DECISIONS, default="approve")
    args = parser.parse_args(argv)
    if args.broker:
        if not args.db:
            parser.error("--broker needs --db: the database the workers store checkpoints in")
        _, graph = celery_graph(args.broker, args.db)
    else:
        graph = in_process_graph(args.db)
    if args.resume and not args.db:
        parser.error("--resume needs --db: where the parked run's checkpoints are")
    # With the in-memory broker (``--broker memory://``) a worker thread of this process serves
    # the run's tasks; a parked run resumes in another process that starts its own.
    with embedded_worker_for(graph) or contextlib.nullcontext():
        return decide(graph, args)


def decide(graph: CompiledGraph, args: argparse.Namespace) -> int:
    """Resume the thread ``args`` names, or start a run and say how it can be resumed."""
    if args.resume:
        resume(graph, args.resume, args.decision)
        return 0
    parked = start(graph, args.request)
    if parked["status"] != "parked":
        return 0
    if args.db:
        where = f"--broker {args.broker} " if args.broker else ""
        print(f"resume it with: {sys.argv[0]} {where}--db {args.db} --resume {parked['thread']}")
    else:  # (in memory: no other process can see the run, so this one decides)
        resume(graph, parked["thread"], args.decision)
    return 0


# A worker (``celery -A subgraph_approval worker``) finds the app here, built from the environment.
if os.environ.get(BROKER_ENV) and os.environ.get(DATABASE_ENV):
    app, graph = celery_graph(os.environ[BROKER_ENV], os.environ[DATABASE_ENV])

if __name__ == "__main__":
    sys.exit(main())
