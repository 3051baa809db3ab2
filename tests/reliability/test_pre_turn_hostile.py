"""A hostile user and failing guards at the pre_turn choke-point.

Literal triggers against Unicode look-alikes and invisible characters around
(and inside) the trigger terms; pre_turn guards that raise, hang, return a
non-verdict or lack configuration; turn inputs of the wrong shape. A tool a
trigger withheld stays ``unavailable`` at tool_call for the rest of the turn.
"""

from __future__ import annotations

import asyncio
import os
import re
import sys
import threading
from typing import Any
from unittest import mock

import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from guardrails import (
    EscapeReason,
    Guardrails,
    NotConfigured,
    Outcome,
    Reason,
    Tool,
    UsageError,
    Verdict,
    guard,
)
from guardrails.rules import trigger
from guardrails.rules.triggers import TermSet
from guardrails.text import normalise

PROFILE = settings.get_profile(
    "reliability-long" if os.environ.get("GUARDRAILS_FUZZ") == "long" else "reliability"
)
SECRET_MARK = "sk-live-7f3a9c"
SCHEMA = {"type": "object", "properties": {"amount": {"type": "number"}}}


def engine(*guards: Any) -> Guardrails:
    tools = [Tool(name, lambda **kw: "done", SCHEMA) for name in ("issue_refund", "track_order")]
    return Guardrails(tools, guards)


def refund_trigger() -> Any:
    return trigger(["refund", "credit card"], remove=["issue_refund"], name="money_subjects")


# -- look-alikes and invisible characters around terms ---------------------------------

DETECTED: dict[str, str] = {
    "plain": "refund",
    "upper": "REFUND",
    "mixed_case": "ReFuNd",
    "fullwidth": "ＲＥＦＵＮＤ",
    "math_bold": "𝐫𝐞𝐟𝐮𝐧𝐝",
    "math_sans": "𝗋𝖾𝖿𝗎𝗇𝖽",
    "math_monospace": "𝚛𝚎𝚏𝚞𝚗𝚍",
    "circled": "ⓡⓔⓕⓤⓝⓓ",
    "zero_width_space_around": "\u200brefund\u200b",
    "zero_width_joiner_around": "\u200drefund\u200d",
    "word_joiner_around": "\u2060refund\u2060",
    "bom_before": "\ufeffrefund",
    "bidi_override_around": "\u202erefund\u202c",
    "soft_hyphen_after": "refund\u00ad",
    "quotes_around": "«refund»",
    "punctuation_after": "refund!!!",
    "emoji_around": "💸refund💸",
    "nbsp_between_words": "credit\u00a0card",
    "ideographic_space_between_words": "credit\u3000card",
    "newline_between_words": "credit\ncard",
    "fullwidth_words": "ＣＲＥＤＩＴ　ＣＡＲＤ",
}


@pytest.mark.parametrize("kind", sorted(DETECTED))
def test_trigger_sees_through_look_alikes_and_invisible_characters_around_terms(
    kind: str, ledger: Any
) -> None:
    turn = engine(refund_trigger()).turn()

    decision = turn.pre_turn(f"hi, please {DETECTED[kind]} my last order")

    assert "issue_refund" not in decision.offered
    assert "track_order" in decision.offered
    assert decision.verdict is Verdict.REJECT
    # The withheld tool stays unavailable for the rest of the turn.
    result = turn.call("issue_refund", {"amount": 5})
    assert ledger.check("trigger_lookalikes", result, ("amount",)) == []
    assert result.outcome is Outcome.UNAVAILABLE and result.reason == Reason.NOT_OFFERED


# Visible characters that are not word characters: a term between any two of
# them, with any text around, is found.
separators = st.sampled_from(
    [" ", "\n", "\t", ".", ",", "!", "-", "/", "'", '"', "(", ")", "💸", "\u00a0", "\u3000"]
)
forms = st.sampled_from(["refund", "REFUND", "Refund", "ＲＥＦＵＮＤ", "𝐫𝐞𝐟𝐮𝐧𝐝"])
filler = st.text(alphabet=st.characters(codec="utf-8", exclude_characters="rRＲ𝐫ｒ"), max_size=40)


