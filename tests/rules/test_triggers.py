"""Literal triggers: normalisation, word boundaries, multi-word terms, effects."""

from __future__ import annotations

import re

import pytest
from hypothesis import given
from hypothesis import strategies as st

from guardrails import ConfigurationError, Guardrails, Outcome, Verdict, tool
from guardrails.rules import Restrict, TermSet, trigger
from guardrails.rules.triggers import _regex_scanner, _substring_scanner, _trie_pattern
from guardrails.text import Text, normalise


@tool
def refund(order_id: str) -> str:
    """Refund an order."""
    return "refunded"


@tool
def search(query: str) -> str:
    """Search."""
    return query


def test_fullwidth_and_mixed_case_match_the_term() -> None:
    terms = TermSet(["refund"])
    for text in ("ＲＥＦＵＮＤ please", "Refund please", "a REFUND.", "refund"):
        assert terms.find(text) == {"refund"}


def test_a_term_matches_whole_words_only_by_default() -> None:
    terms = TermSet(["refund"])
    assert terms.find("this is refundable") == frozenset()
    assert terms.find("non-refund item") == {"refund"}
    assert terms.find("refund_policy") == frozenset()


def test_word_boundaries_hold_in_non_ascii_text() -> None:
    terms = TermSet(["café", "refund"])
    assert terms.find("un CAFÉ, s'il vous plaît — refund?") == {"café", "refund"}
    assert terms.find("cafés et refunds") == frozenset()


def test_multi_word_terms_match_words_in_sequence() -> None:
    terms = TermSet(["credit card", "card"])
    assert terms.find("my Credit-Card number") == {"credit card", "card"}
    assert terms.find("credit for the card") == {"card"}
    assert terms.find("credit cards") == frozenset()


def test_terms_are_reported_as_given() -> None:
    assert TermSet(["Chargeback"]).find("a chargeback") == {"Chargeback"}


def test_substring_mode_matches_inside_words() -> None:
    terms = TermSet(["refund", "ＸＹ"], word_boundary=False)
    assert terms.find("REFUNDABLE") == {"refund"}
    assert terms.find("abxyz") == {"ＸＹ"}
    assert terms.find("nothing") == frozenset()


def test_bad_terms_are_configuration_errors() -> None:
    with pytest.raises(ConfigurationError):
        TermSet("refund")
    with pytest.raises(ConfigurationError):
        TermSet(["  "])
    with pytest.raises(ConfigurationError):
        TermSet(["++"])
    with pytest.raises(ConfigurationError):
        TermSet([3])  # type: ignore[list-item]
    assert TermSet(["++"], word_boundary=False).find("c++") == {"++"}


def test_a_trigger_needs_an_effect() -> None:
    with pytest.raises(ConfigurationError):
        trigger(["refund"])
    with pytest.raises(ConfigurationError):
        trigger(["refund"], remove="refund")


def test_a_trigger_removes_the_tools_that_act_on_the_subject() -> None:
    rails = Guardrails([refund, search], [trigger(["refund"], remove=["refund"])])
    turn = rails.turn()
    decision = turn.pre_turn("I want my money back: REFUND")
    assert decision.offered == ("search",)
    [record] = decision.verdicts
    assert record.verdict is Verdict.REJECT
    assert record.reason == "forbidden_subject"
    assert record.evidence == Restrict(remove=frozenset({"refund"}), detail={"terms": ["refund"]})
    assert turn.call("refund", {"order_id": "1"}).outcome is Outcome.UNAVAILABLE


def test_a_trigger_can_refuse_the_turn_with_its_code() -> None:
    rails = Guardrails([refund, search], [trigger(["lawsuit"], refuse="legal_topic")])
    decision = rails.turn().pre_turn("about that lawsuit")
    assert decision.refusal is not None and decision.refusal.code == "legal_topic"
    assert decision.offered == ()


def test_no_match_passes() -> None:
    rails = Guardrails([refund], [trigger(["refund"], remove=["refund"])])
    decision = rails.turn().pre_turn("refundable tickets?")
    assert decision.verdict is Verdict.PASS
    assert decision.offered == ("refund",)


# -- against a slow, obviously right reference ----------------------------------

_words = st.sampled_from(["refund", "card", "credit", "ok", "Straße", "ＲＥＦＵＮＤ", "café", "x1"])
_seps = st.sampled_from([" ", "  ", ", ", "-", ".\n", "_", "", "—"])


def _reference(terms: list[str], text: str) -> set[str]:
    # The whole text normalised at once (NFKC, casefold, invisible characters
    # removed), then one regular expression per term.
    norm = normalise(text)
    found = set()
    for term in terms:
        key = normalise(term)
        words = re.findall(r"\w+", key)
        pattern = r"(?<!\w)" + r"\W+".join(map(re.escape, words)) + r"(?!\w)"
        if re.search(pattern, norm):
            found.add(term)
    return found


@given(
    st.lists(st.lists(_words, min_size=1, max_size=2).map(" ".join), min_size=1, max_size=6),
    st.lists(st.tuples(_words, _seps), max_size=12),
)
def test_word_mode_agrees_with_a_regex_reference(
    terms: list[str], pieces: list[tuple[str, str]]
) -> None:
    text = "".join(w + s for w, s in pieces)
    expected = _reference(terms, text)
    found = TermSet(terms).find(text)
    # Several spellings of one term (REFUND, ＲＥＦＵＮＤ) are reported once, as first given.
    first = {}
    for t in terms:
        first.setdefault(normalise(t), t)
    assert found == {first[normalise(t)] for t in expected}


