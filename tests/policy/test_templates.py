"""Composite values by template: literal words in order, each placeholder a grounded value."""

from __future__ import annotations

import itertools
from pathlib import Path
from typing import Any

import pytest
from hypothesis import event, given, settings
from hypothesis import strategies as st

from guardrails import Guardrails, tool
from guardrails.policy import Check, CustomKind, Param, PolicyError, loads
from guardrails.policy._punct import EDGES
from guardrails.policy.kinds import normalise_text
from guardrails.policy.templates import (
    MAX_PLACEHOLDERS,
    MAX_SLOT_WORDS,
    MAX_TEMPLATES,
    MAX_VALUE,
    Template,
)
from tests._examples import examples

DOC = (Path(__file__).resolve().parents[2] / "docs" / "policy.md").read_text()


class Seen:
    """Labels as a set of keys, every source at once."""

    def __init__(self, keys: set[str], partial: int = 0) -> None:
        self.keys, self.partial, self.trusted = keys, partial, 1

    def lookup(self, item: str) -> int:
        return 1 if item in self.keys else 0

    def find(self, kind: str, value: str) -> int:
        return self.lookup(value)

    def mask_of(self, names: frozenset[str]) -> int:
        return 1


GROUNDED = ["ana", "bob lima", "team lunch", "q3 plan"]
UNGROUNDED = ["eve", "evil.example", "bob", "lima bob"]
LITERALS = ["lunch", "with", "re:", "call", "-", "and"]
SEEN = Seen(set(GROUNDED))


def reference(tokens: list[str], words: list[str]) -> bool:
    """Every split of the words over the tokens, tried one by one (small inputs only)."""
    slots = [i for i, t in enumerate(tokens) if t == "{text}"]
    literal = len(tokens) - len(slots)
    spare = len(words) - literal - len(slots)
    if spare < 0:
        return False
    for extra in itertools.product(range(spare + 1), repeat=len(slots)):
        if sum(extra) != spare or any(e + 1 > MAX_SLOT_WORDS for e in extra):
            continue
        at, ok, sizes = 0, True, iter(extra)
        for token in tokens:
            if token == "{text}":
                size = next(sizes) + 1
                fill = " ".join(words[at : at + size])
                bare = fill.strip(EDGES)
                ok = normalise_text(fill) in GROUNDED or (
                    bool(bare) and normalise_text(bare) in GROUNDED
                )
                at += size
            else:
                ok = normalise_text(words[at]) == token
                at += 1
            if not ok:
                break
        if ok:
            return True
    return False


@st.composite
def cases(draw: Any) -> tuple[list[str], str, str]:
    """A template, a value made from it, and how the value was made."""
    slots = draw(st.integers(1, 3))
    tokens = ["{text}"] * slots + draw(st.lists(st.sampled_from(LITERALS), max_size=4))
    tokens = draw(st.permutations(tokens))
    words = []
    for token in tokens:
        if token == "{text}":
            words.append(draw(st.sampled_from(GROUNDED)))
        else:
            words.append(draw(st.sampled_from([token, token.upper(), token.title()])))
    how = draw(st.sampled_from(["filled", "filled", "ungrounded fill", "extra word", "dropped"]))
    if how == "ungrounded fill":
        at = draw(st.sampled_from([i for i, t in enumerate(tokens) if t == "{text}"]))
        words[at] = draw(st.sampled_from(UNGROUNDED))
    elif how == "extra word":
        words.insert(draw(st.integers(0, len(words))), draw(st.sampled_from(LITERALS + UNGROUNDED)))
    elif how == "dropped":
        del words[draw(st.integers(0, len(words) - 1))]
    if words and (how != "filled" or tokens[-1] == "{text}") and draw(st.booleans()):
        words[-1] += draw(st.sampled_from([".", "!", ""]))  # dropped from a fill's edge
    space = draw(st.sampled_from([" ", "  ", "\t"]))
    return list(tokens), space.join(words), how


def _decide(tokens: list[str], value: str) -> bool:
    template = Template(" ".join(tokens), frozenset({"user"}), {})
    return template.failures(value, SEEN) == []


@given(cases())
def test_the_matcher_decides_as_trying_every_split(case: tuple[list[str], str, str]) -> None:
    tokens, value, how = case
    decided = _decide(tokens, value)
    event(f"{how}: {'matched' if decided else 'refused'}")
    assert decided == reference(tokens, value.split())
    if how == "filled":
        assert decided


