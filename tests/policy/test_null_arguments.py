"""An explicit null on an optional parameter whose schema admits null is as if absent.

OpenAI's strict mode sends every optional parameter, ``null`` when it has no
value; a rule on such a parameter must not refuse the call for it. Where the
schema does not admit null, or the parameter is required, null is refused as
before (by the schema, or by the rule as ``wrong_type``).
"""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from guardrails import Guardrails, Outcome, Tool, tool
from guardrails.policy import Param, Policy
from tests._examples import examples

NULLABLE_SPELLINGS = {
    "type list": {"type": ["string", "null"]},
    "anyOf": {"anyOf": [{"type": "string"}, {"type": "null"}]},
    "oneOf": {"oneOf": [{"type": "null"}, {"type": "string", "maxLength": 40}]},
    "enum": {"type": ["string", "null"], "enum": ["a@x.example", None]},
    "ref": {"$ref": "#/$defs/maybe"},
}
RULES: dict[str, dict[str, Any]] = {
    "pattern": {"pattern": "[a-z@.]+"},
    "kind": {"kind": "email", "domains": ["x.example"]},
    "values": {"values": ["a@x.example"]},
    "grounded": {"kind": "email", "grounded_in": ["user"]},
    "untrusted": {"not_only_untrusted": True, "pattern": "[a-z@.]+"},
}


def _tool(memo: dict[str, Any], required: list[str]) -> Tool:
    schema = {
        "type": "object",
        "properties": {"to": {"type": "string"}, "memo": memo},
        "required": required,
        "additionalProperties": False,
        "$defs": {"maybe": {"type": ["string", "null"]}},
    }
    return Tool("send", lambda to, memo=None: "sent", schema)


def _rails(memo: dict[str, Any], required: list[str], rule: dict[str, Any]) -> Guardrails:
    return Guardrails(
        [_tool(memo, required)], policy=Policy(params=(Param("send", "memo", **rule),))
    )


@pytest.mark.parametrize("rule", sorted(RULES))
@pytest.mark.parametrize("spelling", sorted(NULLABLE_SPELLINGS))
def test_null_on_an_optional_nullable_parameter_is_not_checked(spelling: str, rule: str) -> None:
    rails = _rails(NULLABLE_SPELLINGS[spelling], ["to"], RULES[rule])
    turn = rails.turn(session="s")
    turn.pre_turn("write to a@x.example")
    assert turn.call("send", {"to": "a", "memo": None}).outcome is Outcome.OK
    assert turn.call("send", {"to": "a"}).outcome is Outcome.OK  # absent, as before
    # A value is still checked: the rule has not been switched off.
    refused = turn.call("send", {"to": "a", "memo": "NOT AN ADDRESS"})
    assert refused.outcome is Outcome.INVALID_ARGS and refused.params == ("memo",)


@pytest.mark.parametrize("rule", sorted(RULES))
def test_null_on_a_required_nullable_parameter_is_still_refused_by_the_rule(rule: str) -> None:
    rails = _rails({"type": ["string", "null"]}, ["to", "memo"], RULES[rule])
    result = rails.turn(session="s").call("send", {"to": "a", "memo": None})
    assert result.outcome is Outcome.INVALID_ARGS and result.params == ("memo",)
    record = next(v for v in result.verdicts if v.guard == "policy:send.memo")
    assert record.verdict == "reject" and record.reason in {"wrong_type", "not_allowed"}


@pytest.mark.parametrize(
    "memo",
    [
        {"type": "string"},  # optional, but not nullable: the schema refuses null
        {"anyOf": [{"type": "string"}, {"type": "integer"}]},
        {"type": ["string", "null"], "not": {"type": "null"}},
    ],
)
def test_null_where_the_schema_does_not_admit_it_is_refused(memo: dict[str, Any]) -> None:
    rails = _rails(memo, ["to"], {"pattern": "[a-z]+"})
    result = rails.call("send", {"to": "a", "memo": None})
    assert result.outcome is Outcome.INVALID_ARGS and result.params == ("memo",)


