"""Approval forms: fields built from a pydantic model named by the interruption.

Interruption metadata is stored as JSON, so a node names its form's model by a string under
``"schema"``, never by the class itself::

    raise GraphInterrupt("approve the refund?", {"schema": schema_ref(RefundDecision)})

The name is ``"module:QualifiedName"`` (what :func:`schema_ref` returns) or a bare class name.
The console looks it up, never importing anything because stored data says so, in:

1. ``module:QualifiedName``: the module if it is already imported (the console imported the
   modules it serves and everything they import);
2. a bare name: the attributes of the modules the console serves, then the types registered on
   the graph's serializer (``JsonSerializer(types=[...])``).

A module the console serves may also define ``CONSOLE_FORMS = {"graph_id:node": Model}`` (or
``{"node": Model}``): the model of the form for runs parked at that node whose interruption
names none (``interrupt_before`` parks carry no metadata).

Without a model (or when the name resolves to nothing that is a pydantic model) the form is a
JSON editor.  The resume update of a model form is the validated model dumped as JSON
(``model_dump(mode="json")``): its fields are merged into the state.
"""

from __future__ import annotations

import enum
import json
import sys
import types
import typing
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

from pydantic import BaseModel, ValidationError
from pydantic.fields import FieldInfo
from pydantic_core import PydanticUndefined

from langgraph_celery._json_text import JsonTextError, json_problem, read_json
from langgraph_celery.console.diff import jsonable

__all__ = [
    "FORMS_ATTRIBUTE",
    "SCHEMA_KEY",
    "ApprovalForm",
    "FieldKind",
    "FormField",
    "approval_form",
    "forms_of",
    "parse_form",
    "resolve_model",
    "schema_ref",
]

#: The interruption metadata key that names the form's model.
SCHEMA_KEY = "schema"
#: The module attribute that maps parked nodes to form models.
FORMS_ATTRIBUTE = "CONSOLE_FORMS"
#: Form inputs of model fields are named with this prefix (``field.amount``).
FIELD_PREFIX = "field."

FieldKind = Literal["checkbox", "integer", "number", "text", "textarea", "select", "json"]


def schema_ref(model: type[BaseModel]) -> str:
    """How interruption metadata names ``model``: ``"module:QualifiedName"``."""
    return f"{model.__module__}:{model.__qualname__}"


def _is_model(value: object) -> bool:
    return isinstance(value, type) and issubclass(value, BaseModel) and value is not BaseModel


def resolve_model(
    name: str, modules: Iterable[types.ModuleType], registered: Iterable[type] = ()
) -> type[BaseModel] | None:
    """The pydantic model ``name`` names (see the module's docstring), or ``None``."""
    module_name, sep, qualname = name.partition(":")
    if sep:
        value: Any = sys.modules.get(module_name)
        for part in qualname.split("."):
            value = getattr(value, part, None) if value is not None else None
        return value if _is_model(value) else None
    for module in modules:
        value = getattr(module, name, None)
        if _is_model(value):
            return typing.cast(type[BaseModel], value)
    for cls in registered:
        if cls.__name__ == name and _is_model(cls):
            return typing.cast(type[BaseModel], cls)
    return None


@dataclass(frozen=True)
class FormField:
    name: str
    label: str
    kind: FieldKind
    required: bool
    #: the input's text (``"true"``/``""`` for a checkbox)
    value: str
    choices: tuple[str, ...] = ()
    description: str | None = None
    error: str | None = None

    @property
    def input_name(self) -> str:
        return FIELD_PREFIX + self.name


@dataclass(frozen=True)
class ApprovalForm:
    """The form of a parked run: model fields, or (``model`` is ``None``) a JSON editor."""

    model: type[BaseModel] | None = None
    fields: list[FormField] = field(default_factory=list)
    #: why a named schema is not used (not found, not a pydantic model)
    note: str | None = None

    @property
    def schema_name(self) -> str | None:
        return schema_ref(self.model) if self.model is not None else None


def _unwrap(annotation: Any) -> tuple[Any, bool]:
    """``(the type, whether None is allowed)`` for ``X | None`` and ``Optional[X]``."""
    origin = typing.get_origin(annotation)
    if origin in (typing.Union, types.UnionType):
        args = [a for a in typing.get_args(annotation) if a is not type(None)]
        if len(args) == 1:
            return args[0], True
    return annotation, False


def _kind(info: FieldInfo) -> tuple[FieldKind, tuple[str, ...]]:
    annotation, _ = _unwrap(info.annotation)
    if annotation is bool:
        return "checkbox", ()
    if annotation is int:
        return "integer", ()
    if annotation is float:
        return "number", ()
    if typing.get_origin(annotation) is Literal:
        return "select", tuple(str(v) for v in typing.get_args(annotation))
    if isinstance(annotation, type) and issubclass(annotation, enum.Enum):
        return "select", tuple(str(member.value) for member in annotation)
    if annotation is str:
        long = not any(getattr(m, "max_length", None) for m in info.metadata)
        return ("textarea" if long else "text"), ()
    return "json", ()


