"""The compiled check of a flat schema agrees with jsonschema and jsonschema_rs.

Schemas are generated inside the subset ``flat_plan`` accepts, instances near
every boundary (bool against int, 1.0 against 1, big ints, lengths one either
side, undeclared and missing keys); each goes through admission first, as in a
call, and the three checks must give the same decision. The share of examples
that fail on each keyword is counted from jsonschema's own errors.
"""

from __future__ import annotations

import math
import tracemalloc
from collections import Counter
from typing import Any

import jsonschema
import jsonschema_rs
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from guardrails import Guardrails, Outcome, Reason, Tool
from guardrails.errors import SchemaError
from guardrails.middleware.admission import canonical_py
from guardrails.native._compiled import CORE, load
from guardrails.native._flat_plan import TYPE_BITS, flat_plan
from guardrails.schema import CompiledSchema
from tests import _flat_strategies as flat
from tests._examples import examples
from tests._refcounts import assert_kept, counts

COMPILED = load()
needs_compiled = pytest.mark.skipif(COMPILED is None, reason="the C extension was not built")

BIG = [2**53, 2**53 + 1, 2**63, 2**64 + 1, 2**70, -(2**63) - 1]
property_schemas = flat.property_schemas(
    flat.numbers(5, [*BIG, 0.5, -0.0, 1e300, float(2**53)]),
    longest=4,
    annotations={"description": st.text(max_size=3), "default": flat.SCALARS},
)


def flat_schemas() -> st.SearchStrategy[dict[str, Any]]:
    return flat.flat_schemas(property_schemas, "abcd", min_size=0, closed=[None, True, False])


def _near(spec: dict[str, Any]) -> list[Any]:
    """Values at and around every boundary the property's keywords draw, and
    values admission refuses (NaN, a lone surrogate)."""
    return flat.near(spec, [math.nan, "\ud800", 2**70, float(2**70)])


@st.composite
def cases(draw: Any) -> tuple[dict[str, Any], dict[str, Any]]:
    schema = draw(flat_schemas())
    instance: dict[str, Any] = {}
    for name, spec in schema["properties"].items():
        if draw(st.integers(0, 5)):
            instance[name] = draw(st.sampled_from(_near(spec)))
    if not draw(st.integers(0, 4)):
        instance["z"] = 1
    return schema, instance


def _failing_keywords(schema: dict[str, Any], instance: Any) -> set[str]:
    return {e.validator for e in jsonschema.Draft202012Validator(schema).iter_errors(instance)}


@pytest.mark.slow
@needs_compiled
def test_the_compiled_check_agrees_with_jsonschema_on_flat_schemas() -> None:
    assert COMPILED is not None
    seen: Counter[str] = Counter()

    @settings(max_examples=examples(1200), deadline=None, suppress_health_check=list(HealthCheck))
    @given(cases())
    def check(case: tuple[dict[str, Any], dict[str, Any]]) -> None:
        schema, instance = case
        plan = flat_plan(CompiledSchema(schema, "t").schema)
        assert plan is not None, schema
        admitted = canonical_py(instance, 10_000)
        if isinstance(admitted, Reason):
            seen["refused by admission"] += 1  # NaN, lone surrogates: never checked
            return
        args = admitted[0]
        reference = jsonschema.Draft202012Validator(schema).is_valid(args)
        assert jsonschema_rs.validator_for(schema).is_valid(args) is reference
        assert COMPILED.flat_valid(plan, args) is reference, (schema, args)
        seen["valid" if reference else "invalid"] += 1
        for keyword in _failing_keywords(schema, args):
            seen[keyword] += 1

    check()
    total = sum(seen[k] for k in ("valid", "invalid"))
    assert seen["valid"] > total * 0.15 and seen["invalid"] > total * 0.15, seen
    keywords = ("type", "enum", "const", "minimum", "maximum", "minLength", "maxLength")
    for keyword in (*keywords, "required", "additionalProperties"):
        assert seen[keyword] > total * 0.02, (keyword, seen)


OUTSIDE = {
    "$schema": {"$schema": "https://json-schema.org/draft/2020-12/schema"},
    "pattern": {"properties": {"a": {"type": "string", "pattern": "^x"}}},
    "format": {"properties": {"a": {"type": "string", "format": "email"}}},
    "nested properties": {"properties": {"a": {"type": "object", "properties": {}}}},
    "items": {"properties": {"a": {"type": "array", "items": {"type": "string"}}}},
    "ref": {"$defs": {"s": {"type": "string"}}, "properties": {"a": {"$ref": "#/$defs/s"}}},
    "exclusiveMinimum": {"properties": {"a": {"exclusiveMinimum": 0}}},
    "multipleOf": {"properties": {"a": {"multipleOf": 2}}},
    "boolean subschema": {"properties": {"a": True}},
    "additionalProperties schema": {"additionalProperties": {"type": "string"}},
    "patternProperties": {"patternProperties": {"^x": {}}},
    "minProperties": {"minProperties": 1},
    "allOf": {"allOf": [{"required": ["a"]}]},
    "enum of containers": {"properties": {"a": {"enum": [[1], {"b": 2}]}}},
    "const container": {"properties": {"a": {"const": [1]}}},
    "float length": {"properties": {"a": {"minLength": 2.0}}},
}