@pytest.mark.fuzz
@PROFILE
@given(before=filler, after=filler, left=separators, right=separators, form=forms)
def test_trigger_term_between_any_separators_is_always_found(
    before: str, after: str, left: str, right: str, form: str, ledger: Any
) -> None:
    turn = engine(refund_trigger()).turn()

    decision = turn.pre_turn(before + left + form + right + after)

    ledger.add("trigger_lookalikes", inputs=1)
    assert "issue_refund" not in decision.offered


INVISIBLE = ["\u200b", "\u200c", "\u200d", "\u2060", "\ufeff", "\u00ad", "\u202e", "\ufe0f"]
words = st.sampled_from(["refund", "credit", "card", "order", "ＲＥＦＵＮＤ", "re", "fund", "x"])


@pytest.mark.fuzz
@PROFILE
@given(
    parts=st.lists(st.tuples(words, st.sampled_from([" ", ", ", "\n", "-"])), max_size=8),
    inserts=st.lists(st.tuples(st.integers(0, 200), st.sampled_from(INVISIBLE)), max_size=6),
)
def test_invisible_characters_never_change_what_a_trigger_finds(
    parts: list[tuple[str, str]], inserts: list[tuple[int, str]], ledger: Any
) -> None:
    # A reader does not see them, so the decision is the one on the visible text.
    visible = "".join(w + sep for w, sep in parts)
    hidden = visible
    for position, ch in inserts:
        at = position % (len(hidden) + 1)
        hidden = hidden[:at] + ch + hidden[at:]
    rule = refund_trigger()

    offered = [engine(rule).turn().pre_turn(t).offered for t in (visible, hidden)]

    ledger.add("trigger_lookalikes", inputs=1)
    assert offered[0] == offered[1]


# Invisible characters *inside* a term. NFKC keeps them, and they are not word
# characters, so the term is split in two. Each is a way around a trigger.
INSIDE: dict[str, str] = {
    "zero_width_space": "re\u200bfund",
    "zero_width_non_joiner": "re\u200cfund",
    "zero_width_joiner": "re\u200dfund",
    "word_joiner": "re\u2060fund",
    "bom": "re\ufefffund",
    "soft_hyphen": "re\u00adfund",
    "mongolian_vowel_separator": "re\u180efund",
    "tag_space": "re\U000e0020fund",
    "variation_selector": "re\ufe0ffund",
    "inside_first_of_two_words": "cre\u200bdit card",
}


@pytest.mark.parametrize("kind", sorted(INSIDE))
def test_trigger_sees_through_invisible_characters_inside_terms(kind: str, ledger: Any) -> None:
    turn = engine(refund_trigger()).turn()

    decision = turn.pre_turn(f"please {INSIDE[kind]} my last order")

    ledger.add("trigger_lookalikes", inputs=1)
    assert "issue_refund" not in decision.offered


# Look-alikes from other scripts inside a Latin word are folded (UTS #39
# confusables; docs/rules/triggers.md), as are look-alikes in use in no language.
FOLDED: dict[str, str] = {
    "cyrillic_e": "r\u0435fund",
    "cyrillic_i_in_word": "cred\u0456t card",
    "cyrillic_a_in_multi_word": "credit c\u0430rd",
    "greek_upsilon": "ref\u03c5nd",
    "small_capital_u": "ref\u1d1cnd",
}


@pytest.mark.parametrize("kind", sorted(FOLDED))
def test_trigger_sees_through_look_alikes_from_other_scripts(kind: str, ledger: Any) -> None:
    decision = engine(refund_trigger()).turn().pre_turn(f"please {FOLDED[kind]} it")

    ledger.add("trigger_lookalikes", inputs=1)
    assert "issue_refund" not in decision.offered


# A combining accent makes another letter (``re\u0301fund`` is ``réfund``),
# not a look-alike: not folded, by design. Recorded so that a change is noticed;
# docs/reliability.md lists it.
NOT_FOLDED: dict[str, str] = {
    "combining_acute": "re\u0301fund",
}


@pytest.mark.parametrize("kind", sorted(NOT_FOLDED))
def test_an_accent_is_not_a_look_alike(kind: str, ledger: Any) -> None:
    decision = engine(refund_trigger()).turn().pre_turn(f"please {NOT_FOLDED[kind]} it")

    ledger.add("trigger_lookalikes", inputs=1, known_gaps=1)
    assert "issue_refund" in decision.offered


# -- failing pre_turn guards -------------------------------------------------------------


