"""Property-based fuzzing of the tool_call choke-point.

Random tool schemas and arbitrary JSON arguments (near-valid instances, their
mutations, and unrelated JSON), driven end to end through ``Guardrails``. The
pure-Python ``jsonschema`` package is the independent judge of validity. And
random sets of guards, run in two orders through the two drivers, are
checked against a small reference model of the verdict rules.

Default run: the ``reliability`` hypothesis profile. Long run:
``GUARDRAILS_FUZZ=long python -m pytest tests/reliability -m fuzz``.
"""

from __future__ import annotations

import asyncio
import json
import os
import re
from collections import Counter
from typing import Any

import jsonschema
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from guardrails import (
    EscapeReason,
    Guardrails,
    GuardResult,
    NotConfigured,
    Outcome,
    Reason,
    Tool,
    ToolResult,
    Verdict,
    combine,
    guard,
)

pytestmark = pytest.mark.fuzz

PROFILE = settings.get_profile(
    "reliability-long" if os.environ.get("GUARDRAILS_FUZZ") == "long" else "reliability"
)
SECRET_MARK = "sk-live-7f3a9c"

# -- JSON values ---------------------------------------------------------------

json_scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(),  # unbounded: a model can write any integer
    st.integers(-(2**70), 2**70),
    st.floats(allow_nan=False, allow_infinity=False),
    st.text(max_size=12),
    st.just(SECRET_MARK),
)
json_values = st.recursive(
    json_scalars,
    lambda inner: (
        st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=6), inner, max_size=4)
    ),
    max_leaves=12,
)

# -- schemas -----------------------------------------------------------------------

PATTERNS = ["^[a-z]*$", "^[0-9]+$", "^a", "b$", "x"]
prop_names = st.one_of(
    st.sampled_from(["id", "amount", "q", "items", "mode", "a", "b"]),
    st.text(min_size=1, max_size=8),
)


@st.composite
def leaf_schemas(draw: st.DrawFn) -> dict[str, Any]:
    kind = draw(
        st.sampled_from(
            ["any", "string", "integer", "number", "boolean", "null", "enum", "const", "union"]
        )
    )
    schema: dict[str, Any] = {}
    if kind == "string":
        schema["type"] = "string"
        for key, strategy in (
            ("minLength", st.integers(0, 4)),
            ("maxLength", st.integers(0, 12)),
            ("pattern", st.sampled_from(PATTERNS)),
        ):
            if draw(st.booleans()):
                schema[key] = draw(strategy)
    elif kind in ("integer", "number"):
        schema["type"] = kind
        for key in ("minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum"):
            if draw(st.integers(0, 3)) == 0:
                schema[key] = draw(st.integers(-10, 10) | st.floats(-10, 10, allow_nan=False))
        if draw(st.integers(0, 4)) == 0:
            schema["multipleOf"] = draw(st.sampled_from([1, 2, 3, 0.5]))
    elif kind in ("boolean", "null"):
        schema["type"] = kind
    elif kind == "enum":
        schema["enum"] = draw(st.lists(json_scalars, min_size=1, max_size=4))
    elif kind == "const":
        schema["const"] = draw(json_scalars)
    elif kind == "union":
        schema["type"] = draw(
            st.lists(
                st.sampled_from(["string", "integer", "null", "boolean"]),
                min_size=1,
                max_size=3,
                unique=True,
            )
        )
    return schema


def _object(props: dict[str, Any], required: list[str], closed: bool | None) -> dict[str, Any]:
    schema: dict[str, Any] = {"type": "object", "properties": props}
    if required:
        schema["required"] = required
    if closed is not None:
        schema["additionalProperties"] = not closed
    return schema


@st.composite
def nested_objects(draw: st.DrawFn, children: st.SearchStrategy[dict[str, Any]]) -> dict[str, Any]:
    props = draw(st.dictionaries(prop_names, children, max_size=3))
    required = draw(st.lists(st.sampled_from(sorted(props)), unique=True)) if props else []
    return _object(props, required, draw(st.none() | st.booleans()))


@st.composite
def arrays(draw: st.DrawFn, children: st.SearchStrategy[dict[str, Any]]) -> dict[str, Any]:
    schema: dict[str, Any] = {"type": "array", "items": draw(children)}
    for key, strategy in (
        ("minItems", st.integers(0, 2)),
        ("maxItems", st.integers(0, 4)),
        ("uniqueItems", st.booleans()),
    ):
        if draw(st.booleans()):
            schema[key] = draw(strategy)
    return schema


