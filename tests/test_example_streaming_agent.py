"""``examples/streaming_agent.py`` runs as its docstring says: in process, and on a real Celery
worker on Redis (the worker imports the module, the client passes ``--broker`` and ``--db``),
where the tokens reach the client while the answer node runs."""

from __future__ import annotations

import importlib.util
import io
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

from app_kit import app_env
from celery_support import launch_worker

EXAMPLES = Path(__file__).resolve().parent.parent / "examples"


@pytest.fixture(scope="module")
def agent() -> Iterator[ModuleType]:
    spec = importlib.util.spec_from_file_location(
        "streaming_agent", EXAMPLES / "streaming_agent.py"
    )
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["streaming_agent"] = module  # (its TypedDict's annotations resolve there)
    try:
        spec.loader.exec_module(module)
        yield module
    finally:
        del sys.modules["streaming_agent"]


def test_the_agent_streams_its_answer_in_process(
    agent: ModuleType, capsys: pytest.CaptureFixture[str]
) -> None:
    assert agent.main(["What is the weather in Paris?"]) == 0
    printed = capsys.readouterr().out
    assert "[tool] {'tool': 'weather', 'status': 'looking up'}" in printed
    assert "The forecast says light rain, 12 °C. Take a coat if you go out.\n" in printed
    assert "messages: ['route: tool', 'tool: weather', 'answer']" in printed


def test_tokens_arrive_one_by_one_in_process(agent: ModuleType) -> None:
    class Recorder(io.StringIO):
        writes: list[str] = []

        def write(self, text: str) -> int:
            self.writes.append(text)
            return super().write(text)

    out = Recorder()
    state = agent.ask(agent.in_process_graph(), "hello", out)
    assert state["answer"] == "I am a small example agent: ask me about the weather."
    assert out.writes[1:4] == ["I", " am", " a"]  # each token on its own, after route's line


def test_the_agent_on_a_celery_worker(
    agent: ModuleType, redis_url: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    database = f"sqlite:///{tmp_path / 'agent.sqlite'}"
    settings = {agent.BROKER_ENV: redis_url, agent.DATABASE_ENV: database}
    env = app_env(EXAMPLES, settings)
    worker = launch_worker(
        "streaming_agent",
        ["celery"],
        f"agent-{uuid.uuid4().hex[:8]}",
        env,
        tmp_path / "worker.log",
        concurrency=1,
    )
    try:
        argv = ["--broker", redis_url, "--db", database, "What is the weather in Paris?"]
        assert agent.main(argv) == 0
        printed = capsys.readouterr().out
        _, graph = agent.celery_graph(redis_url, database)
        chunks = _chunks(agent, graph, "Is the weather nice?")
    finally:
        worker.kill()
    assert "[tool] {'tool': 'weather', 'status': 'done'}" in printed
    assert "The forecast says light rain, 12 °C. Take a coat if you go out.\n" in printed
    assert "messages: ['route: tool', 'tool: weather', 'answer']" in printed
    tokens = [chunk for node, chunk in chunks if node == "answer"]
    text = "The forecast says light rain, 12 °C. Take a coat if you go out."
    assert "".join(tokens) == text
    assert len(tokens) == len(text.split())  # one StreamingOutput per token, none lost or merged


def _chunks(agent: ModuleType, graph: Any, question: str) -> list[tuple[str, Any]]:
    from langgraph_celery import RunnableConfig, StreamingOutput

    config = RunnableConfig(thread_id=f"chat-{uuid.uuid4().hex[:8]}")
    return [
        (o.node, o.chunk)
        for o in graph.stream({"question": question}, config)
        if isinstance(o, StreamingOutput)
    ]