@pytest.mark.slow
def test_the_generated_cases_reach_the_matching_branch_and_the_refusals() -> None:
    outcomes: list[tuple[str, bool]] = []

    @settings(max_examples=examples(400), derandomize=True, database=None)
    @given(cases())
    def run(case: tuple[list[str], str, str]) -> None:
        outcomes.append((case[2], _decide(case[0], case[1])))

    run()
    matched = sum(ok for _, ok in outcomes) / len(outcomes)
    assert 0.3 <= matched <= 0.85, matched  # both branches are well exercised
    assert all(ok for how, ok in outcomes if how == "filled")
    assert any(not ok for how, ok in outcomes if how == "ungrounded fill")


def test_literal_words_keep_their_order_and_number() -> None:
    template = Template("Lunch with {text}", frozenset({"user"}), {})
    for value in ("lunch with ana", "LUNCH   with Ana!", "Ｌｕｎｃｈ with ana"):
        assert template.failures(value, SEEN) == [], value
    for value in ("with lunch ana", "lunch ana", "lunch with with ana", "lunch, with ana", "ana"):
        assert template.failures(value, SEEN) == ["template_not_matched"], value


def test_a_fill_must_be_one_grounded_value_not_grounded_words() -> None:
    template = Template("Re: {text}", frozenset({"user"}), {})
    assert template.failures("Re: Bob Lima", SEEN) == []
    assert template.failures("Re: Lima Bob", SEEN) == ["template_not_matched"]
    assert template.failures("Re: Ana Ana", SEEN) == ["template_not_matched"]


def test_a_partial_record_refuses_as_unknown() -> None:
    template = Template("Re: {text}", frozenset({"user"}), {})
    assert template.failures("Re: eve", Seen(set(GROUNDED), partial=1)) == ["provenance_unknown"]


def test_hostile_values() -> None:
    class Hostile(str):
        def split(self, *a: Any) -> list[str]:
            raise RuntimeError("ran")

    rule = Param("t", "title", template="Re: {text}", grounded_in=["user"])
    assert rule.check(Hostile("Re: ana"), None, SEEN) == [Check.TYPE]
    assert rule.check("Re: ana", None, SEEN) == []
    assert rule.check("Re: А\u200bna", None, SEEN) == [Check.TEMPLATE]  # a Cyrillic A
    assert rule.check("Re: a\u200bna", None, SEEN) == []  # invisible: the same value
    assert rule.check("Re: " + "ana " * 100_000, None, SEEN) == [Check.TEMPLATE]
    assert rule.check("Re: " + " " * 10_000 + "ana", None, SEEN) == [Check.TEMPLATE]


def test_template_bounds_at_the_bound_and_one_past_it() -> None:
    long = "x" * (MAX_VALUE - 4)
    seen = Seen({long, " ".join(["w"] * MAX_SLOT_WORDS), " ".join(["w"] * (MAX_SLOT_WORDS + 1))})
    rule = Template("Re: {text}", frozenset({"user"}), {})
    assert rule.failures(f"Re: {long}", seen) == []
    assert rule.failures(f"Re: {long}x", seen) == ["template_not_matched"]
    assert rule.failures("Re: " + " ".join(["w"] * MAX_SLOT_WORDS), seen) == []
    assert rule.failures("Re: " + " ".join(["w"] * (MAX_SLOT_WORDS + 1)), seen) != []
    Template(["{text}"] * MAX_TEMPLATES, frozenset({"user"}), {})
    with pytest.raises(Exception, match="1 to 16 templates"):
        Template(["{text}"] * (MAX_TEMPLATES + 1), frozenset({"user"}), {})
    Template(" x ".join(["{text}"] * MAX_PLACEHOLDERS), frozenset({"user"}), {})
    with pytest.raises(Exception, match="1 to 4 placeholders"):
        Template(" x ".join(["{text}"] * (MAX_PLACEHOLDERS + 1)), frozenset({"user"}), {})


def test_every_slot_of_the_worst_template_is_asked_once() -> None:
    asked: list[str] = []

    class Counting(Seen):
        def lookup(self, item: str) -> int:
            asked.append(item)
            return 1

    words = " ".join(["w"] * 250)
    Template("{text} {text} {text} {text}", frozenset({"u"}), {}).failures(words, Counting(set()))
    assert len(asked) <= 4 * 250 * MAX_SLOT_WORDS  # each (slot, start, end) at most once


@tool(effect=True)
def create_event(title: str, minutes: int = 30) -> str:
    """Create a calendar event."""
    return "created"