value_schemas = st.recursive(
    leaf_schemas(),
    lambda children: st.one_of(
        arrays(children),
        nested_objects(children),
        st.lists(children, min_size=1, max_size=3).map(lambda s: {"anyOf": s}),
        st.lists(children, min_size=1, max_size=3).map(lambda s: {"oneOf": s}),
        children.map(lambda s: {"not": s}),
    ),
    max_leaves=6,
)


@st.composite
def tool_schemas(draw: st.DrawFn) -> dict[str, Any]:
    props = draw(st.dictionaries(prop_names, value_schemas, max_size=5))
    required = draw(st.lists(st.sampled_from(sorted(props)), unique=True)) if props else []
    return _object(props, required, draw(st.none() | st.booleans()))


# -- arguments: near-valid instances, mutated, or unrelated JSON ----------------------


def instances(schema: Any) -> st.SearchStrategy[Any]:
    """Values that are often, not always, valid for ``schema``."""
    if not isinstance(schema, dict) or not schema:
        return json_values
    if "enum" in schema:
        return st.sampled_from(schema["enum"])
    if "const" in schema:
        return st.just(schema["const"])
    for key in ("anyOf", "oneOf"):
        if key in schema:
            return st.one_of([instances(s) for s in schema[key]])
    if "not" in schema:
        return json_values
    kind = schema.get("type")
    if isinstance(kind, list):
        return st.one_of([instances({"type": k}) for k in kind])
    if kind == "string":
        if "pattern" in schema:
            return st.from_regex(schema["pattern"])
        low = schema.get("minLength", 0)
        return st.text(min_size=low, max_size=max(low, schema.get("maxLength", 12)))
    if kind == "integer":
        return st.integers(-12, 12) | st.integers()
    if kind == "number":
        return st.integers(-12, 12) | st.floats(-12, 12, allow_nan=False)
    if kind == "boolean":
        return st.booleans()
    if kind == "null":
        return st.none()
    if kind == "array":
        return st.lists(
            instances(schema.get("items", {})),
            min_size=schema.get("minItems", 0),
            max_size=max(schema.get("minItems", 0), schema.get("maxItems", 4)),
        )
    if kind == "object":
        props = schema.get("properties", {})
        required = set(schema.get("required", []))
        return st.fixed_dictionaries(
            {k: instances(v) for k, v in props.items() if k in required},
            optional={k: instances(v) for k, v in props.items() if k not in required},
        )
    return json_values


@st.composite
def arguments_for(draw: st.DrawFn, schema: dict[str, Any]) -> Any:
    how = draw(st.sampled_from(["near_valid", "near_valid", "mutated", "unrelated", "json_text"]))
    if how == "unrelated":
        return draw(st.dictionaries(prop_names, json_values, max_size=6) | json_values)
    args = draw(instances(schema))
    if how == "mutated" and isinstance(args, dict):
        change = draw(st.sampled_from(["drop", "replace", "invent"]))
        if change == "drop" and args:
            args.pop(draw(st.sampled_from(sorted(args))))
        elif change == "replace" and args:
            args[draw(st.sampled_from(sorted(args)))] = draw(json_values)
        else:
            args[draw(st.text(min_size=1, max_size=8))] = draw(json_values)
    if how == "json_text":
        return json.dumps(args)
    return args


# -- the properties ------------------------------------------------------------------------


class Recording:
    def __init__(self) -> None:
        self.received: list[dict[str, Any]] = []

    def __call__(self, **kwargs: Any) -> str:
        self.received.append(kwargs)
        return "done"


def _ecma_pattern(validator: Any, pattern: str, instance: Any, schema: Any) -> Any:
    # JSON Schema patterns are ECMA-262 regular expressions, where "$" matches
    # only at the very end; Python's "$" also matches before a final newline.
    if isinstance(instance, str) and not re.search(pattern.replace("$", r"\Z"), instance):
        yield jsonschema.ValidationError(f"{instance!r} does not match {pattern!r}")


ReferenceValidator = jsonschema.validators.extend(
    jsonschema.Draft202012Validator, {"pattern": _ecma_pattern}
)


