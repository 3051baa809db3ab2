"""The offending parameters of a flat schema, named in C, agree with ``offending_py``.

``_ccore.flat_offending`` answers what ``CompiledSchema.offending_py`` answers
with one ``jsonschema_rs`` validator per property, and what ``jsonschema``'s
own error list says: the sorted names that fail or are required and missing,
and whether an undeclared key meets a closed schema. Schemas are generated
inside the flat subset, arguments at every boundary and through admission
first, as in a call; the share of examples reaching each kind of offence is
counted from ``jsonschema``'s errors. What the model and the audit trail see
(the sentence, the reason, the parameters) follows from the names.
"""

from __future__ import annotations

import math
import sys
import tracemalloc
from collections import Counter
from typing import Any

import jsonschema
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from guardrails import Guardrails, Outcome, Reason, Tool
from guardrails.middleware.admission import canonical_py
from guardrails.native._compiled import CORE, load
from guardrails.native._flat_plan import flat_plan
from guardrails.schema import CompiledSchema
from guardrails.verdicts import model_sentence
from tests import _flat_strategies as flat
from tests._examples import examples

COMPILED = load()
needs_compiled = pytest.mark.skipif(COMPILED is None, reason="the C extension was not built")

# Names whose sorted order is by code point: upper case first, then "ab" after "a".
NAMES = ["a", "ab", "B", "c", "\u00e9"]
property_schemas = flat.property_schemas(
    flat.numbers(3, [2**53 + 1, 2**70, -(2**63) - 1, 0.5, -0.0, float(2**53)]),
    longest=3,
    annotations={"title": st.text(max_size=2)},
)


def flat_schemas() -> st.SearchStrategy[dict[str, Any]]:
    return flat.flat_schemas(property_schemas, NAMES, min_size=1, closed=[None, True, False, False])


def _near(spec: dict[str, Any]) -> list[Any]:
    """Values of every type (all admitted), and at and around every boundary
    the keywords draw, each enum or const choice twice as likely."""
    return flat.near(spec, [2**70, float(2**70), "\U0001f600"], repeat=2)


@st.composite
def cases(draw: Any) -> tuple[dict[str, Any], dict[str, Any]]:
    schema = draw(flat_schemas())
    instance: dict[str, Any] = {}
    for name, spec in schema["properties"].items():
        if draw(st.integers(0, 6)):
            instance[name] = draw(st.sampled_from(_near(spec)))
    for extra in ("z", "y"):
        if not draw(st.integers(0, 3)):
            instance[extra] = draw(st.sampled_from([1, "q", None, [2]]))
    return schema, instance


KINDS = {
    "type": "type",
    "enum": "enum or const",
    "const": "enum or const",
    "minimum": "bounds",
    "maximum": "bounds",
    "minLength": "lengths",
    "maxLength": "lengths",
    "required": "required",
    "additionalProperties": "additionalProperties",
}


def _reference(schema: dict[str, Any], args: dict[str, Any]) -> tuple[tuple[str, ...], bool]:
    """What jsonschema's own errors name: the first path segment, or the missing names."""
    names: set[str] = set()
    undeclared = False
    for error in jsonschema.Draft202012Validator(schema).iter_errors(args):
        if error.path:
            names.add(error.path[0])
        elif error.validator == "required":
            names.update(r for r in schema.get("required", []) if r not in args)
        elif error.validator == "additionalProperties":
            undeclared = True
    return tuple(sorted(names)), undeclared


@pytest.mark.slow
@needs_compiled
def test_the_c_names_agree_with_offending_py_and_jsonschema_on_every_kind_of_offence() -> None:
    assert COMPILED is not None
    seen: Counter[str] = Counter()

    @settings(max_examples=examples(1500), deadline=None, suppress_health_check=list(HealthCheck))
    @given(cases())
    def check(case: tuple[dict[str, Any], dict[str, Any]]) -> None:
        schema, instance = case
        compiled = CompiledSchema(schema, "t")
        plan = flat_plan(compiled.schema)
        assert plan is not None, schema
        admitted = canonical_py(instance, 10_000)
        assert not isinstance(admitted, Reason)
        args = admitted[0]
        reference = compiled.offending_py(args)
        assert COMPILED.flat_offending(plan, args) == reference, (schema, args)
        assert compiled.offending(args) == reference
        assert _reference(schema, args) == reference
        names, undeclared = reference
        seen["examples"] += 1
        seen["invalid" if names or undeclared else "valid"] += 1
        if len(names) + undeclared >= 2:
            seen["several at once"] += 1
        kinds = {e.validator for e in jsonschema.Draft202012Validator(schema).iter_errors(args)}
        for kind in {KINDS[k] for k in kinds}:
            seen[kind] += 1

    check()
    total = seen["examples"]
    assert seen["valid"] > total * 0.05 and seen["invalid"] > total * 0.5, seen
    for kind in (*sorted(set(KINDS.values())), "several at once"):
        assert seen[kind] > total * 0.05, (kind, seen)


