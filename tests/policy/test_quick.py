"""The shortcut of a parameter rule: it passes only what every check passes, and
the guard built on it answers exactly as the general rule function does."""

from __future__ import annotations

from collections import Counter
from typing import Any

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from guardrails import ChokePoint, Guard, Invocation, TurnContext, Verdict
from guardrails.policy import Param
from guardrails.policy._quick import quick
from guardrails.policy.install import _ParamCheck, _simple
from guardrails.policy.provenance import Ledgers, Sources
from tests._examples import examples


class Shady(str):
    """A str subclass whose comparisons and hash would lie if anything called them."""

    def __eq__(self, other: object) -> bool:
        raise AssertionError("__eq__ ran")

    def __hash__(self) -> int:
        raise AssertionError("__hash__ ran")


_SCALARS = st.one_of(
    st.sampled_from(["USD", "EUR", "GBP", "acc-1", "acc-x", "", "root", "<b>"]),
    st.text(max_size=6),
    st.integers(-5, 20),
    st.integers(),
    st.floats(allow_nan=False, allow_infinity=False, min_value=-50, max_value=50),
    st.booleans(),
    st.none(),
    st.just([1]),
    st.just({"a": 1}),
)
_BOUNDS = st.one_of(st.none(), st.integers(-5, 15), st.floats(-5, 15))
_CONTEXT = st.one_of(
    st.integers(-5, 20),
    st.floats(allow_nan=True, allow_infinity=True),
    st.booleans(),
    st.just("10"),
    st.just(10**400),
    st.none(),
)


@st.composite
def _rules(draw: Any) -> Param:
    options: dict[str, Any] = {}
    if draw(st.booleans()):
        options["values"] = draw(st.lists(_SCALARS.filter(lambda v: not isinstance(v, list | dict)), min_size=1, max_size=4))  # fmt: skip
    if draw(st.booleans()):
        options["deny_values"] = draw(st.lists(st.sampled_from(["root", "EUR", 3, 3.0, True]), min_size=1, max_size=2))  # fmt: skip
    if draw(st.booleans()):
        options["pattern"] = draw(st.sampled_from([r"acc-[0-9]{1,8}", r"[A-Z]{3}", r"[^<>]{0,4}"]))
    low, high = draw(_BOUNDS), draw(_BOUNDS)
    if low is not None and high is not None and low > high:
        low, high = high, low
    options["min"], options["max"] = low, high
    if draw(st.booleans()):
        options["max_from"] = "high"
    if draw(st.booleans()):
        options["min_from"] = "low"
    return Param("t", "p", **options)


def _decided(rule: Guard, inv: Invocation) -> tuple[Any, ...]:
    """What the guard boundary records of a rule, its duration aside."""
    record, escape, params = rule.evaluate(inv, ChokePoint.TOOL_CALL)
    missed = None if escape is None else (escape.reason, type(escape.exception))
    return record.verdict, record.reason, record.evidence, missed, params


def _invocation(value: Any, context: TurnContext) -> Invocation:
    return Invocation("t", {"p": value}, {"p": value}, context, "c1")


def test_a_rule_with_a_kind_provenance_or_context_values_has_no_shortcut() -> None:
    assert quick(Param("t", "p", kind="email")._compiled) is None
    assert quick(Param("t", "p", pattern="x", grounded_in=["user"])._compiled) is None
    assert quick(Param("t", "p", values_from="payees")._compiled) is None
    assert quick(Param("t", "p")._compiled) is None
    assert quick(Param("t", "p", pattern="x")._compiled) is not None


def test_a_check_the_shortcut_does_not_know_turns_it_off() -> None:
    compiled = Param("t", "p", pattern="x")._compiled
    compiled.steps = (*compiled.steps, lambda value, norm, context, seen, failed: None)
    assert quick(compiled) is None


def test_the_shortcut_runs_no_method_of_a_str_subclass() -> None:
    for options in ({"values": ["a"]}, {"deny_values": ["a"]}, {"pattern": "a"}, {"max": 3}):
        passes = quick(Param("t", "p", **options)._compiled)  # type: ignore[arg-type]
        assert passes is not None
        assert passes(Shady("a"), TurnContext()) is False


@pytest.mark.slow
def test_the_shortcut_passes_only_what_every_check_passes_and_the_guard_agrees() -> None:
    reached: Counter[str] = Counter()
    forms: Counter[str] = Counter()
    sources = Sources((), ())
    ledgers = Ledgers(sources)

    # The rare branches are pinned by examples: a value only ``check`` passes
    # (a bool in the allowed values, None against a deny list).
    @settings(max_examples=examples(600), deadline=None)
    @given(_rules(), _SCALARS, _CONTEXT, _CONTEXT)
    @example(Param("t", "p", values=[True, "a"]), True, 0, 0)
    @example(Param("t", "p", deny_values=["root"]), None, 0, 0)
    @example(Param("t", "p", pattern="a"), "a", 0, 0)
    @example(Param("t", "p", max_from="high"), 5, 0, 3)
    def agrees(rule: Param, value: Any, low: Any, high: Any) -> None:
        context = TurnContext(values={"low": low, "high": high})
        general = _ParamCheck(rule, ledgers)
        fast = _simple(general)
        passes = quick(rule._compiled)
        inv = _invocation(value, context)
        expected = _decided(Guard(general, name="r"), inv)
        assert _decided(Guard(fast, name="r"), inv) == expected
        forms[fast.__code__.co_name] += 1
        if passes is None:
            reached["no shortcut"] += 1
            return
        if passes(value, context):
            reached["shortcut pass"] += 1
            assert rule.check(value, context, None) == []
            assert expected[0] is Verdict.PASS
        elif expected[0] is Verdict.PASS:
            reached["check pass"] += 1
        else:
            reached["rejected"] += 1

    agrees()
    # Every branch of the shortcut's guard was reached by the generated cases.
    assert all(reached[k] > 0 for k in ("shortcut pass", "check pass", "rejected")), reached
    # ... and every form of the guard function (a test written in its body, or the shortcut).
    written = ("rule_in_values", "rule_matching", "rule_within", "rule_under_context")
    assert all(forms[k] > 0 for k in (*written, "rule_shortcut", "rule")), forms


def test_a_context_bound_that_is_a_huge_int_is_a_bound_not_an_escape() -> None:
    rule = Param("t", "p", max_from="high")
    guard = Guard(_ParamCheck(rule, Ledgers(Sources((), ()))), name="r")
    context = TurnContext(values={"high": 10**400})
    assert _decided(guard, _invocation(5, context))[0] is Verdict.PASS
    assert rule.check(10**401, context, None) == ["above_maximum"]