def test_a_schema_that_says_nothing_about_null_keeps_the_rule_on_null() -> None:
    # An untyped parameter admits null only implicitly: the rule still decides.
    rails = _rails({"description": "anything"}, ["to"], {"pattern": "[a-z]+"})
    result = rails.call("send", {"to": "a", "memo": None})
    assert result.outcome is Outcome.INVALID_ARGS
    record = next(v for v in result.verdicts if v.guard == "policy:send.memo")
    assert record.reason == "wrong_type"


def test_nested_and_list_positions() -> None:
    schema = {
        "type": "object",
        "properties": {
            "recipient": {
                "type": ["object", "null"],
                "properties": {
                    "iban": {"type": "string"},
                    "note": {"type": ["string", "null"]},
                },
                "required": ["iban"],
            },
            "cc": {"type": "array", "items": {"type": ["string", "null"]}},
        },
        "required": [],
    }
    pay = Tool("pay", lambda **kw: "paid", schema)
    rules = (
        Param("pay", "recipient.note", pattern="[a-z ]+"),
        Param("pay", "recipient.iban", kind="iban"),
        Param("pay", "cc.*", kind="email"),
    )
    rails = Guardrails([pay], policy=Policy(params=rules))
    iban = "DE89370400440532013000"
    ok = rails.call("pay", {"recipient": {"iban": iban, "note": None}, "cc": []})
    assert ok.outcome is Outcome.OK
    assert rails.call("pay", {"recipient": None}).outcome is Outcome.OK  # nothing below it
    # A list item is never "absent": a null item is checked (and refused).
    listed = rails.call("pay", {"recipient": {"iban": iban}, "cc": [None]})
    assert listed.outcome is Outcome.INVALID_ARGS and listed.params == ("cc",)


def test_a_pydantic_optional_parameter_sent_as_null() -> None:
    @tool
    def transfer(iban: str, reference: str | None = None) -> str:
        """Transfer."""
        return "sent"

    rails = Guardrails(
        [transfer],
        policy=Policy(params=(Param("transfer", "reference", pattern="[A-Z0-9]{4,12}"),)),
    )
    call = {"iban": "DE89370400440532013000", "reference": None}
    assert rails.call("transfer", call).outcome is Outcome.OK
    assert rails.call("transfer", {**call, "reference": "bad ref"}).outcome is Outcome.INVALID_ARGS


# -- what the schema says about null, against an independent judge --------------------------

_LEAVES = st.sampled_from(
    [
        {"type": "string"},
        {"type": "null"},
        {"type": ["string", "null"]},
        {"type": ["integer"]},
        {"enum": ["a", None]},
        {"enum": ["a"]},
        {"const": None},
        {"const": "a"},
        {},
        {"description": "says nothing"},
        {"$ref": "#/$defs/maybe"},
        {"$ref": "#/$defs/never"},
    ]
)
_schemas = st.recursive(
    _LEAVES,
    lambda inner: st.one_of(
        st.builds(lambda xs: {"anyOf": xs}, st.lists(inner, min_size=1, max_size=3)),
        st.builds(lambda xs: {"oneOf": xs}, st.lists(inner, min_size=1, max_size=3)),
        st.builds(lambda xs: {"allOf": xs}, st.lists(inner, min_size=1, max_size=3)),
        st.builds(lambda x: {"not": x}, inner),
        st.builds(lambda a, b: {**a, **b}, inner, inner),
    ),
    max_leaves=6,
)


@pytest.mark.slow
@settings(max_examples=examples(400), derandomize=True)
@given(_schemas, st.booleans())
def test_null_is_skipped_only_where_the_schema_admits_it(schema: Any, required: bool) -> None:
    import jsonschema
    from hypothesis import event

    from guardrails.policy.schema_paths import optional_nullable

    root = {
        "type": "object",
        "properties": {"memo": schema},
        "required": ["memo"] if required else [],
        "$defs": {"maybe": {"type": ["string", "null"]}, "never": {"type": "string"}},
    }
    admits = jsonschema.Draft202012Validator(root).is_valid({"memo": None})
    skipped = optional_nullable(Tool("t", lambda memo=None: memo, root), "memo")
    event(f"judge admits null: {admits}; skipped: {skipped}")
    # Sound: a null is never taken as absent where the schema refuses it or the
    # parameter is required.
    assert not skipped or (admits and not required)