def _transfer_schema() -> dict[str, Any]:
    return {
        "type": "object",
        "properties": {
            "account_id": {"type": "string"},
            "amount": {"type": "number", "minimum": 0.01},
            "currency": {"type": "string", "enum": ["USD", "EUR", "GBP"]},
            "memo": {"type": "string", "maxLength": 4},
        },
        "required": ["account_id", "amount", "currency"],
        "additionalProperties": False,
    }


@pytest.mark.parametrize(
    ("arguments", "reason", "content"),
    [
        (
            {"account_id": "a", "amount": 0.0, "currency": "XYZ"},
            Reason.SCHEMA,
            "The arguments were not accepted. Check these parameters: amount, currency.",
        ),
        (
            {"amount": 0.0, "currency": "EUR", "x": 1},
            Reason.MISSING_REQUIRED,
            "The arguments were not accepted. Check these parameters: account_id, amount."
            " Send only the parameters that the tool declares.",
        ),
        (
            {"account_id": "a", "amount": 1, "currency": "EUR", "x": 1},
            Reason.UNDECLARED_PARAMETER,
            "The arguments were not accepted. Send only the parameters that the tool declares.",
        ),
        (
            {"account_id": 7, "amount": 1, "currency": "EUR", "memo": "too long"},
            Reason.SCHEMA,
            "The arguments were not accepted. Check these parameters: account_id, memo.",
        ),
    ],
)
def test_a_flat_schema_rejection_reads_the_same_sentence_and_reason(
    arguments: dict[str, Any], reason: Reason, content: str
) -> None:
    rails = Guardrails([Tool("transfer", lambda **kw: "ran", _transfer_schema())])
    compiled = rails._pipeline.plans["transfer"].tool.compiled
    assert (compiled.plan is not None) is (CORE is not None)
    result = rails.call("transfer", arguments)
    assert (result.outcome, result.reason, result.content) == (
        Outcome.INVALID_ARGS,
        reason,
        content,
    )
    assert result.params == compiled.offending_py(arguments)[0]


def _expected(schema: dict[str, Any], args: dict[str, Any], extra: str) -> Any:
    """What admission answers, read from ``offending_py`` (the path before the C names)."""
    compiled = CompiledSchema(schema, "t")
    declared = compiled.properties
    if extra == "drop":
        args = {k: v for k, v in args.items() if k in declared}
    flagged = extra == "reject" and not compiled.closed and not declared.issuperset(args)
    if not flagged and jsonschema.Draft202012Validator(schema).is_valid(args):
        return Outcome.OK, None, (), None
    names, undeclared = compiled.offending_py(args)
    undeclared = undeclared or flagged
    if any(r not in args for r in compiled.required):
        reason = Reason.MISSING_REQUIRED
    elif names or not undeclared:
        reason = Reason.SCHEMA
    else:
        reason = Reason.UNDECLARED_PARAMETER
    sentence = model_sentence(Outcome.INVALID_ARGS, names, undeclared=undeclared)
    return Outcome.INVALID_ARGS, reason, names, sentence


@pytest.mark.slow
@settings(max_examples=examples(300), deadline=None, suppress_health_check=list(HealthCheck))
@given(cases(), st.sampled_from(["allow", "reject", "drop"]))
def test_the_pipeline_tells_the_model_what_offending_py_would(
    case: tuple[dict[str, Any], dict[str, Any]], extra: str
) -> None:
    schema, instance = case
    tool = Tool("t", lambda **kw: "ran", schema, extra=extra)  # type: ignore[arg-type]
    result = Guardrails([tool]).call("t", instance)
    expected = _expected(schema, instance, extra)
    if expected[0] is Outcome.OK:
        assert result.outcome is Outcome.OK
        return
    got = (result.outcome, result.reason, result.params, result.content)
    assert got == expected, (schema, instance, extra)


# -- hostile objects: the C code gives up, runs nothing, and the reference answers ------


class Recorded:
    """Counts every method of its own a caller runs."""

    calls = 0


class Key(str, Recorded):
    def __hash__(self) -> int:
        Recorded.calls += 1
        return str.__hash__(self)

    def __eq__(self, other: object) -> bool:
        Recorded.calls += 1
        return str.__eq__(self, other)


class Number(int, Recorded):
    def __ge__(self, other: object) -> bool:
        Recorded.calls += 1
        raise RuntimeError("ge")

    __le__ = __gt__ = __lt__ = __eq__ = __ge__  # type: ignore[assignment]


class Text(str, Recorded):
    def __len__(self) -> int:
        Recorded.calls += 1
        raise RuntimeError("len")


class Arguments(dict[str, Any], Recorded):
    def __iter__(self) -> Any:
        Recorded.calls += 1
        raise RuntimeError("iter")

    items = keys = values = __iter__  # type: ignore[assignment]


