"""Honest async: ``ainvoke``, ``astream`` and ``aupdate_state`` never block the caller's event
loop with a call to the checkpoint store.  Checked with asyncio's debug mode, which logs every
callback that holds the loop longer than ``slow_callback_duration`` (100 ms here), against a
store whose every call takes 150 ms."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest

from langgraph_celery import (
    END,
    START,
    CompileConfig,
    GraphInput,
    RunnableConfig,
    StateGraph,
)
from langgraph_celery.checkpoint import BaseCheckpointSaver, SqlSaver
from loop_check import blocked_callbacks, slow_down


def approval_graph(saver: BaseCheckpointSaver) -> Any:
    async def draft(state: Any) -> dict[str, Any]:
        await asyncio.sleep(0)
        return {"log": [*state.value("log", []), "draft"]}

    def send(state: Any) -> dict[str, Any]:
        return {"log": [*state.value("log", []), "send"]}

    return (
        StateGraph()
        .add_node("draft", draft)
        .add_node("send", send)
        .add_edge(START, "draft")
        .add_edge("draft", "send")
        .add_edge("send", END)
        .compile(CompileConfig(checkpoint_saver=saver, interrupt_before=["send"]))
    )


def test_the_check_sees_a_blocking_store_call(
    caplog: pytest.LogCaptureFixture, tmp_path: Path
) -> None:
    saver = SqlSaver(f"sqlite:///{tmp_path / 'c.db'}")
    slow_down(saver)

    async def blocking() -> None:
        saver.get("t")  # on the loop: what the library must never do

    try:
        assert blocked_callbacks(caplog, blocking), "debug mode did not report a blocked loop"
    finally:
        saver.dispose()


def test_ainvoke_astream_and_aupdate_state_keep_the_loop_free(
    caplog: pytest.LogCaptureFixture, tmp_path: Path
) -> None:
    saver = SqlSaver(f"sqlite:///{tmp_path / 'c.db'}")
    saver.setup()
    slow_down(saver)
    graph = approval_graph(saver)
    config = RunnableConfig(thread_id="t")
    seen: dict[str, Any] = {}

    async def main() -> None:
        parked = await graph.ainvoke({"log": []}, config)
        seen["parked"] = parked.data["log"]
        updated = await graph.aupdate_state(config, {"note": "ok"})
        seen["updated"] = updated.checkpoint_id
        seen["outputs"] = [o.node_id async for o in graph.astream(GraphInput.resume(), config)]
        final = await graph.ainvoke({"log": ["again"]}, config)
        seen["final"] = final.data

    try:
        assert blocked_callbacks(caplog, main) == []
    finally:
        saver.dispose()
    assert seen["parked"] == ["draft"]
    assert seen["updated"]
    assert seen["outputs"] == ["send", "__END__"]
    assert seen["final"]["log"] == ["again", "draft"]
    assert seen["final"]["note"] == "ok"


def test_a_plain_node_alone_in_its_step_runs_off_the_callers_loop(
    caplog: pytest.LogCaptureFixture,
) -> None:
    import time

    def plain(state: Any) -> dict[str, Any]:
        time.sleep(0.15)  # blocking work in a plain node
        return {"done": True}

    graph = StateGraph().add_node("plain", plain).add_edge(START, "plain").add_edge("plain", END)
    compiled = graph.compile()
    seen: dict[str, Any] = {}

    async def main() -> None:
        seen["state"] = (await compiled.ainvoke({})).data

    assert blocked_callbacks(caplog, main) == []
    assert seen["state"] == {"done": True}
