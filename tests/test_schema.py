"""The compiled validator gives the same verdicts as the JSON Schema reference."""

from __future__ import annotations

from typing import Any

import jsonschema
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from guardrails.schema import CompiledSchema
from tests._examples import examples

json_scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-(2**53), max_value=2**53),
    st.floats(allow_nan=False, allow_infinity=False, width=64),
    st.text(max_size=8),
)
json_values = st.recursive(
    json_scalars,
    lambda inner: (
        st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=4), inner, max_size=4)
    ),
    max_leaves=12,
)

types = st.sampled_from(["string", "integer", "number", "boolean", "null", "array", "object"])


@st.composite
def leaf_schemas(draw: st.DrawFn) -> dict[str, Any]:
    kind = draw(types)
    schema: dict[str, Any] = {"type": kind}
    if kind == "string":
        if draw(st.booleans()):
            schema["minLength"] = draw(st.integers(0, 4))
        if draw(st.booleans()):
            schema["maxLength"] = draw(st.integers(0, 6))
        if draw(st.booleans()):
            schema["pattern"] = draw(st.sampled_from(["^a", "b$", "^[0-9]+$", "x*"]))
    elif kind in ("integer", "number"):
        if draw(st.booleans()):
            schema["minimum"] = draw(st.integers(-5, 5))
        if draw(st.booleans()):
            schema["exclusiveMaximum"] = draw(st.integers(-5, 10))
        if draw(st.booleans()):
            schema["multipleOf"] = draw(st.sampled_from([1, 2, 0.5]))
    elif kind == "array":
        if draw(st.booleans()):
            schema["items"] = {"type": draw(types)}
        if draw(st.booleans()):
            schema["maxItems"] = draw(st.integers(0, 3))
        if draw(st.booleans()):
            schema["uniqueItems"] = True
    if draw(st.integers(0, 5)) == 0:
        schema = {"enum": draw(st.lists(json_scalars, min_size=1, max_size=3))}
    if draw(st.integers(0, 7)) == 0:
        schema = {"anyOf": [schema, {"type": draw(types)}]}
    return schema


@st.composite
def tool_schemas(draw: st.DrawFn) -> dict[str, Any]:
    names = draw(st.lists(st.sampled_from(list("abcdef")), unique=True, max_size=5))
    props = {n: draw(leaf_schemas()) for n in names}
    schema: dict[str, Any] = {"type": "object", "properties": props}
    if names:
        schema["required"] = draw(st.lists(st.sampled_from(names), unique=True))
    if draw(st.booleans()):
        schema["additionalProperties"] = False
    return schema


@st.composite
def instances_for(draw: st.DrawFn, schema: dict[str, Any]) -> Any:
    if draw(st.integers(0, 9)) == 0:
        return draw(json_values)
    keys = [*list(schema["properties"]), "zz"]
    chosen = draw(st.lists(st.sampled_from(keys), unique=True))
    return {k: draw(json_values) for k in chosen}


@pytest.mark.slow
@settings(max_examples=examples(400))
@given(st.data())
def test_same_verdict_as_jsonschema(data: st.DataObject) -> None:
    schema = data.draw(tool_schemas())
    instance = data.draw(instances_for(schema))
    compiled = CompiledSchema(schema, "t")
    reference = jsonschema.Draft202012Validator(schema).is_valid(instance)
    assert compiled.is_valid(instance) == reference
    # The compiled core's check where the schema is flat, jsonschema_rs otherwise.
    assert compiled.check(instance) == reference


@settings(max_examples=examples(200))
@given(st.data())
def test_offending_names_are_declared_and_cover_every_invalid_property(data: st.DataObject) -> None:
    schema = data.draw(tool_schemas())
    instance = data.draw(instances_for(schema))
    if not isinstance(instance, dict):
        return
    compiled = CompiledSchema(schema, "t")
    names, undeclared = compiled.offending(instance)
    assert set(names) <= set(schema["properties"])
    reference = jsonschema.Draft202012Validator(schema)
    expected = set()
    for error in reference.iter_errors(instance):
        if error.path:
            expected.add(error.path[0])
        elif error.validator == "required":
            expected.update(r for r in schema.get("required", []) if r not in instance)
    assert expected & set(schema["properties"]) == set(names)
    if "zz" in instance and schema.get("additionalProperties") is False:
        assert undeclared


# A schema keyword given a value of the wrong kind: the metaschema must refuse it.
_BREAKERS: list[tuple[str, Any]] = [
    ("type", "nope"),
    ("type", 3),
    ("minLength", -1),
    ("minLength", "1"),
    ("maximum", "ten"),
    ("enum", "not-a-list"),
    ("required", "a"),
    ("required", [1]),
    ("properties", []),
    ("items", 5),
    ("pattern", 7),
    ("multipleOf", 0),
    ("anyOf", []),
    ("additionalProperties", "no"),
    ("uniqueItems", "yes"),
]


@st.composite
def maybe_broken_schemas(draw: st.DrawFn) -> dict[str, Any]:
    schema = draw(tool_schemas())
    if draw(st.booleans()):
        keyword, value = draw(st.sampled_from(_BREAKERS))
        props = schema["properties"]
        if props and draw(st.booleans()):
            props[draw(st.sampled_from(sorted(props)))][keyword] = value
        elif keyword != "type":
            schema[keyword] = value
    return schema


@settings(max_examples=examples(300))
@given(maybe_broken_schemas())
def test_metaschema_check_agrees_with_jsonschema(schema: dict[str, Any]) -> None:
    from guardrails import SchemaError

    try:
        jsonschema.Draft202012Validator.check_schema(schema)
        reference_ok = True
    except jsonschema.SchemaError:
        reference_ok = False
    try:
        CompiledSchema(schema, "t")
        ours_ok = True
    except SchemaError:
        ours_ok = False
    assert ours_ok == reference_ok


@pytest.mark.parametrize(("keyword", "value"), _BREAKERS)
def test_every_breaker_is_refused_at_registration(keyword: str, value: Any) -> None:
    from guardrails import SchemaError

    schema = {"type": "object", "properties": {"a": {"type": "string", keyword: value}}}
    with pytest.raises(SchemaError, match="'t'"):
        CompiledSchema(schema, "t")