# docs/tool_call.md, Admission: "the empty text is `{}`"; an integer that rounds
# to infinity as a double is not a finite number.
INT_BOUND = 2**1024 - 2**970


def reference_loads(text: str | bytes) -> Any:
    """JSON text as admission reads it (``ValueError`` when it is not JSON)."""
    return json.loads(text) if text else {}


def finite(value: Any) -> bool:
    if type(value) is int:
        return -INT_BOUND < value < INT_BOUND
    if type(value) is dict:
        return all(finite(v) for v in value.values())
    if type(value) is list:
        return all(finite(v) for v in value)
    return True


def independent_verdict(schema: dict[str, Any], args: Any) -> bool:
    if isinstance(args, str | bytes):
        try:
            args = reference_loads(args)
        except ValueError:
            return False
    if not isinstance(args, dict) or not finite(args):
        return False
    return bool(ReferenceValidator(schema).is_valid(args))


@PROFILE
@given(data=st.data(), schema=tool_schemas(), driver=st.sampled_from(["sync", "async"]))
def test_tool_runs_exactly_when_an_independent_validator_accepts_the_arguments(
    data: st.DataObject, schema: dict[str, Any], driver: str, ledger: Any
) -> None:
    args = data.draw(arguments_for(schema), label="arguments")
    _check_against_the_judge(schema, args, driver, ledger)


@pytest.mark.parametrize("driver", ["sync", "async"])
@pytest.mark.parametrize(
    ("schema", "args"),
    [
        ({"type": "object", "properties": {}}, ""),  # the empty text is {}
        ({"type": "object", "properties": {"a": {}}, "required": ["a"]}, ""),
        ({"type": "object", "properties": {}}, " "),
        ({"type": "object", "properties": {"n": {"maximum": 5}}}, {"n": 10**5000}),
        ({"type": "object", "properties": {"n": {"minimum": 5}}}, {"n": 10**5000}),
        ({"type": "object", "properties": {"n": {}}}, {"n": 2**1024 - 2**970}),
        ({"type": "object", "properties": {"n": {}}}, {"n": 2**1024 - 2**970 - 1}),
    ],
)
def test_the_judge_and_the_pipeline_agree_where_long_runs_found_them_apart(
    schema: dict[str, Any], args: Any, driver: str, ledger: Any
) -> None:
    _check_against_the_judge(schema, args, driver, ledger)


def _check_against_the_judge(schema: dict[str, Any], args: Any, driver: str, ledger: Any) -> None:
    impl = Recording()
    rails = Guardrails([Tool("fuzzed", impl, schema)])

    if driver == "sync":
        result = rails.call("fuzzed", args)
    else:
        result = asyncio.run(rails.acall("fuzzed", args))

    valid = independent_verdict(schema, args)
    ledger.add("schema_fuzz", valid_inputs=int(valid))
    assert ledger.check("schema_fuzz", result, schema.get("properties", {})) == []
    assert isinstance(result, ToolResult) and result.outcome in set(Outcome)
    assert bool(impl.received) == valid, (valid, result.outcome, result.reason)
    if valid:
        assert result.outcome is Outcome.OK
        expected = reference_loads(args) if isinstance(args, str) else args
        assert impl.received == [expected]
    else:
        assert result.outcome is Outcome.INVALID_ARGS
        parsed = args
        if isinstance(args, str):
            try:
                parsed = reference_loads(args)
            except ValueError:
                parsed = None
        if isinstance(parsed, dict) and finite(parsed) and result.reason != Reason.TOO_LARGE:
            missing = {r for r in schema.get("required", []) if r not in parsed}
            assert missing <= set(result.params), (missing, result.params)


# -- verdict combination, against a reference model --------------------------------------

BEHAVIOURS = ("pass", "reject", "decline", "raise", "not_configured", "invalid", "reject_result")
ESCAPE_OF = {
    "decline": EscapeReason.DECLINED,
    "raise": EscapeReason.RAISED,
    "not_configured": EscapeReason.NOT_CONFIGURED,
    "invalid": EscapeReason.INVALID_RETURN,
}
REJECT_OUTCOMES = (Outcome.INVALID_ARGS, Outcome.LIMIT, Outcome.UNAVAILABLE)


