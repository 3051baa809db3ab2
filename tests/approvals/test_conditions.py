"""The approval setting: always, never, or a closed condition language parsed at registration."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from guardrails import Guardrails, tool
from guardrails._conditions import MAX_CONDITION_CHARS, parse_approval
from guardrails.errors import ConfigurationError
from guardrails.tools import Tool
from tests._examples import examples


def needs(condition: str, arguments: dict[str, Any]) -> bool:
    rule = parse_approval(condition, "t")
    assert rule is not None
    return rule.needs_approval(arguments)


@pytest.mark.parametrize(
    ("condition", "arguments", "expected"),
    [
        ("amount > 500", {"amount": 501}, True),
        ("amount > 500", {"amount": 500}, False),  # at the bound
        ("amount >= 500", {"amount": 500}, True),
        ("amount > 500", {"amount": 500.0001}, True),  # a near miss above
        ("amount < 0 or amount > 500", {"amount": -1}, True),
        ("amount > 500 and currency == 'EUR'", {"amount": 600, "currency": "USD"}, False),
        ("currency in ['EUR', 'USD']", {"currency": "EUR"}, True),
        ("currency not in ['EUR', 'USD']", {"currency": "EUR"}, False),
        ("to.country != 'FR'", {"to": {"country": "FR"}}, False),
        ("lines[1].qty > 2", {"lines": [{"qty": 1}, {"qty": 3}]}, True),
        ("not (amount <= 500)", {"amount": 501}, True),
        ("urgent == true", {"urgent": True}, True),
        ("note == null", {"note": None}, True),
        ("'admin' in roles", {"roles": ["user", "admin"]}, True),
        ("'adm' in role", {"role": "administrator"}, True),
    ],
)
def test_a_condition_reads_the_arguments(
    condition: str, arguments: dict[str, Any], expected: bool
) -> None:
    assert needs(condition, arguments) is expected


@pytest.mark.parametrize(
    ("condition", "arguments"),
    [
        ("amount > 500", {}),  # missing
        ("amount > 500", {"amount": "9000"}),  # text against a number
        ("amount > 500", {"amount": True}),  # a bool is not a number
        ("amount > 500", {"amount": float("nan")}),
        ("amount > 500", {"amount": [600]}),
        ("to.country == 'FR'", {"to": "FR"}),  # a path through a value that is not an object
        ("lines[5].qty > 2", {"lines": []}),
        ("amount > 500 or currency == 'EUR'", {"currency": "USD"}),  # unknown or false
        ("not (amount > 500)", {}),  # not unknown is unknown
    ],
)
def test_a_condition_that_cannot_be_read_needs_approval(
    condition: str, arguments: dict[str, Any]
) -> None:
    assert needs(condition, arguments) is True


def test_a_known_false_part_decides_an_and_even_when_another_part_is_unknown() -> None:
    assert needs("amount > 500 and currency == 'EUR'", {"currency": "USD"}) is False


def test_values_of_hostile_types_are_never_compared_and_need_approval() -> None:
    class Loud(str):
        def __eq__(self, other: object) -> bool:
            raise AssertionError("compared")

        def __gt__(self, other: object) -> bool:
            raise AssertionError("compared")

        __hash__ = str.__hash__

    assert needs("name == 'x'", {"name": Loud("x")}) is True
    assert needs("name > 'a'", {"name": Loud("x")}) is True
    assert needs("'x' in names", {"names": [Loud("x")]}) is True


@pytest.mark.parametrize(
    "spec",
    [
        "alwyas",  # the typo that must never approve implicitly
        "Always",
        "always ",
        "amount",  # a bare path
        "500",
        "1 > 2",  # no argument read
        "amount >",
        "amount > 500 and",
        "amount => 500",
        "amount > 500)",
        "(amount > 500",
        "__import__('os').system('x') == 0",
        "amount > 5e999",
        "amount > [1, [2]]",
        "amount.0 > 1",
        "lines[-1] > 1",
        "amount > 500 ; drop",
        "",
    ],
)
def test_a_misspelled_or_unknown_setting_is_a_configuration_error_naming_the_tool(
    spec: str,
) -> None:
    with pytest.raises(ConfigurationError, match="tool 'pay'"):
        Tool(
            "pay",
            lambda amount: None,
            {"type": "object", "properties": {"amount": {}}},
            approval=spec,
        )


@pytest.mark.parametrize("spec", [True, 1, ["always"], b"always"])
def test_an_approval_setting_that_is_not_text_is_refused(spec: Any) -> None:
    with pytest.raises(ConfigurationError, match="tool 'pay'"):
        Tool("pay", lambda: None, {"type": "object", "properties": {}}, approval=spec)


def test_a_condition_on_a_parameter_the_tool_lacks_is_refused_at_registration() -> None:
    with pytest.raises(ConfigurationError, match="'amout', which is not a parameter"):

        @tool(approval="amout > 500")
        def pay(amount: int) -> None: ...


def test_a_condition_is_bounded_at_its_length() -> None:
    schema = {"type": "object", "properties": {"a": {}}}
    at_bound = "a == 1" + " or a == 1" * ((MAX_CONDITION_CHARS - 6) // 10)
    at_bound = at_bound + " " * (MAX_CONDITION_CHARS - len(at_bound))
    assert len(at_bound) == MAX_CONDITION_CHARS
    Tool("t", lambda a: None, schema, approval=at_bound)
    with pytest.raises(ConfigurationError, match="longer than"):
        Tool("t", lambda a: None, schema, approval=at_bound + " ")


def test_deep_nesting_is_refused_not_a_recursion_error() -> None:
    schema = {"type": "object", "properties": {"a": {}}}
    with pytest.raises(ConfigurationError, match="nested deeper"):
        Tool("t", lambda a: None, schema, approval="(" * 200 + "a == 1" + ")" * 200)


def test_a_tool_that_needs_approval_without_a_gate_is_refused_by_the_engine() -> None:
    @tool(approval="always")
    def wipe() -> None: ...

    with pytest.raises(ConfigurationError, match="tool 'wipe' needs approval"):
        Guardrails([wipe])
    engine = Guardrails()
    with pytest.raises(ConfigurationError, match="tool 'wipe' needs approval"):
        engine.add_tool(wipe)
    assert "wipe" not in engine.tools


def test_never_is_a_setting_that_needs_no_gate() -> None:
    @tool(approval="never")
    def read() -> None: ...

    Guardrails([read])


_NUMBERS = st.one_of(st.integers(-(10**6), 10**6), st.floats(-1e6, 1e6, allow_nan=False))


@settings(max_examples=examples(300), deadline=None)
@given(bound=_NUMBERS, value=_NUMBERS)
def test_a_number_comparison_agrees_with_python(bound: float, value: float) -> None:
    for op, expected in ((">", value > bound), ("<=", value <= bound), ("==", value == bound)):
        assert needs(f"x {op} {bound!r}", {"x": value}) is expected


@settings(max_examples=examples(300), deadline=None)
@given(text=st.text(max_size=40))
def test_no_text_parses_into_something_that_does_not_read_an_argument(text: str) -> None:
    # Whatever parses reads at least one argument; everything else is an error.
    try:
        rule = parse_approval(text, "t")
    except ConfigurationError:
        return
    assert rule is not None
    assert rule.always or rule.never or rule.names()
