"""The plan of a flat schema: what the compiled core checks instead of ``jsonschema_rs``.

Most tool schemas are flat: an object of declared properties, each with a
type, an enum or const, numeric bounds or length bounds. ``flat_plan``
compiles such a schema, once, into plain tuples that ``_ccore.flat_valid``
and ``_ccore.flat_offending`` read (the layout is described in
``_csrc/flat_schema.c``). Any keyword
outside that subset, a ``$schema``, a boolean or nested subschema, a bound
that is not a plain number: ``None``, and ``jsonschema_rs`` checks the calls.
The two are compared on generated schemas and instances
(``tests/test_flat_schema.py``, ``tests/test_flat_offending.py``).
"""

from __future__ import annotations

import math
from typing import Any

__all__ = ["FlatPlan", "flat_plan"]

FlatPlan = tuple[bool, tuple[str, ...], dict[str, tuple[Any, ...]]]

TYPE_BITS = {
    "string": 1,
    "number": 2,
    "integer": 4,
    "boolean": 8,
    "null": 16,
    "array": 32,
    "object": 64,
}
# Keywords with no effect on validity (annotations).
_ANNOTATIONS = frozenset(
    {
        "title",
        "description",
        "default",
        "examples",
        "$comment",
        "deprecated",
        "readOnly",
        "writeOnly",
    }
)
_ROOT = frozenset({"type", "properties", "required", "additionalProperties"}) | _ANNOTATIONS
_PROPERTY = (
    frozenset({"type", "enum", "const", "minimum", "maximum", "minLength", "maxLength"})
    | _ANNOTATIONS
)
# A length bound past any string's length means the same as itself.
_LENGTH_CAP = 2**62


def flat_plan(schema: dict[str, Any]) -> FlatPlan | None:
    """``(open, required, properties)``, or None when the schema is not flat."""
    if type(schema) is not dict or not _ROOT.issuperset(schema):
        return None
    closed = schema.get("additionalProperties", True)
    required = schema.get("required", [])
    properties = schema.get("properties", {})
    if (
        schema.get("type") != "object"
        or type(closed) is not bool
        or type(required) is not list
        or any(type(name) is not str for name in required)
        or type(properties) is not dict
    ):
        return None
    specs: dict[str, tuple[Any, ...]] = {}
    for name, sub in properties.items():
        spec = _property(sub)
        if spec is None or type(name) is not str:
            return None
        specs[name] = spec
    return closed, tuple(required), specs


def _property(sub: Any) -> tuple[Any, ...] | None:
    """``(types, enum, const, minimum, maximum, minLength, maxLength)`` or None."""
    if type(sub) is not dict or not _PROPERTY.issuperset(sub):
        return None
    types = _types(sub["type"]) if "type" in sub else 0
    choices = sub.get("enum")
    if choices is not None:
        if type(choices) is not list or not all(_scalar(c) for c in choices):
            return None
        choices = tuple(choices)
    const = (sub["const"],) if "const" in sub else None
    if const is not None and not _scalar(const[0]):
        return None
    bounds = [sub.get(key) for key in ("minimum", "maximum")]
    lengths = [sub.get(key) for key in ("minLength", "maxLength")]
    if types is None or not all(b is None or _number(b) for b in bounds):
        return None
    if not all(n is None or (type(n) is int and n >= 0) for n in lengths):
        return None
    lengths = [n if n is None else min(n, _LENGTH_CAP) for n in lengths]
    return (types, choices, const, *bounds, *lengths)


def _types(named: Any) -> int | None:
    names = [named] if type(named) is str else named
    if type(names) is not list or not names:
        return None
    bits = 0
    for name in names:
        if type(name) is not str or name not in TYPE_BITS:
            return None
        bits |= TYPE_BITS[name]
    return bits


def _number(value: Any) -> bool:
    return type(value) is int or (type(value) is float and math.isfinite(value))


def _scalar(value: Any) -> bool:
    return value is None or type(value) in (str, bool) or _number(value)
