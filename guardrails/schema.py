"""JSON Schema handling: checking and compiling tool schemas, and reading errors.

Validation uses ``jsonschema_rs`` (compiled, about 0.3 µs for a valid call of
a small tool, against about 48 µs for the pure-Python ``jsonschema``); a flat
schema (see ``_flat_plan``) is checked by the compiled core instead, when it
is built, with the same decisions (``check``), and names the offending
parameters of invalid arguments there too (``offending``). Schemas
are first checked against their metaschema with ``jsonschema``, so an invalid
schema is reported the same way whichever validator runs the calls. The test
suite checks that both give the same verdicts on generated schemas and instances.
"""

from __future__ import annotations

import copy
from collections.abc import Callable, Mapping
from functools import partial
from typing import Any

import jsonschema
import jsonschema_rs

from .errors import SchemaError
from .native._compiled import CORE
from .native._flat_plan import FlatPlan, flat_plan

__all__ = ["CompiledSchema", "compile_schema", "without_params"]


class CompiledSchema:
    """A tool's input schema, checked and compiled once."""

    __slots__ = (
        "_closed",
        "_flat",
        "_parts",
        "_validator",
        "check",
        "plan",
        "properties",
        "required",
        "required_set",
        "schema",
    )

    def __init__(self, schema: Mapping[str, Any], owner: str) -> None:
        if not isinstance(schema, Mapping):
            raise SchemaError(f"tool {owner!r}: the input schema must be an object")
        schema = dict(schema)
        if schema.get("type", "object") != "object":
            raise SchemaError(f"tool {owner!r}: the input schema must have type 'object'")
        schema.setdefault("type", "object")
        try:
            if not _meta_valid(schema):
                # The reference implementation words the error (and has the last say).
                cls = jsonschema.validators.validator_for(
                    schema, default=jsonschema.Draft202012Validator
                )
                cls.check_schema(schema)
            validator = jsonschema_rs.validator_for(schema)
        except (jsonschema.SchemaError, jsonschema_rs.ValidationError, ValueError) as exc:
            raise SchemaError(f"tool {owner!r}: invalid input schema: {exc}") from exc
        properties = schema.get("properties", {})
        required = schema.get("required", [])
        if not isinstance(properties, Mapping) or not isinstance(required, list):
            raise SchemaError(f"tool {owner!r}: 'properties' and 'required' are malformed")
        self.schema: dict[str, Any] = schema
        self.properties: frozenset[str] = frozenset(properties)
        # Read from the schema itself: there is no second list of required names.
        self.required: tuple[str, ...] = tuple(required)
        # The same names as a set: ``args.keys() >= required_set`` asks in one C call.
        self.required_set: frozenset[str] = frozenset(self.required)
        self._validator = validator
        # Undeclared keys are an error of their own when the schema is closed.
        self._closed = (
            schema.get("additionalProperties") is False
            or schema.get("unevaluatedProperties") is False
        ) and not schema.get("patternProperties")
        # One validator per declared property, compiled on first need (see offending()).
        self._parts: dict[str, Any] = {}
        # The compiled core checks a flat schema in C; anything else goes to jsonschema_rs.
        core = CORE
        self.plan: FlatPlan | None = None if core is None else flat_plan(schema)
        self.check: Callable[[Any], bool] = self.is_valid
        self._flat: Callable[[Any], tuple[tuple[str, ...], bool] | None] | None = None
        if core is not None and self.plan is not None:
            self.check = partial(core.flat_valid, self.plan)
            self._flat = partial(core.flat_offending, self.plan)

    @property
    def closed(self) -> bool:
        """True when the schema refuses keys it does not declare in ``properties``."""
        return self._closed

    def is_valid(self, instance: Any) -> bool:
        """The decision of ``jsonschema_rs``; ``check`` gives the same one, faster."""
        try:
            return bool(self._validator.is_valid(instance))
        except ValueError:  # nesting past the validator's recursion limit
            return False

    def offending(self, instance: Any) -> tuple[tuple[str, ...], bool]:
        """Every offending parameter at once, as (sorted names, any undeclared?).

        ``offending_py``'s answer, read from the flat plan in C where there is
        one and the instance is a canonical copy (one call, no validator).
        """
        flat = self._flat
        if flat is not None:
            found = flat(instance)
            if found is not None:
                return found
        return self.offending_py(instance)

    def offending_py(self, instance: Any) -> tuple[tuple[str, ...], bool]:
        """Every offending parameter at once, as (sorted names, any undeclared?).

        Only names from the schema are returned (declared in ``properties``,
        or required and missing): a key the model invented is reported as a
        flag, never echoed. Each declared property is
        checked on its own (``is_valid``, which stops at the first error),
        because building every error of a large invalid value can take seconds;
        the full error list is read only when no single property explains why
        the arguments are invalid (a constraint at the root, say).
        """
        if not isinstance(instance, dict):
            return (), False
        names = {name for name in self.required if name not in instance}
        unexpected = False
        for key, value in instance.items():
            if key not in self.properties:
                unexpected = unexpected or self._closed
                continue
            part = self._part(key)
            if part is not None and not part.is_valid(value):
                names.add(key)
        if names or unexpected:
            return tuple(sorted(names)), unexpected
        # No single property explains it (or one could not be checked alone).
        return self._every_error(instance)

    def _part(self, name: str) -> Any:
        try:
            return self._parts[name]
        except KeyError:
            pass
        sub = self.schema["properties"][name]
        part: Any = None
        if isinstance(sub, dict):
            # $refs inside the property point at the root's definitions: carry them over.
            wrapped = dict(sub)
            for key in ("$schema", "$defs", "definitions"):
                if key in self.schema and key not in wrapped:
                    wrapped[key] = self.schema[key]
            try:
                part = jsonschema_rs.validator_for(wrapped)
            except (jsonschema_rs.ValidationError, ValueError):
                part = None
        self._parts[name] = part
        return part

    def _every_error(self, instance: Any) -> tuple[tuple[str, ...], bool]:
        names: set[str] = set()
        unexpected = False
        try:
            errors = list(self._validator.iter_errors(instance))
        except ValueError:  # nesting past the validator's recursion limit
            return (), False
        for error in errors:
            path = error.instance_path
            if path:
                head = path[0]
                if isinstance(head, str) and head in self.properties:
                    names.add(head)
                else:
                    unexpected = True
                continue
            kind = error.kind
            prop = getattr(kind, "property", None)
            if isinstance(prop, str) and prop in self.properties:
                names.add(prop)
            elif isinstance(
                kind,
                (
                    jsonschema_rs.ValidationErrorKind.AdditionalProperties,
                    jsonschema_rs.ValidationErrorKind.UnevaluatedProperties,
                ),
            ):
                unexpected = True
        return tuple(sorted(names)), unexpected


def _meta_valid(schema: dict[str, Any]) -> bool:
    """The metaschema check, compiled: about 2 µs against about 600 µs for
    ``jsonschema``'s ``check_schema`` (tested against it on generated schemas)."""
    try:
        return bool(jsonschema_rs.meta.is_valid(schema))
    except Exception:
        return False


def compile_schema(schema: Mapping[str, Any], owner: str) -> CompiledSchema:
    return CompiledSchema(schema, owner)


def without_params(schema: Mapping[str, Any], params: frozenset[str]) -> dict[str, Any]:
    """A copy of ``schema`` with ``params`` removed from properties and required."""
    out = copy.deepcopy(dict(schema))
    if not params:
        return out
    props = out.get("properties")
    if isinstance(props, dict):
        for name in params:
            props.pop(name, None)
    req = out.get("required")
    if isinstance(req, list):
        out["required"] = [r for r in req if r not in params]
        if not out["required"]:
            del out["required"]
    return out
