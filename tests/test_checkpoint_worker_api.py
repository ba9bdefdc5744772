"""The saver contract's two halves: BaseCheckpointSaver's default ``put_with_timer``, the
``RunIndex`` placeholders and checks, and the Celery executor's check at compile.  (The run-index
conformance tests run on every saver from ``test_checkpoint_conformance.py``.)"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, datetime
from typing import Any

import pytest

from langgraph_celery.checkpoint import (
    BaseCheckpointSaver,
    Checkpoint,
    CheckpointConflictError,
    MemorySaver,
    RunIndex,
    RunRecord,
    RunStatus,
)
from langgraph_celery.checkpoint.base import Timer
from langgraph_celery.checkpoint.index import missing_for_celery
from langgraph_celery.errors import GraphDefinitionError
from storage_only import StorageOnly

T0 = datetime(2026, 1, 1, 12, 0, tzinfo=UTC)


# -- the default put_with_timer: the calls in turn ------------------------------------------------


def _ckpt(checkpoint_id: str, step: int, run: str = "r1", parent: str | None = "c0") -> Checkpoint:
    return Checkpoint(
        thread_id="t1",
        checkpoint_id=checkpoint_id,
        run_id=run,
        step=step,
        values={"step": step},
        parent_id=parent,
    )


class _InTurn(MemorySaver):
    """A saver that keeps the base class's put_with_timer (the calls made in turn)."""

    put_with_timer = BaseCheckpointSaver.put_with_timer


def test_the_default_put_with_timer_sets_then_stores_and_stores_then_clears() -> None:
    saver = _InTurn()
    timer = Timer("t1", "r1", "g", "stall", T0)
    saver.put_with_timer(_ckpt("c1", 0, parent=None), timer)
    assert saver.due_timers(T0) == [timer]
    with pytest.raises(CheckpointConflictError):  # refused: the timer it set is removed
        saver.put_with_timer(_ckpt("c2", 0), Timer("t1", "r1", "g", "stall", T0))
    assert saver.due_timers(T0) == []
    saver.set_timer("t1", "r1", "g", "stall", T0)
    saver.put_with_timer(_ckpt("c3", 1), None)
    assert saver.due_timers(T0) == []
    assert [c.checkpoint_id for c in saver.list("t1")] == ["c3", "c1"]


# -- the contract's two halves: storing checkpoints, indexing runs --------------------------------


class _StorageOnly(StorageOnly):
    """Stores checkpoints (through a MemorySaver) and indexes no runs."""


class _IndexedButUndeclared(_StorageOnly):
    """Has every method of the run index, written against the previous release (which had no
    RunIndex), without declaring it."""

    def delete_write(self, thread_id: str, checkpoint_id: str, task_id: str, node: str) -> bool:
        return self.inner.delete_write(thread_id, checkpoint_id, task_id, node)

    def set_timer(
        self, thread_id: str, run_id: str, graph_id: str, kind: str, due_at: datetime
    ) -> None:
        self.inner.set_timer(thread_id, run_id, graph_id, kind, due_at)

    def clear_timer(self, thread_id: str, run_id: str, due_at: datetime | None = None) -> None:
        self.inner.clear_timer(thread_id, run_id, due_at)

    def due_timers(self, now: datetime, limit: int = 100) -> Sequence[Timer]:
        return self.inner.due_timers(now, limit)

    def thread_of_run(self, run_id: str) -> str | None:
        return self.inner.thread_of_run(run_id)

    def upsert_run(self, record: RunRecord) -> bool:
        return self.inner.upsert_run(record)

    def get_run(self, run_id: str) -> RunRecord | None:
        return self.inner.get_run(run_id)

    def list_runs(self, *args: Any, **kwargs: Any) -> Sequence[RunRecord]:
        return self.inner.list_runs(*args, **kwargs)


class _Indexed(_IndexedButUndeclared, RunIndex):
    pass


def _compile_on_celery(saver: BaseCheckpointSaver) -> Any:
    from celery import Celery

    from langgraph_celery import END, START, CompileConfig, StateGraph
    from langgraph_celery.celery import CeleryExecutor

    executor = CeleryExecutor(Celery("contract", broker="memory://"))  # (in process: no broker)
    graph = StateGraph().add_node("a", lambda state: {"x": 1})
    graph.add_edge(START, "a").add_edge("a", END)
    return graph.compile(CompileConfig(checkpoint_saver=saver, graph_id="g", executor=executor))


def test_a_saver_that_indexes_no_runs_is_refused_at_compile_for_celery() -> None:
    with pytest.raises(GraphDefinitionError) as caught:
        _compile_on_celery(_StorageOnly())
    message = str(caught.value)
    assert "'g'" in message and "_StorageOnly lacks RunIndex, delete_write, set_timer" in message
    assert "clear_timer, due_timers, thread_of_run" in message
    assert "put_with_timer" not in message  # (it has a default, made of the others)
    with pytest.raises(GraphDefinitionError, match=r"_IndexedButUndeclared lacks RunIndex:"):
        _compile_on_celery(_IndexedButUndeclared())
    assert _compile_on_celery(_Indexed()).graph_id == "g"
    assert _compile_on_celery(MemorySaver()).graph_id == "g"


def test_the_in_process_executor_needs_no_run_index() -> None:
    from langgraph_celery import END, START, CompileConfig, RunnableConfig, StateGraph

    saver = _StorageOnly()
    graph = StateGraph().add_node("a", lambda state: {"x": 1})
    graph.add_edge(START, "a").add_edge("a", END)
    compiled = graph.compile(CompileConfig(checkpoint_saver=saver))
    assert compiled.invoke({}, RunnableConfig(thread_id="t1")).data == {"x": 1}
    assert len(saver.list("t1")) == 2


def test_the_run_index_placeholders_say_what_to_implement() -> None:
    saver = _StorageOnly()
    with pytest.raises(NotImplementedError, match=r"_StorageOnly does not index runs .*RunIndex"):
        saver.set_timer("t1", "r1", "g", "stall", T0)
    with pytest.raises(NotImplementedError, match="no thread_of_run"):
        saver.thread_of_run("r1")
    assert missing_for_celery(saver)[0] == "RunIndex"
    for indexed in (MemorySaver(), _Indexed()):
        assert isinstance(indexed, RunIndex) and missing_for_celery(indexed) == ()


def test_a_run_index_left_with_placeholders_is_refused_when_defined() -> None:
    with pytest.raises(TypeError, match="leaves set_timer, due_timers as"):

        class _Half(_StorageOnly, RunIndex):
            def delete_write(self, *args: Any) -> bool:
                return False

            def clear_timer(self, *args: Any) -> None:
                pass

            def thread_of_run(self, run_id: str) -> str | None:
                return None

    class _HalfTheOtherWay(RunIndex, _StorageOnly):  # (the ABC's abstract methods come first)
        def delete_write(self, *args: Any) -> bool:
            return False

    with pytest.raises(TypeError, match="abstract"):
        _HalfTheOtherWay()  # type: ignore[abstract]


def test_a_run_record_takes_a_status_word_and_refuses_others() -> None:
    assert RunRecord("r1", "t1", "g", "parked").status is RunStatus.PARKED  # type: ignore[arg-type]
    with pytest.raises(ValueError) as caught:
        RunRecord("r1", "t1", "g", "paused")  # type: ignore[arg-type]
    message = str(caught.value)
    assert "'paused'" in message and "running, parked, failed, completed, cancelled" in message