def _raise(exc: BaseException) -> Any:
    def body(_: Any) -> Any:
        raise exc

    return body


FAULTS: dict[str, tuple[Any, EscapeReason]] = {
    "raises": (_raise(RuntimeError(SECRET_MARK)), EscapeReason.RAISED),
    "not_configured": (_raise(NotConfigured(SECRET_MARK)), EscapeReason.NOT_CONFIGURED),
    "returns_bool": (lambda _: False, EscapeReason.INVALID_RETURN),
    "returns_none": (lambda _: None, EscapeReason.INVALID_RETURN),
    "declines": (lambda _: Verdict.NOT_EVALUATED, EscapeReason.DECLINED),
    "hangs": (None, EscapeReason.TIMEOUT),
}


@pytest.mark.parametrize("driver", ["sync", "async"])
@pytest.mark.parametrize("fail_closed", [False, True], ids=["fail_open", "fail_closed"])
@pytest.mark.parametrize("fault", sorted(FAULTS))
def test_failing_pre_turn_guard_is_an_escape_and_never_shows_its_exception(
    fault: str, fail_closed: bool, driver: str, release: threading.Event, ledger: Any
) -> None:
    body, reason = FAULTS[fault]
    # Only the hanging guard may miss its deadline: an answer after the
    # deadline is a timeout, so the others get one a loaded machine cannot miss.
    timeout = 0.3 if body is None else 30.0
    if body is None:

        def body(_: Any) -> Any:
            release.wait(1.0)
            return Verdict.PASS

    g = guard(body, name=f"pre_{fault}", at="pre_turn", fail_closed=fail_closed, timeout=timeout)
    rails = engine(g, refund_trigger())
    turn = rails.turn()

    if driver == "sync":
        decision = turn.pre_turn("where is my parcel?")
    else:
        decision = asyncio.run(turn.apre_turn("where is my parcel?"))

    counted = [(e.guard, e.reason) for e in decision.escapes] == [(g.name, reason)]
    ledger.add("pre_turn_faults", inputs=1, faults_injected=1, faults_counted=int(counted))
    ledger.add("pre_turn_faults", escapes=len(decision.escapes))
    assert [(e.guard, e.reason) for e in decision.escapes] == [(g.name, reason)]
    if fail_closed:
        assert decision.refused and decision.offered == ()
        assert decision.refusal is not None
        assert decision.refusal.code in {str(r) for r in EscapeReason}
    else:
        assert not decision.refused
        assert set(decision.offered) == {"issue_refund", "track_order"}
    assert SECRET_MARK not in repr(decision.refusal)


# -- turn input of the wrong shape ---------------------------------------------------------

ODD_INPUTS: dict[str, Any] = {
    "none": None,
    "bytes": SECRET_MARK.encode(),
    "int": 42,
    "dict_without_role": {"content": SECRET_MARK},
    "message_with_image_only": {"role": "user", "content": [{"type": "image", "source": {}}]},
    "message_with_non_text_blocks": {
        "role": "user",
        "content": [{"type": "text", "text": 5}, None, 3],
    },
    "assistant_only": [{"role": "assistant", "content": "refund"}],
    "lone_surrogate": "refund \ud800",
    "nul_bytes": "re\x00fund refund",
    "ten_mb": "a " * 5_000_000 + "refund",
}


@pytest.mark.parametrize("kind", sorted(ODD_INPUTS))
def test_odd_turn_input_gives_a_decision_or_a_usage_error(kind: str, ledger: Any) -> None:
    turn = engine(refund_trigger()).turn()
    ledger.add("pre_turn_inputs", inputs=1)
    try:
        decision = turn.pre_turn(ODD_INPUTS[kind])
    except UsageError as exc:
        assert SECRET_MARK not in str(exc)
        return
    assert decision.verdict in set(Verdict)
    if kind in {"lone_surrogate", "nul_bytes", "ten_mb"}:
        assert "issue_refund" not in decision.offered


# -- the matcher against a reference ------------------------------------------------------

vocabulary = st.sampled_from(
    [
        "refund",
        "credit",
        "card",
        "ＲＥＦＵＮＤ",
        "Straße",
        "strasse",
        "é",
        "e\u0301",
        "ǰ",
        "x1",
        "_",
    ]
)
glue = st.sampled_from([" ", "", "-", "\n", "\u200b", "\u00a0", ".", "é", "𝐫"])


