"""What every route of the console shares: the graphs, the settings, the actions."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, TypeVar

from starlette.concurrency import run_in_threadpool

from langgraph_celery._json_text import JsonTextError, json_problem, read_json
from langgraph_celery.console.catalog import Catalog
from langgraph_celery.console.forms import ApprovalForm, approval_form, forms_of
from langgraph_celery.console.runs import RunView
from langgraph_celery.console.settings import ConsoleSettings
from langgraph_celery.console.steering import Steering, SteeringError

__all__ = ["Console", "UpdateError", "parse_update"]

T = TypeVar("T")


class UpdateError(ValueError):
    """A resume update that is not a JSON object; the message says what is wrong."""


def parse_update(text: str | None, *, required: bool = False) -> dict[str, Any] | None:
    """The JSON object typed in an editor (``None`` for an empty editor unless ``required``)."""
    if text is None or not text.strip():
        if required:
            raise UpdateError("the update is empty: type a JSON object, e.g. {}")
        return None
    try:
        value = read_json(text)
    except JsonTextError as error:
        raise UpdateError(json_problem("the update", error)) from None
    if not isinstance(value, dict):
        raise UpdateError(
            f"the update must be a JSON object ({{...}}) of state keys, not a "
            f"{type(value).__name__}"
        )
    return value


@dataclass
class Console:
    catalog: Catalog
    settings: ConsoleSettings
    steering: Steering

    async def call(self, function: Callable[..., T], *args: Any) -> T:
        """``function(*args)`` off the event loop (the store and the broker block)."""
        return await run_in_threadpool(function, *args)

    def form_for(
        self,
        run: RunView,
        values: Mapping[str, Any] | None = None,
        errors: Mapping[str, str] | None = None,
    ) -> ApprovalForm:
        """The approval form of a parked run."""
        if run.parking is None:
            return ApprovalForm()
        modules = self.catalog.modules
        serializer = getattr(run.entry.saver, "serializer", None)
        registered = getattr(serializer, "types", ())
        fallback = forms_of(modules, run.entry.key, run.parking.node_id)
        return approval_form(run.metadata, modules, registered, fallback, values, errors)

    def checked_update(self, run: RunView, update: Mapping[str, Any] | None) -> dict[str, Any]:
        """``update`` validated by the run's form model, if it has one (``SteeringError``)."""
        form = self.form_for(run)
        if form.model is None or update is None:
            return dict(update or {})
        from pydantic import ValidationError

        try:
            return form.model.model_validate(dict(update)).model_dump(mode="json")
        except ValidationError as error:
            problems = "; ".join(
                f"{'.'.join(str(p) for p in e['loc'])}: {e['msg']}" for e in error.errors()
            )
            raise SteeringError(
                f"the update does not fit form {form.schema_name}: {problems}"
            ) from None
