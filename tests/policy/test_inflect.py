"""Intent terms match their regular English forms (docs/policy.md, "Intent gates")."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from guardrails import Guardrails, Outcome, tool
from guardrails.policy import loads
from guardrails.policy.inflect import forms, inflected
from tests._examples import examples


@pytest.mark.parametrize(
    ("word", "expected"),
    [
        ("reserve", {"reserve", "reserves", "reserved", "reserving"}),
        ("book", {"book", "books", "booked", "booking"}),
        ("agree", {"agree", "agrees", "agreed", "agreeing"}),
        ("copy", {"copy", "copies", "copied", "copying"}),
        ("pay", {"pay", "pays", "payed", "paying"}),
        ("fix", {"fix", "fixes", "fixed", "fixing"}),
        ("search", {"search", "searches", "searched", "searching"}),
        ("stop", {"stop", "stops", "stoped", "stoping", "stopped", "stopping"}),
        ("go", {"go"}),  # under three letters: as written
        ("e-mail", {"e-mail"}),  # not only letters: as written
        ("überweisen", {"überweisen"}),  # not English: as written
    ],
)
def test_the_documented_rules(word: str, expected: set[str]) -> None:
    assert forms(word) == expected


def test_a_multi_word_term_inflects_its_first_word_and_pluralises_its_last() -> None:
    got = set(inflected(["send money", "credit card"]))
    assert {"sending money", "sends money", "credit cards"} <= got
    assert "send moneying" not in got


@settings(max_examples=examples(200), deadline=None)
@given(st.text(alphabet="abcdefghijklmnopqrstuvwxyz", min_size=0, max_size=12))
def test_every_form_starts_with_the_stem_and_the_word_is_kept(word: str) -> None:
    found = forms(word)
    assert word in found
    stem = word[:-1] if word.endswith(("e", "y")) and len(word) >= 3 else word
    assert all(f.startswith(stem) for f in found)
    assert len(found) <= 6


@tool(effect=True)
def reserve(place: str) -> str:
    """Reserve a table."""
    return "reserved"


@tool(effect=True)
def pay(amount: float) -> str:
    """Pay."""
    return "paid"


POLICY = '[tools.reserve]\nintent = ["reserve"]\n[tools.pay]\nintent = ["pay", "paid"]\n'


@pytest.mark.parametrize(
    ("text", "offered"),
    [
        ("I'm reserving a table at Luigi's", {"reserve"}),
        ("Reserved? then pay it", {"reserve", "pay"}),
        ("I paid already, what is my balance", {"pay"}),
        ("Show my reservations", set()),  # a noun form: not derived
        ("preserve the file", set()),  # a longer word holding the term: never
        ("the reserver told me", set()),
    ],
)
def test_the_offer_follows_the_inflected_terms(text: str, offered: set[str]) -> None:
    rails = Guardrails([reserve, pay], policy=loads(POLICY))
    assert set(rails.turn().pre_turn(text).offered) == offered


def test_the_tool_call_gate_uses_the_same_forms() -> None:
    rails = Guardrails([reserve, pay], policy=loads(POLICY))
    turn = rails.turn()
    turn.pre_turn("reserving for two")
    turn.offer(["reserve", "pay"])  # as if the application offered both anyway
    assert turn.call("reserve", {"place": "x"}).outcome == Outcome.OK
    refused = turn.call("pay", {"amount": 1})
    assert refused.outcome == Outcome.UNAVAILABLE
    assert [v.reason for v in refused.verdicts if v.verdict.value == "reject"] == [
        "intent_not_mentioned"
    ]
