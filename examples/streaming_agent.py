"""A streaming agent: a (fake) language model writes its answer token by token, and the client
prints each token as the node produces it, in process or on Celery workers.

``route`` is a command node: it sends a question about the weather to ``tool`` first, anything
else straight to ``answer``.  ``answer`` streams the model's tokens (a generator in its update:
each token reaches the client as a ``StreamingOutput``) and returns the full text as its update;
``tool`` reports its progress with ``config.emit``.  The state is a ``TypedDict`` whose
``messages`` field appends.  The model is a stand-in (no network): it yields canned words with a
short pause, as a real model's streaming API would.

In process (the default)::

    python examples/streaming_agent.py "What is the weather in Paris?"

On Celery, with Redis as broker and result backend (streamed tokens travel on Redis pub/sub)
and checkpoints in a database that the workers and the client all reach (PostgreSQL; SQLite if
they run on one machine), start a worker that imports this module with the same settings::

    export LGC_EXAMPLE_BROKER=redis://127.0.0.1:6379/0
    export LGC_EXAMPLE_DATABASE=sqlite:////tmp/streaming-agent.sqlite
    celery --workdir examples -A streaming_agent worker --loglevel=INFO

then run the client with the same two URLs::

    python examples/streaming_agent.py --broker "$LGC_EXAMPLE_BROKER" \\
        --db "$LGC_EXAMPLE_DATABASE" "What is the weather in Paris?"
"""

from __future__ import annotations

import argparse
import operator
import os
import sys
import time
import uuid
from collections.abc import Iterator, Sequence
from typing import Annotated, Any, TypedDict

from langgraph_celery import (
    END,
    START,
    AgentState,
    Command,
    CompileConfig,
    CompiledGraph,
    RunnableConfig,
    StateGraph,
    StreamingOutput,
)

BROKER_ENV = "LGC_EXAMPLE_BROKER"
DATABASE_ENV = "LGC_EXAMPLE_DATABASE"
GRAPH_ID = "streaming-agent"

#: What the fake model says to anything but the weather.
GREETING = "I am a small example agent: ask me about the weather."
#: Seconds the fake model takes per token.
TOKEN_PAUSE = 0.02


class Conversation(TypedDict):
    question: str
    messages: Annotated[list[str], operator.add]
    weather: str
    answer: str


def fake_model(prompt: str) -> Iterator[str]:
    """A stand-in for a language model's streaming call: the answer's words, one at a time."""
    if "weather:" in prompt:
        forecast = prompt.rsplit("weather:", 1)[1].strip()
        words = f"The forecast says {forecast}. Take a coat if you go out.".split()
    else:
        words = GREETING.split()
    for index, word in enumerate(words):
        time.sleep(TOKEN_PAUSE)
        yield word if index == 0 else f" {word}"


def route(state: AgentState) -> Command:
    """A command node: where to go next, with an update."""
    question = str(state.value("question", ""))
    goto = "tool" if "weather" in question.lower() else "answer"
    return Command(goto=goto, update={"messages": [f"route: {goto}"]})


def tool(state: AgentState, config: RunnableConfig) -> dict[str, Any]:
    """A tool call that reports its progress with ``config.emit``."""
    config.emit({"tool": "weather", "status": "looking up"})
    weather = "light rain, 12 °C"
    config.emit({"tool": "weather", "status": "done"})
    return {"weather": weather, "messages": ["tool: weather"]}


def answer(state: AgentState) -> dict[str, Any]:
    """Stream the model's tokens; the generator's return value is the node's final update."""
    weather = state.value("weather")
    prompt = str(state.value("question", "")) + (f"\nweather: {weather}" if weather else "")

    def tokens() -> Iterator[str]:
        text = ""
        for token in fake_model(prompt):
            text += token
            yield token
        return {"answer": text, "messages": ["answer"]}

    return {"tokens": tokens()}


def build_graph() -> StateGraph:
    graph = StateGraph(Conversation)
    graph.add_node(route, destinations=["tool", "answer"]).add_node(tool).add_node(answer)
    graph.add_edge(START, "route").add_edge("tool", "answer")
    return graph.add_edge("answer", END)


def in_process_graph() -> CompiledGraph:
    return build_graph().compile()


def celery_graph(broker_url: str, database_url: str) -> tuple[Any, CompiledGraph]:
    """The Celery app and the graph compiled on it (workers and clients build both alike)."""
    from celery import Celery

    from langgraph_celery.celery import CeleryExecutor
    from langgraph_celery.checkpoint import SqlSaver

    celery_app = Celery("streaming_agent", broker=broker_url, backend=broker_url)
    compiled = build_graph().compile(
        CompileConfig(
            checkpoint_saver=SqlSaver(database_url),
            executor=CeleryExecutor(celery_app),
            graph_id=GRAPH_ID,
        )
    )
    return celery_app, compiled


def ask(graph: CompiledGraph, question: str, out: Any = None) -> dict[str, Any]:
    """Stream a run of ``graph`` on ``question``: tokens printed (on ``out``, default stdout)
    as they come, tool progress and steps on their own lines; the final state."""
    out = out if out is not None else sys.stdout
    config = RunnableConfig(thread_id=f"chat-{uuid.uuid4().hex[:8]}")
    stream = graph.stream({"question": question}, config)
    for output in stream:
        if isinstance(output, StreamingOutput):
            chunk = output.chunk
            if isinstance(chunk, str):
                out.write(chunk)
            else:
                out.write(f"[{output.node}] {chunk}\n")
            out.flush()
        elif output.node == "answer":
            out.write("\n")
        elif output.node not in (START, END):
            out.write(f"-- {output.node} done\n")
    return dict(stream.result.as_state_data())


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("question", nargs="?", default="What is the weather in Paris?")
    parser.add_argument("--broker", help="run on Celery: a Redis URL (broker and backend)")
    parser.add_argument("--db", help="with --broker: the checkpoint database URL")
    args = parser.parse_args(argv)
    if args.broker:
        if not args.db:
            parser.error("--broker needs --db: the database the workers store checkpoints in")
        _, graph = celery_graph(args.broker, args.db)
    else:
        graph = in_process_graph()
    state = ask(graph, args.question)
    print(f"messages: {state['messages']}")
    return 0


# A worker (``celery -A streaming_agent worker``) finds the app here, built from the environment.
if os.environ.get(BROKER_ENV) and os.environ.get(DATABASE_ENV):
    app, graph = celery_graph(os.environ[BROKER_ENV], os.environ[DATABASE_ENV])

if __name__ == "__main__":
    sys.exit(main())
