"""JSON text typed by a person (the CLI's ``--input``/``--update``, the console's editors and
form fields) read strictly, as a browser's ``JSON.parse`` reads it: Python's ``json`` also takes
``NaN`` and ``Infinity``, which JSON does not have, and runs out of stack on deep nesting."""

from __future__ import annotations

import json
import math
import sys
from typing import Any, Literal

__all__ = [
    "MAX_JSON_DEPTH",
    "JsonTextError",
    "json_problem",
    "read_json",
    "value_problem",
]

#: How deeply typed JSON may nest arrays and objects (an object itself is 1): far more than a
#: state needs, and well below where parsing, serializing or showing it runs out of stack.
MAX_JSON_DEPTH = 100


class JsonTextError(ValueError):
    """Text that is not JSON: ``kind`` says why, ``detail`` the parser's words or the constant."""

    def __init__(self, kind: Literal["syntax", "constant", "deep", "integer"], detail: str) -> None:
        super().__init__(detail)
        self.kind = kind
        self.detail = detail

    @property
    def problem(self) -> str:
        """What is wrong, as the rest of a sentence about the text: "``--input`` ...",
        "the update ..."."""
        if self.kind == "constant":
            return f"holds {self.detail}, which JSON does not have: write it as a string or null"
        if self.kind == "deep":
            return (
                f"nests arrays and objects {self.detail} deep; flatten it "
                "(or set the state in a node)"
            )
        if self.kind == "integer":
            return f"holds {self.detail}; write it as a string"
        return f"is not valid JSON ({self.detail})"


def value_problem(value: Any) -> JsonTextError | None:
    """Why ``value``, read from JSON text by a lenient parser (a web framework's ``json.loads``),
    is not what strict JSON holds: a float ``NaN`` or infinity, or nesting deeper than
    :data:`MAX_JSON_DEPTH`; ``None`` when it is fine.  Without recursion."""
    todo = [(value, 1)]
    while todo:
        item, level = todo.pop()
        if isinstance(item, float) and not math.isfinite(item):
            return JsonTextError("constant", "NaN" if item != item else "Infinity")
        if isinstance(item, dict):
            item = list(item.values())
        if isinstance(item, list):
            if level > MAX_JSON_DEPTH:
                return JsonTextError("deep", f"more than {MAX_JSON_DEPTH} levels")
            todo.extend((child, level + 1) for child in item)
    return None


def _no_constant(constant: str) -> Any:
    raise JsonTextError("constant", constant)


def read_json(text: str) -> Any:
    """The value of ``text``; :class:`JsonTextError` when it is not JSON or nests more than
    :data:`MAX_JSON_DEPTH` levels."""
    try:
        value = json.loads(text, parse_constant=_no_constant)
    except RecursionError:
        raise JsonTextError("deep", f"more than {MAX_JSON_DEPTH} levels") from None
    except JsonTextError:
        raise
    except json.JSONDecodeError as error:
        raise JsonTextError("syntax", str(error)) from None
    except ValueError:  # Python refuses to read an integer this long
        raise JsonTextError(
            "integer", f"an integer of more than {sys.get_int_max_str_digits()} digits"
        ) from None
    problem = value_problem(value)  # (nesting deeper than allowed: the parser refused NaN)
    if problem is not None:
        raise problem
    return value


def json_problem(what: str, error: JsonTextError) -> str:
    """The sentence for an editor's error: always "... is not valid JSON", which is what a
    browser's ``JSON.parse`` says of every one of these texts."""
    if error.kind == "syntax":
        return f"{what} {error.problem}"
    return f"{what} is not valid JSON: it {error.problem}"