HOSTILE_PLAN_SCHEMA = {
    "type": "object",
    "properties": {"n": {"type": "integer", "minimum": 0}, "s": {"maxLength": 2}},
    "required": ["n"],
    "additionalProperties": False,
}


@needs_compiled
@pytest.mark.parametrize(
    "arguments",
    [
        pytest.param({Key("n"): 1}, id="str-subclass key"),
        pytest.param({"n": Number(5)}, id="int-subclass value"),
        pytest.param({"n": 1, "s": Text("abc")}, id="str-subclass value"),
        pytest.param({"n": math.nan}, id="nan"),
        pytest.param({"n": -math.inf}, id="infinity"),
        pytest.param({"n": object()}, id="foreign object"),
        pytest.param(Arguments(n=-1), id="dict subclass"),
        pytest.param([("n", 1)], id="a list"),
        pytest.param(None, id="None"),
        pytest.param("n", id="a str"),
    ],
)
def test_on_anything_but_a_canonical_copy_the_c_names_give_up_and_run_nothing(
    arguments: Any,
) -> None:
    assert COMPILED is not None
    plan = flat_plan(HOSTILE_PLAN_SCHEMA)
    assert plan is not None
    Recorded.calls = 0
    assert COMPILED.flat_offending(plan, arguments) is None
    assert Recorded.calls == 0


@needs_compiled
def test_an_undeclared_key_is_flagged_without_looking_at_its_value() -> None:
    assert COMPILED is not None
    schema = dict(HOSTILE_PLAN_SCHEMA)
    plan = flat_plan(schema)
    assert plan is not None
    Recorded.calls = 0
    arguments = {"n": -1, "other": Number(3), "more": Text("x")}
    assert COMPILED.flat_offending(plan, arguments) == (("n",), True)
    assert Recorded.calls == 0
    assert CompiledSchema(schema, "t").offending_py(arguments) == (("n",), True)
    assert Recorded.calls == 0
    open_plan = flat_plan({**schema, "additionalProperties": True})
    assert COMPILED.flat_offending(open_plan, arguments) == (("n",), False)


def test_offending_falls_back_to_the_reference_when_the_c_names_give_up() -> None:
    compiled = CompiledSchema(HOSTILE_PLAN_SCHEMA, "t")
    assert compiled.offending({"n": -math.inf}) == compiled.offending_py({"n": -math.inf})
    assert compiled.offending({"n": -math.inf}) == (("n",), False)
    assert compiled.offending([1]) == ((), False)


@needs_compiled
def test_a_malformed_plan_is_a_type_error_not_a_crash() -> None:
    assert COMPILED is not None
    good_spec = (4, None, None, 0, None, None, None)
    for plan in [
        None,
        (),
        (True, [], {}),
        (True, (), []),
        (True, (), {"n": (4,)}),
        (True, (), {"n": [*good_spec]}),
        (True, (1,), {}),
        (True, (), {"n": ("int", None, None, None, None, None, None)}),
    ]:
        with pytest.raises(TypeError):
            COMPILED.flat_offending(plan, {"n": 1})
    with pytest.raises(TypeError):
        COMPILED.flat_offending((True, (), {}))  # type: ignore[call-arg]
    assert COMPILED.flat_offending((True, ("n", "n"), {"n": good_spec}), {}) == (("n",), False)


@needs_compiled
def test_the_c_names_keep_no_reference_and_no_memory_over_100000_calls() -> None:
    assert COMPILED is not None
    big, text = 10**30, "".join(["te", "xt"])
    schema = {
        "type": "object",
        "properties": {
            "n": {"type": "integer", "enum": [big, 1], "minimum": 0},
            "s": {"type": "string", "maxLength": 8, "const": text},
            "t": {"type": ["string", "null"], "minLength": 2},
        },
        "required": ["n", "t"],
        "additionalProperties": False,
    }
    plan = flat_plan(schema)
    assert plan is not None
    cases = [
        {"n": big, "s": text, "t": None},  # valid
        {"n": 2.5, "s": "x" * 9},  # three names, one missing
        {"t": "x", "z": 1},  # undeclared, missing, too short
        {"n": math.inf},  # gives up
        [text],  # gives up
    ]
    probes = [plan, big, text, *cases, *plan[2].values()]
    before = [sys.getrefcount(p) for p in probes]

    def calls(n: int) -> int:
        refused = 0  # counted by hand: pytest.raises keeps tracebacks (and memory) of its own
        for _ in range(n):
            for case in cases:
                COMPILED.flat_offending(plan, case)
            try:
                COMPILED.flat_offending((True, (1,), {}), cases[0])
            except TypeError:
                refused += 1
        return refused

    assert calls(10) == 10  # first-time allocations (caches, interned names) before counting
    tracemalloc.start()
    try:
        start, _ = tracemalloc.get_traced_memory()
        assert calls(20_000) == 20_000
        end, _ = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert [sys.getrefcount(p) for p in probes] == before
    assert end - start < 64_000
