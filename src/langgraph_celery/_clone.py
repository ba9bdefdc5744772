"""Deep copies of state values, fast for the JSON-like values state is usually made of."""

from __future__ import annotations

import copy
from typing import Any

__all__ = ["clone_value"]

_ATOMIC = frozenset({str, int, float, bool, type(None), bytes, complex})


def clone_value(value: Any) -> Any:
    """A deep copy, fast for the JSON-like values state is usually made of."""
    kind = type(value)
    if kind in _ATOMIC:
        return value
    if kind is dict:
        return {key: clone_value(item) for key, item in value.items()}
    if kind is list:
        return [clone_value(item) for item in value]
    if kind is tuple:
        return tuple(clone_value(item) for item in value)
    if kind is set:
        return {clone_value(item) for item in value}
    return copy.deepcopy(value)