def _text(kind: FieldKind, value: Any) -> str:
    if value is None:
        return ""
    if kind == "checkbox":
        return "true" if value else ""
    if kind == "json":
        return json.dumps(jsonable(value), indent=2, ensure_ascii=False)
    if isinstance(value, enum.Enum):
        return str(value.value)
    return str(value)


def _fields(
    model: type[BaseModel], values: Mapping[str, Any], errors: Mapping[str, str]
) -> list[FormField]:
    fields: list[FormField] = []
    for name, info in model.model_fields.items():
        kind, choices = _kind(info)
        if name in values:
            value: Any = values[name]
        elif info.default is not PydanticUndefined:
            value = info.default
        elif info.default_factory is not None:
            value = info.get_default(call_default_factory=True, validated_data={})
        else:
            value = None
        fields.append(
            FormField(
                name=name,
                label=info.title or name.replace("_", " "),
                kind=kind,
                required=info.is_required(),
                value=value if isinstance(value, str) and kind != "json" else _text(kind, value),
                choices=choices,
                description=info.description,
                error=errors.get(name),
            )
        )
    return fields


def approval_form(
    metadata: Mapping[str, Any],
    modules: Iterable[types.ModuleType],
    registered: Iterable[type] = (),
    fallback: type[BaseModel] | None = None,
    values: Mapping[str, Any] | None = None,
    errors: Mapping[str, str] | None = None,
) -> ApprovalForm:
    """The form for an interruption with ``metadata``: the model its ``"schema"`` names (else
    ``fallback``, from ``CONSOLE_FORMS``), pre-filled with ``values`` (else the metadata's
    ``resume_with``, else the model's defaults)."""
    name = metadata.get(SCHEMA_KEY)
    model = fallback
    note = None
    if isinstance(name, str) and name:
        model = resolve_model(name, list(modules), registered)
        if model is None:
            note = (
                f"the interruption names form model {name!r}, which is not a pydantic model "
                "the console can find (see docs/console.md): showing the JSON editor"
            )
    elif name is not None:
        note = f"the interruption's {SCHEMA_KEY!r} is not a model name: showing the JSON editor"
    if model is None:
        return ApprovalForm(note=note)
    if values is None:
        suggested = metadata.get("resume_with")
        values = suggested if isinstance(suggested, Mapping) else {}
    return ApprovalForm(model, _fields(model, values, errors or {}), note)


def forms_of(
    modules: Iterable[types.ModuleType], graph_id: str, node: str
) -> type[BaseModel] | None:
    """The model ``CONSOLE_FORMS`` of the served modules gives runs of ``graph_id`` parked at
    ``node``."""
    for module in modules:
        forms = getattr(module, FORMS_ATTRIBUTE, None)
        if not isinstance(forms, Mapping):
            continue
        model = forms.get(f"{graph_id}:{node}", forms.get(node))
        if _is_model(model):
            return typing.cast(type[BaseModel], model)
    return None


def parse_form(
    form: ApprovalForm, submitted: Mapping[str, str]
) -> tuple[dict[str, Any] | None, ApprovalForm]:
    """The resume update from a submitted model form, or ``None`` and the form with the
    submitted values and an error per field."""
    model = form.model
    assert model is not None, "parse_form needs a model form"
    raw: dict[str, Any] = {}
    errors: dict[str, str] = {}
    shown: dict[str, Any] = {}
    for item in form.fields:
        text = submitted.get(item.input_name)
        if item.kind == "checkbox":
            raw[item.name] = text is not None
            shown[item.name] = text is not None
            continue
        shown[item.name] = text or ""
        textual = item.kind in ("text", "textarea")
        if text is None or (text == "" and (item.required or not textual)):
            continue  # left empty: the model's default, or "field required" (a required box too)
        if item.kind == "json":
            try:
                raw[item.name] = read_json(text)
            except JsonTextError as error:
                errors[item.name] = json_problem("the value", error)
            continue
        raw[item.name] = text
    # (validated even when a JSON field did not parse, so every field's error shows at once)
    try:
        update = model.model_validate(raw).model_dump(mode="json")
        if not errors:
            return update, form
    except ValidationError as error:
        for problem in error.errors():
            where = problem["loc"][0] if problem["loc"] else "__root__"
            errors.setdefault(str(where), problem["msg"])
    fields = [
        FormField(
            f.name,
            f.label,
            f.kind,
            f.required,
            _text(f.kind, shown[f.name]) if f.kind == "checkbox" else str(shown[f.name]),
            f.choices,
            f.description,
            errors.get(f.name),
        )
        for f in form.fields
    ]
    general = [message for key, message in errors.items() if key not in shown]
    note = "; ".join(general) if general else form.note
    return None, ApprovalForm(model, fields, note)
