"""Text: normalisation, words, lookup and sequences, against the obvious definitions."""

from __future__ import annotations

import re

import pytest
from hypothesis import given
from hypothesis import strategies as st

import guardrails.text as text_module
import guardrails.text._normal as normal_module
from guardrails.errors import UsageError
from guardrails.text import Text, fold_text, normalise
from guardrails.text.confusables import MARK, match_key

# Words and separators that reach every branch: ASCII, accents, full-width,
# invisible characters, look-alikes (Cyrillic е and о in Latin words), other
# scripts, non-ASCII punctuation that separates words, lone surrogates.
_pieces = st.sampled_from(
    [
        "refund",
        "REFUND",
        "ＲＥＦＵＮＤ",
        "re\u200bfund",
        "rеfund",
        "cор",
        "сор",
        "Straße",
        "café",
        "东京タワー",
        "k팝",
        "“x”",
        "—",
        "¿Dónde",
        "\u00ad",
        "\U000e0041",
        "\ud800",
        "ǆ",
        "x1",
        "πρόσωπο",
        "2024年",
        "ѡсор",
        "r\U00010286fund",  # a Lycian look-alike of e, past the BMP
    ]
)
_seps = st.sampled_from([" ", "  ", ", ", "-", ".\n", "_", "", "—", "。"])
_texts = st.lists(st.tuples(st.one_of(_pieces, st.text(max_size=6)), _seps), max_size=14).map(
    lambda parts: "".join(w + s for w, s in parts)
)


def _reference_words(raw: str) -> list[str]:
    """The obvious definition: the whole text normalised, its ``\\w+`` runs, each keyed."""
    return [match_key(w) for w in re.findall(r"\w+", normalise(raw))]


def _encode(word: str) -> bytes:
    return word.encode("utf-8", "surrogatepass")


def test_normalise_removes_invisible_characters_then_applies_nfkc_and_casefold() -> None:
    assert normalise("ＲＥＦＵＮＤ") == "refund"
    assert normalise("Re\u200bfu\u00adnd") == "refund"
    assert normalise("re\U000e0041fund\U0001d173") == "refund"  # tag and musical controls
    assert normalise("STRASSE") == normalise("Straße") == "strasse"


def test_text_refuses_what_is_not_a_string() -> None:
    with pytest.raises(UsageError):
        Text(b"refund")  # type: ignore[arg-type]


@given(_texts, st.integers(1, 12), st.integers(1, 40))
def test_word_bytes_are_the_keyed_words_of_the_normalised_text(
    raw: str, piece: int, chunk: int
) -> None:
    original = text_module.PIECE, text_module.CHUNK
    text_module.PIECE, text_module.CHUNK = piece, chunk
    try:
        text = Text(raw)
        assert text.normalised == normalise(raw)
        assert text.words == re.findall(r"\w+", normalise(raw))
        words = text.word_bytes.split()
    finally:
        text_module.PIECE, text_module.CHUNK = original
    assert words == [_encode(w) for w in _reference_words(raw)]


@given(
    _texts,
    st.lists(_pieces, max_size=6),
    st.integers(1, 40),
    st.booleans(),
    st.sampled_from([0, 2, 256]),
)
def test_present_finds_the_keys_that_are_words(
    raw: str, wanted: list[str], chunk: int, warm: bool, sparse: int
) -> None:
    words = {_encode(w) for w in _reference_words(raw)}
    keys = frozenset(_encode(match_key(normalise(w))) for w in wanted) | set(list(words)[:3])
    if not warm:
        normal_module._KNOWN.clear()
    # Small chunks, and odd tokens found from their positions or by testing each.
    original = text_module.CHUNK, text_module._SMALL, text_module._SPARSE
    text_module.CHUNK, text_module._SMALL, text_module._SPARSE = chunk, 0, sparse
    try:
        found = Text(raw).present(keys)
    finally:
        text_module.CHUNK, text_module._SMALL, text_module._SPARSE = original
    assert found == keys & words


@given(_texts, st.lists(_pieces, min_size=2, max_size=3))
def test_has_sequence_agrees_with_a_search_in_the_word_list(raw: str, wanted: list[str]) -> None:
    words = _reference_words(raw)
    form = tuple((_encode(match_key(normalise(w))),) for w in wanted if normalise(w).isalnum())
    if not form:
        return
    n = len(form)
    expected = any(
        all(_encode(words[i + j]) == form[j][0] for j in range(n))
        for i in range(len(words) - n + 1)
    )
    assert Text(raw).has_sequence(form) is expected