@given(
    st.lists(st.text(alphabet="abc", min_size=1, max_size=4), min_size=1, max_size=8),
    st.text(alphabet="abc ", max_size=40),
)
def test_the_trie_pattern_finds_a_term_wherever_one_occurs(terms: list[str], text: str) -> None:
    pattern = re.compile(_trie_pattern(sorted(set(terms))))
    assert bool(pattern.search(text)) == any(t in text for t in terms)


@given(
    st.lists(st.text(alphabet="abcé", min_size=1, max_size=4), min_size=1, max_size=8),
    st.text(alphabet="abcé ", max_size=40),
)
def test_substring_mode_reports_every_term_that_occurs_without_pyahocorasick(
    terms: list[str], text: str
) -> None:
    scan = _regex_scanner(sorted(set(terms)))
    assert scan(text) == {t for t in terms if t in text}


@given(
    st.lists(st.text(alphabet="abc", min_size=1, max_size=4), min_size=1, max_size=8),
    st.text(alphabet="abc ", max_size=40),
)
def test_substring_mode_with_pyahocorasick_reports_the_same(terms: list[str], text: str) -> None:
    pytest.importorskip("ahocorasick")
    keys = sorted(set(terms))
    assert _substring_scanner(keys)(text) == _regex_scanner(keys)(text)


def test_a_multi_word_term_needs_a_word_boundary_before_it() -> None:
    for text in ("xcredit card", "Xcredit card", "écredit card", "_credit card"):
        assert TermSet(["credit card"]).find(text) == frozenset(), text
    for text in ("xcredit card, credit card", "écredit card — credit  card"):
        assert TermSet(["credit card"]).find(text) == {"credit card"}, text


@given(st.lists(st.sampled_from(["ab", "cd", "abcd", "x", "refund"]), max_size=60), st.data())
def test_chunked_lookup_finds_the_same_words_as_one_split(
    words: list[str], data: st.DataObject
) -> None:
    import guardrails.text as text_module

    text = Text(" ".join(words) + ", refund.")
    keys = frozenset({b"ab", b"cd", b"refund", b"zz"})
    chunk = data.draw(st.integers(1, 40))
    original = text_module.CHUNK, text_module._SMALL
    text_module.CHUNK, text_module._SMALL = chunk, 0
    try:
        chunked = text.present(keys)
    finally:
        text_module.CHUNK, text_module._SMALL = original
    assert chunked == keys.intersection(text.word_bytes.split())


def test_a_term_at_the_end_of_a_long_text_is_found() -> None:
    text = "word " * 20_000 + "REFUND"
    assert TermSet(["refund", "word refund"]).find(text) == {"refund", "word refund"}


_mixed = st.sampled_from(
    [
        "refund",
        "REFUND",
        "ＲＥＦＵＮＤ",
        "card",
        "credit",
        "café",
        "Straße",
        "re\u200bfund",
        "“x”",
        "—",
    ]
)


@given(
    st.lists(st.lists(_words, min_size=1, max_size=2).map(" ".join), min_size=1, max_size=5),
    st.lists(st.tuples(_mixed, _seps), max_size=14),
    st.integers(1, 12),
)
def test_pieces_of_mixed_text_match_as_the_whole_text_would(
    terms: list[str], parts: list[tuple[str, str]], piece: int
) -> None:
    import guardrails.text as text_module

    raw = "".join(w + s for w, s in parts)
    original = text_module.PIECE
    text_module.PIECE = piece
    try:
        text = Text(raw)
        assert text.normalised == normalise(raw)
        found = TermSet(terms).find(text)
    finally:
        text_module.PIECE = original
    first: dict[str, str] = {}
    for t in terms:
        first.setdefault(normalise(t), t)
    assert found == {first[normalise(t)] for t in _reference(terms, raw)}


@given(
    st.lists(st.sampled_from(["refund", "credit card", "café", "ß", "ǆ"]), min_size=1, max_size=4),
    st.lists(st.one_of(st.text(max_size=8), _mixed), max_size=10).map(" ".join),
    st.integers(1, 6),
    st.integers(1, 9),
)
def test_any_unicode_text_matches_as_the_reference_does(
    terms: list[str], raw: str, piece: int, chunk: int
) -> None:
    import guardrails.text as text_module

    # Small pieces and chunks: every cut between them is exercised.
    original = text_module.PIECE, text_module.CHUNK
    text_module.PIECE, text_module.CHUNK = piece, chunk
    try:
        found = TermSet(terms).find(raw)
    finally:
        text_module.PIECE, text_module.CHUNK = original
    first: dict[str, str] = {}
    for t in terms:
        first.setdefault(normalise(t), t)
    assert found == {first[normalise(t)] for t in _reference(terms, raw)}


def test_a_long_text_without_spaces_is_one_word() -> None:
    text = "退款" * 500_000 + " refund"
    assert TermSet(["refund", "退款"]).find(text) == {"refund"}
    assert TermSet(["退款退款"], word_boundary=False).find(text) == {"退款退款"}