@tool
def list_contacts() -> list[dict[str, str]]:
    """Contacts."""
    return [{"name": "Ana Lima", "email": "ana@home.example", "notes": "lunch with Eve Evil"}]


def test_kinds_groups_and_custom_kinds_as_placeholders() -> None:
    policy = loads(
        """
[kinds.ticket]
pattern = "[A-Z]{2,5}-[0-9]{1,6}"
case = "upper"

[sources.groups]
contact = ["user", "list_contacts.name"]

[tools.create_event.params.title]
template = ["Lunch with {contact}", "Mail {email}", "Fix {ticket} now"]
grounded_in = ["user", "list_contacts"]
""",
        origin="t.toml",
    )
    rails = Guardrails([create_event, list_contacts], policy=policy)
    turn = rails.turn(session="s")
    turn.pre_turn("Book it, and fix ops-42 today")
    turn.call("list_contacts", {})
    for title in ("Lunch with Ana Lima", "Mail ANA@home.example", "fix OPS-42 now"):
        assert turn.call("create_event", {"title": title}).ok, title
    for title in ("Lunch with Eve Evil", "Mail eve@evil.example", "Fix OPS-43 now", "Lunch"):
        refused = turn.call("create_event", {"title": title})
        assert refused.verdicts[-1].reason == "template_not_matched", title


def test_a_python_rule_names_its_placeholders() -> None:
    ticket = CustomKind("ticket", "[A-Z]{2,5}-[0-9]{1,6}", case="upper")
    rule = Param(
        "create_event",
        "title",
        template=("Lunch with {contact}", "Fix {ticket}"),
        grounded_in=["user"],
        placeholders={"contact": ["user"], "ticket": ticket},
    )
    seen = Seen({"ana", "ticket\x00OPS-1"})
    assert rule.check("Lunch with Ana", None, seen) == []
    assert rule.check("Fix ops-1", None, seen) == []
    assert rule.check("Fix ops-2", None, seen) == [Check.TEMPLATE]
    assert rule.placeholders == (("contact", ("user",)), ("ticket", ticket))


@pytest.mark.parametrize(
    "text",
    [
        '[tools.create_event.params.title]\ntemplate = "Lunch with {who}"\ngrounded_in=["user"]\n',
        '[tools.create_event.params.title]\ntemplate = "Lunch with x{text}"\ngrounded_in=["user"]\n',
        '[tools.create_event.params.title]\ntemplate = "Lunch"\ngrounded_in=["user"]\n',
        '[tools.create_event.params.title]\ntemplate = "Lunch with {email}"\n',
        '[tools.create_event.params.title]\ntemplate = "Lunch with {text}"\nwords=["a"]\n'
        'grounded_in=["user"]\n',
    ],
)
def test_the_template_errors_shown_are_the_real_ones(text: str) -> None:
    with pytest.raises(PolicyError) as info:
        loads(text, origin="policy.toml")
    assert f"\n{info.value}\n" in DOC


@pytest.mark.parametrize(
    ("text", "where"),
    [
        ("template = 3\n", "template: must be a string or a list of strings"),
        (
            'template = "{text}"\nkind = "email"\ngrounded_in = ["user"]\n',
            "template: template needs",
        ),
        ('template = "{a}"\n', "template: {a} names both a kind and a group"),
    ],
)
def test_every_template_mistake_is_one_line_naming_file_table_and_key(
    text: str, where: str
) -> None:
    head = '[kinds.a]\npattern = "x"\n[sources.groups]\na = ["user"]\n'
    with pytest.raises(PolicyError) as info:
        loads(head + "[tools.create_event.params.title]\n" + text, origin="policy.toml").check(
            {"create_event": create_event}
        )
    message = str(info.value)
    assert "\n" not in message
    assert message.startswith("policy.toml: [")
    assert where in message


def test_a_placeholders_unknown_source_is_refused_at_install() -> None:
    from guardrails.policy import Policy

    rule = Param("create_event", "title", template="{g}", placeholders={"g": ["nobody"]})
    with pytest.raises(PolicyError, match="template: unknown source 'nobody'"):
        Policy(params=(rule,)).check({"create_event": create_event})


def test_a_template_on_a_number_is_refused_at_load() -> None:
    policy = loads(
        '[tools.create_event.params.minutes]\ntemplate = "{text}"\ngrounded_in = ["user"]\n',
        origin="policy.toml",
    )
    with pytest.raises(PolicyError, match="minutes] template: template needs a string parameter"):
        policy.check({"create_event": create_event})