def test_a_sequence_across_odd_tokens_without_words_is_found() -> None:
    form = ((b"credit",), (b"card",))
    for raw in ("credit — card", "credit “ ” card", "credit \u200b card", "Crédit card x"):
        assert Text(raw).has_sequence(form) is (not raw.startswith("Cr")), raw
    assert Text("“credit card”").has_sequence(form)
    assert not Text("credit —x card").has_sequence(form)


def test_many_odd_tokens_without_words_fall_back_to_word_bytes() -> None:
    separators = " ".join(chr(0x2190 + i) for i in range(text_module._MAX_WORDLESS + 5))
    text = Text(f"credit {separators} card, é")
    assert len(text.word_bytes.split()) == 3
    assert text.has_sequence(((b"credit",), (b"card",)))


def test_the_memo_of_normalised_tokens_is_bounded_and_skips_long_tokens() -> None:
    original = normal_module._KNOWN_SIZE
    normal_module._KNOWN.clear()
    normal_module._KNOWN_SIZE = 10
    try:
        Text(" ".join(f"é{i}" for i in range(25))).present(frozenset({b"x"}))
        assert 0 < len(normal_module._KNOWN) <= 10
        long = "é" * 100
        normal_module._KNOWN.clear()
        assert Text(long).present(frozenset({_encode(long)})) == {_encode(long)}
        assert normal_module._KNOWN == {}
    finally:
        normal_module._KNOWN_SIZE = original


def test_a_warm_memo_gives_the_same_words_as_a_cold_one() -> None:
    raw = "¿Dónde está el rеembolso? Сор, cор, Tシャツ, ＲＥＦＵＮＤ"
    normal_module._KNOWN.clear()
    cold = Text(raw).word_bytes
    assert normal_module._KNOWN
    assert Text(raw).word_bytes == cold


def test_mixed_script_words_are_folded_and_single_script_words_kept() -> None:
    text = Text("Rеfund the сор, please: cор")  # Cyrillic е; Russian сор; Latin c + Cyrillic ор
    assert text.word_bytes.split() == [
        _encode(MARK + "refund"),
        b"the",
        _encode("сор"),
        b"please",
        _encode(MARK + "cop"),
    ]
    assert fold_text(normalise("Rеfund the сор, cор")) == "refund the сор, cop"
    assert text.folded == "refund the сор, please: cop"
    assert Text("plain ascii").folded == "plain ascii"


class _Hostile(str):
    """A str whose methods lie."""

    def encode(self, *args: object, **kwargs: object) -> bytes:  # type: ignore[override]
        return b"lies"

    def isascii(self) -> bool:
        return True

    def lower(self) -> str:  # type: ignore[override]
        return "lies"

    def split(self, *args: object, **kwargs: object) -> list[str]:  # type: ignore[override]
        raise RuntimeError("no")


def test_a_str_subclass_is_read_by_its_characters_not_its_methods() -> None:
    text = Text(_Hostile("Rеfund NOW — café"))
    assert type(text.raw) is str
    assert text.words == ["rеfund", "now", "café"]
    assert text.present(frozenset({b"now", _encode(MARK + "refund")})) == {
        b"now",
        _encode(MARK + "refund"),
    }


def test_threads_share_the_memo_while_it_is_emptied() -> None:
    import threading

    from guardrails.rules import TermSet

    terms = TermSet(["refund", "café", "сор"])
    texts = [f"Rеfund {i} café, сор — ¿qué? {i}é" for i in range(200)]
    expected = {"refund", "café", "сор"}
    errors: list[BaseException] = []
    stop = threading.Event()

    def clear() -> None:
        while not stop.is_set():
            normal_module._KNOWN.clear()

    def scan() -> None:
        try:
            for raw in texts:
                assert terms.find(raw) == expected
        except BaseException as exc:  # reported below
            errors.append(exc)

    clearer = threading.Thread(target=clear)
    scanners = [threading.Thread(target=scan) for _ in range(4)]
    clearer.start()
    for t in scanners:
        t.start()
    for t in scanners:
        t.join()
    stop.set()
    clearer.join()
    assert errors == []
