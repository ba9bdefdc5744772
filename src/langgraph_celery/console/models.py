"""The console's JSON API, as pydantic models (the OpenAPI document at ``/api/openapi.json`` is
generated from them), and their conversion from what :mod:`.runs` reads."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from pydantic import BaseModel, Field, field_validator

from langgraph_celery._json_text import json_problem, value_problem
from langgraph_celery.checkpoint.index import RunStatus
from langgraph_celery.console.catalog import GraphEntry
from langgraph_celery.console.diff import jsonable
from langgraph_celery.console.forms import ApprovalForm
from langgraph_celery.console.redact import redact
from langgraph_celery.console.runs import RunView
from langgraph_celery.console.steering import reject_update
from langgraph_celery.console.threads import CheckpointRow, ThreadView

__all__ = [
    "ActionOut",
    "ChangeOut",
    "CheckpointOut",
    "FailureOut",
    "ForkIn",
    "FormFieldOut",
    "GraphOut",
    "InterruptionOut",
    "ResumeIn",
    "RunOut",
    "RunPageOut",
    "SessionOut",
    "TaskOut",
    "ThreadOut",
    "flower_link",
]


def flower_link(flower_url: str | None, celery_id: str | None) -> str | None:
    if flower_url is None or celery_id is None:
        return None
    from urllib.parse import quote

    return f"{flower_url}/task/{quote(celery_id, safe='')}"


class GraphOut(BaseModel):
    graph_id: str = Field(description="the graph's graph_id ('' when compiled without one)")
    name: str = Field(description="MODULE:ATTRIBUTE the console found it as")
    nodes: list[str]
    executor: str = Field(description="'celery' or 'in-process'")
    run_index: bool = Field(description="whether its saver keeps a run index (runs are listed)")
    shared: bool = Field(description="whether its saver is shared across processes")
    mermaid: str = Field(description="get_graph('mermaid').content")

    @classmethod
    def of(cls, entry: GraphEntry) -> GraphOut:
        return cls(
            graph_id=entry.key,
            name=entry.name,
            nodes=list(entry.graph.spec.nodes),
            executor="celery" if entry.on_celery else "in-process",
            run_index=entry.index is not None,
            shared=entry.shared,
            mermaid=entry.graph.get_graph("mermaid").content,
        )


class FormFieldOut(BaseModel):
    name: str
    label: str
    kind: str
    required: bool
    value: str
    choices: list[str] = []
    description: str | None = None


class InterruptionOut(BaseModel):
    node: str
    reason: str | None
    metadata: dict[str, Any]
    deadline: datetime | None = Field(description="when the parked run expires, if it does")
    form_model: str | None = Field(
        None, description="the pydantic model of the approval form (module:QualifiedName)"
    )
    reject_with: dict[str, Any] | None = Field(
        None, description="the update Reject resumes with (None: Reject is not offered)"
    )
    form_fields: list[FormFieldOut] | None = Field(
        None, description="the fields of the form model, pre-filled (None: a JSON editor)"
    )


class FailureOut(BaseModel):
    node: str
    error_type: str
    message: str


class RunOut(BaseModel):
    run_id: str
    thread_id: str
    graph_id: str
    status: RunStatus
    node: str | None = Field(description="running, or pending (parked, failed) node")
    created_at: datetime
    updated_at: datetime
    resumable: bool = Field(description="its checkpoint is the thread's latest")
    interruption: InterruptionOut | None = None
    failure: FailureOut | None = None

    @classmethod
    def of(cls, run: RunView, form: ApprovalForm | None = None) -> RunOut:
        record = run.record
        interruption = None
        if run.parking is not None:
            interruption = InterruptionOut(
                node=run.parking.node_id,
                reason=run.parking.reason,
                metadata=jsonable(dict(run.parking.metadata)),
                deadline=run.deadline,
                form_model=form.schema_name if form is not None else None,
                reject_with=reject_update(run.parking.metadata),
                form_fields=None,
            )
        failure = None
        if run.failure is not None:
            failure = FailureOut(
                node=run.failure.node_id,
                error_type=run.failure.error_type,
                message=redact(run.failure.message),
            )
        return cls(
            run_id=record.run_id,
            thread_id=record.thread_id,
            graph_id=record.graph_id,
            status=record.status,
            node=record.node,
            created_at=record.created_at,
            updated_at=record.updated_at,
            resumable=run.on_top,
            interruption=interruption,
            failure=failure,
        )


class RunPageOut(BaseModel):
    runs: list[RunOut]
    next_before: str | None = Field(description="pass as ?before= for the next page")


class ChangeOut(BaseModel):
    key: str
    kind: str = Field(
        description="added, removed, changed, or appended (after: the new items; before: none, "
        "not the whole list again)"
    )
    before: Any = None
    after: Any = None


class TaskOut(BaseModel):
    task_id: str
    node: str
    celery_task_id: str | None = None
    flower_url: str | None = None


class CheckpointOut(BaseModel):
    checkpoint_id: str
    parent_id: str | None
    run_id: str
    step: int
    node: str | None
    kind: str
    next: list[str]
    created_at: datetime
    updates: list[tuple[str, Any]] = Field(description="(node or source, update) pairs")
    changes: list[ChangeOut]
    tasks: list[TaskOut]

    @classmethod
    def of(cls, row: CheckpointRow, flower_url: str | None) -> CheckpointOut:
        checkpoint = row.checkpoint
        return cls(
            checkpoint_id=checkpoint.checkpoint_id,
            parent_id=checkpoint.parent_id,
            run_id=checkpoint.run_id,
            step=checkpoint.step,
            node=checkpoint.node,
            kind=checkpoint.kind.value,
            next=list(checkpoint.next),
            created_at=checkpoint.created_at,
            updates=[(node, jsonable(update)) for node, update in row.updates],
            changes=[
                ChangeOut(key=c.key, kind=c.kind, before=c.before, after=c.after)
                for c in row.changes
            ],
            tasks=[
                TaskOut(
                    task_id=t.task_id,
                    node=t.node,
                    celery_task_id=t.celery_id,
                    flower_url=flower_link(flower_url, t.celery_id),
                )
                for t in row.tasks
            ],
        )


class ThreadOut(BaseModel):
    thread_id: str
    graph_id: str
    state: dict[str, Any] = Field(description="the latest checkpoint's state")
    highlight: str | None = Field(description="the current run's parked, failed or running node")
    runs: list[RunOut] = Field(description="the runs of these checkpoints and the current run")
    checkpoints: list[CheckpointOut] = Field(description="a page of them, newest first")
    next_before: str | None = Field(
        None, description="pass as ?before= for the page of older checkpoints"
    )

    @classmethod
    def of(cls, thread: ThreadView, flower_url: str | None) -> ThreadOut:
        latest = thread.latest.values if thread.latest is not None else {}
        return cls(
            thread_id=thread.thread_id,
            graph_id=thread.entry.key,
            state=jsonable(dict(latest)),
            highlight=thread.highlight,
            runs=[RunOut.of(run) for run in thread.runs],
            checkpoints=[CheckpointOut.of(row, flower_url) for row in thread.checkpoints],
            next_before=thread.next_before,
        )


class ResumeIn(BaseModel):
    """The body of approve, reject and retry."""

    update: dict[str, Any] | None = Field(
        None,
        description="merged into the state before the run goes on; for reject, None means the "
        "interruption's reject_with",
    )

    @field_validator("update")
    @classmethod
    def _strict_json(cls, update: dict[str, Any] | None) -> dict[str, Any] | None:
        problem = value_problem(update)
        if problem is not None:  # (the body was read by Python's lenient json.loads)
            raise ValueError(json_problem("the update", problem))
        return update


class ForkIn(BaseModel):
    thread_id: str
    checkpoint_id: str
    graph_id: str | None = None


class ActionOut(BaseModel):
    action: str
    thread_id: str
    run_id: str | None
    message: str


class SessionOut(BaseModel):
    csrf_token: str = Field(description="send as X-CSRF-Token with the session cookie")