def body(behaviour: str) -> Any:
    def check(_: Any) -> Any:
        if behaviour == "pass":
            return Verdict.PASS
        if behaviour == "reject":
            return Verdict.REJECT
        if behaviour == "reject_result":
            return GuardResult.rejected("rule", evidence=SECRET_MARK, params=("q", SECRET_MARK))
        if behaviour == "decline":
            return Verdict.NOT_EVALUATED
        if behaviour == "raise":
            raise RuntimeError(SECRET_MARK)
        if behaviour == "not_configured":
            raise NotConfigured(SECRET_MARK)
        return "pass"

    return check


guard_specs = st.lists(
    st.tuples(
        st.sampled_from(BEHAVIOURS),
        st.sampled_from(REJECT_OUTCOMES),
        st.booleans(),  # fail_closed
        st.integers(0, 4).map(lambda n: n == 0),  # observe
    ),
    max_size=6,
)


def reference(
    specs: list[tuple[str, Outcome, bool, bool]],
) -> tuple[Verdict, Counter[Any], set[Outcome]]:
    """The verdict, escapes and possible refusal outcomes that the SPEC promises."""
    enforced: list[Verdict] = []
    escapes: Counter[Any] = Counter()
    refusals: set[Outcome] = set()
    for i, (behaviour, outcome, fail_closed, observe) in enumerate(specs):
        name = f"g{i}"
        if behaviour in ESCAPE_OF:
            verdict = Verdict.REJECT if fail_closed and not observe else Verdict.NOT_EVALUATED
            escapes[(name, ESCAPE_OF[behaviour])] += 1
        elif behaviour in ("reject", "reject_result"):
            verdict = Verdict.REJECT
            if observe:
                escapes[(name, EscapeReason.OBSERVE_ONLY)] += 1
        else:
            verdict = Verdict.PASS
        if not observe:
            enforced.append(verdict)
            if verdict is Verdict.REJECT:
                refusals.add(outcome)
    return combine(enforced), escapes, refusals


@PROFILE
@given(specs=guard_specs, order=st.randoms(use_true_random=False))
def test_guard_verdicts_combine_the_same_in_any_order_and_match_the_reference(
    specs: list[tuple[str, Outcome, bool, bool]], order: Any, ledger: Any
) -> None:
    schema = {"type": "object", "properties": {"q": {"type": "string"}}}
    guards = [
        guard(body(b), name=f"g{i}", outcome=o, fail_closed=fc, observe=obs)
        for i, (b, o, fc, obs) in enumerate(specs)
    ]
    shuffled = list(guards)
    order.shuffle(shuffled)
    impls = [Recording(), Recording()]
    first = Guardrails([Tool("t", impls[0], schema)], guards).call("t", {"q": "x"})
    second = asyncio.run(Guardrails([Tool("t", impls[1], schema)], shuffled).acall("t", {"q": "x"}))

    verdict, escapes, refusals = reference(specs)
    failures = sum(1 for s in specs if s[0] in ESCAPE_OF)
    for result, impl in zip((first, second), impls, strict=True):
        assert ledger.check("verdict_order", result, ("q",)) == []
        assert result.verdict is verdict
        assert Counter((e.guard, e.reason) for e in result.escapes) == escapes
        if verdict is Verdict.REJECT:
            assert result.outcome in refusals and impl.received == []
        else:
            assert result.outcome is Outcome.OK and len(impl.received) == 1
    ledger.add("verdict_order", faults_injected=2 * failures, faults_counted=2 * failures)
    ledger.add("verdict_order", outcome_depends_on_order=int(len(refusals) > 1))
    if len(refusals) <= 1:
        assert first.outcome is second.outcome


@PROFILE
@given(st.lists(st.sampled_from(list(Verdict)), max_size=12), st.randoms(use_true_random=False))
def test_combine_is_order_and_duplicate_insensitive(verdicts: list[Verdict], order: Any) -> None:
    shuffled = list(verdicts)
    order.shuffle(shuffled)
    expected = (
        Verdict.REJECT
        if Verdict.REJECT in verdicts
        else Verdict.NOT_EVALUATED
        if Verdict.NOT_EVALUATED in verdicts or not verdicts
        else Verdict.PASS
    )
    assert combine(verdicts) is combine(shuffled) is combine(verdicts + shuffled) is expected