@pytest.mark.parametrize("name", sorted(OUTSIDE))
def test_a_schema_outside_the_flat_subset_has_no_plan_and_jsonschema_rs_checks_it(
    name: str,
) -> None:
    compiled = CompiledSchema({"type": "object", **OUTSIDE[name]}, "t")
    assert compiled.plan is None
    assert compiled.check == compiled.is_valid


def test_the_bench_schema_and_an_empty_one_are_flat() -> None:
    assert flat_plan({"type": "object"}) == (True, (), {})
    plan = flat_plan(
        {
            "type": "object",
            "properties": {"n": {"type": "integer", "minimum": 1, "description": "d"}},
            "required": ["n"],
            "additionalProperties": False,
        }
    )
    assert plan == (False, ("n",), {"n": (TYPE_BITS["integer"], None, None, 1, None, None, None)})


@needs_compiled
def test_a_malformed_plan_is_a_type_error_not_a_crash() -> None:
    assert COMPILED is not None
    for plan in [(), (True, [], {}), (True, (), {"a": (1,)}), None]:
        with pytest.raises(TypeError):
            COMPILED.flat_valid(plan, {"a": 1})
    assert COMPILED.flat_valid((True, (), {}), {1: 2}) is False  # not canonical: refused
    assert COMPILED.flat_valid((True, (), {}), [1]) is False


@pytest.mark.parametrize(
    ("arguments", "outcome", "reason"),
    [
        ({"n": 2, "s": "ab"}, Outcome.OK, None),
        ({"n": 2.0, "s": "ab"}, Outcome.OK, None),
        ({"n": True, "s": "ab"}, Outcome.INVALID_ARGS, Reason.SCHEMA),
        ({"n": 0, "s": "ab"}, Outcome.INVALID_ARGS, Reason.SCHEMA),
        ({"n": 2, "s": "abcd"}, Outcome.INVALID_ARGS, Reason.SCHEMA),
        ({"s": "ab"}, Outcome.INVALID_ARGS, Reason.MISSING_REQUIRED),
        ({"n": 2, "s": "ab", "x": 1}, Outcome.INVALID_ARGS, Reason.UNDECLARED_PARAMETER),
    ],
)
def test_a_flat_tool_is_checked_the_same_through_the_pipeline(
    arguments: dict[str, Any], outcome: Outcome, reason: Reason | None
) -> None:
    schema = {
        "type": "object",
        "properties": {
            "n": {"type": "integer", "minimum": 1},
            "s": {"type": "string", "maxLength": 3},
        },
        "required": ["n"],
        "additionalProperties": False,
    }
    rails = Guardrails([Tool("t", lambda **kw: "ran", schema)])
    assert (rails._pipeline.plans["t"].tool.compiled.plan is not None) is (CORE is not None)
    result = rails.call("t", arguments)
    assert (result.outcome, result.reason) == (outcome, reason)


def test_an_invalid_schema_is_still_refused_at_registration() -> None:
    with pytest.raises(SchemaError):
        CompiledSchema({"type": "object", "properties": {"a": {"minLength": -1}}}, "t")


@needs_compiled
def test_the_check_keeps_no_reference_and_no_memory_over_100000_calls() -> None:
    assert COMPILED is not None
    big, text = 10**30, "".join(["te", "xt"])
    schema = {
        "type": "object",
        "properties": {
            "n": {"type": "integer", "enum": [big, 1], "minimum": 0},
            "s": {"type": "string", "maxLength": 8, "const": text},
        },
        "required": ["n"],
        "additionalProperties": False,
    }
    plan = flat_plan(schema)
    assert plan is not None
    cases = [{"n": big, "s": text}, {"n": 2.5}, {"s": text}, {"n": 1, "x": 1}, {"n": True}]
    probes = [plan, big, text, *cases]
    before = counts(probes)
    tracemalloc.start()
    try:
        start, _ = tracemalloc.get_traced_memory()
        decisions = [COMPILED.flat_valid(plan, case) for _ in range(20_000) for case in cases]
        del decisions
        end, _ = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert_kept(probes, before, 20_000)
    assert end - start < 64_000