def reference_find(terms: list[str], text: str) -> set[str]:
    """Whole-word matching, written the obvious way: words joined by single spaces."""

    def spaced(value: str) -> str:
        return " " + " ".join(re.findall(r"\w+", normalise(value))) + " "

    words = spaced(text)
    return {t for t in terms if spaced(t) in words}


@pytest.mark.fuzz
@PROFILE
@given(
    terms=st.lists(
        st.lists(vocabulary, min_size=1, max_size=3).map(" ".join), min_size=1, max_size=4
    ),
    pieces=st.lists(st.tuples(vocabulary, glue), max_size=12),
)
def test_term_matching_agrees_with_a_reference(
    terms: list[str], pieces: list[tuple[str, str]], ledger: Any
) -> None:
    unique = list(dict.fromkeys(terms))
    keys = {normalise(t).strip() for t in unique}
    assume(len(keys) == len(unique))  # terms that normalise alike are one term
    text = "".join(word + sep for word, sep in pieces)

    found = TermSet(unique).find(text)

    ledger.add("trigger_lookalikes", inputs=1)
    assert set(found) == reference_find(unique, text)


@pytest.mark.fuzz
@PROFILE
@given(
    terms=st.lists(
        st.lists(vocabulary, min_size=1, max_size=2).map("".join), min_size=1, max_size=4
    ),
    pieces=st.lists(st.tuples(vocabulary, glue), max_size=12),
    automaton=st.booleans(),
)
def test_substring_matching_agrees_with_a_reference_with_and_without_the_automaton(
    terms: list[str], pieces: list[tuple[str, str]], automaton: bool, ledger: Any
) -> None:
    unique = list(dict.fromkeys(terms))
    assume(len({normalise(t).strip() for t in unique}) == len(unique))
    text = "".join(word + sep for word, sep in pieces)
    # Without the optional pyahocorasick, a trie-shaped regular expression is used.
    hidden = {} if automaton else {"ahocorasick": None}

    with mock.patch.dict(sys.modules, hidden):
        found = TermSet(unique, word_boundary=False).find(text)

    ledger.add("trigger_lookalikes", inputs=1)
    haystack = normalise(text)
    assert set(found) == {t for t in unique if normalise(t).strip() in haystack}


@pytest.mark.fuzz
@settings(PROFILE, max_examples=PROFILE.max_examples // 5)  # each example reads ~100 KB twice
@given(
    shift=st.integers(-40, 40),
    pad=st.sampled_from(["a ", "é ", "a\n", "ab", "\u200b ", "𝐫 "]),
    pieces=st.lists(st.tuples(vocabulary, glue), min_size=1, max_size=6),
    copies=st.integers(1, 3),
)
def test_long_text_matching_agrees_with_the_reference_around_piece_boundaries(
    shift: int, pad: str, pieces: list[tuple[str, str]], copies: int, ledger: Any
) -> None:
    # Long texts are read in pieces of about 32 KB: put the words across a cut.
    middle = "".join(word + sep for word, sep in pieces)
    text = pad * ((32_768 + shift) // len(pad)) + middle
    text = (text + " ") * copies
    terms = ["refund", "credit card", "straße", "é x1", "card refund"]

    found = TermSet(terms).find(text)

    ledger.add("trigger_lookalikes", inputs=1)
    assert set(found) == reference_find(terms, text)


message_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(max_size=12) | st.just("refund"),
    lambda inner: (
        st.lists(inner, max_size=4)
        | st.dictionaries(
            st.sampled_from(["role", "content", "type", "text", "user", "id"])
            | st.text(max_size=4),
            inner | st.sampled_from(["user", "assistant", "text", "input_text", "image"]),
            max_size=4,
        )
    ),
    max_leaves=16,
)


@pytest.mark.fuzz
@PROFILE
@given(turn_input=message_values)
def test_any_turn_input_gives_a_decision_or_a_usage_error(turn_input: Any, ledger: Any) -> None:
    turn = engine(refund_trigger()).turn()
    ledger.add("pre_turn_inputs", inputs=1)
    try:
        decision = turn.pre_turn(turn_input)
    except UsageError:
        return
    assert decision.verdict in set(Verdict)
    assert set(decision.offered) <= {"issue_refund", "track_order"}
