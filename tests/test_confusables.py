"""Look-alike characters: the data, folding, and which words are mixed-script."""

from __future__ import annotations

import json
import re
import subprocess
import sys
import unicodedata
from importlib.resources import files
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from guardrails.text import normalise
from guardrails.text.confusables import (
    _ANY_SCRIPT,
    _SEPARATOR,
    _UNSURE,
    MARK,
    FoldData,
    _one_script,
    data,
    disguises,
    fold,
    fold_words,
    has_lookalikes,
    is_mixed_script,
    lookalike_words,
    match_key,
)

_RAW = json.loads(
    files("guardrails.text").joinpath("_confusables.json").read_text(encoding="utf-8")
)


def test_the_data_names_its_source_and_lists_only_normalised_non_ascii_word_characters() -> None:
    assert _RAW["source"].startswith("ICU ")
    assert len(_RAW["fold"]) > 5_000
    for ch, target in _RAW["fold"].items():
        assert len(ch) == 1 and not ch.isascii(), ch
        assert re.fullmatch(r"\w", ch), ch
        assert unicodedata.normalize("NFKC", ch).casefold() == ch, ch
        assert target != ch and not any(c.isspace() for c in target), ch


def test_folding_twice_is_folding_once() -> None:
    for ch in _RAW["fold"]:
        once = fold(ch)
        assert fold(once) == once, ch


def test_look_alikes_fold_to_what_they_imitate() -> None:
    assert fold("rеfund") == "refund"  # Cyrillic е
    assert fold("rοund") == "round"  # Greek ο
    assert fold("аррlе") == "apple"  # Cyrillic а, р, е
    assert fold("сор") == "cop"
    assert fold("refund") == "refund"  # ASCII is never folded ...
    assert fold("modern") == "modern"  # ... so m and rn stay apart
    assert fold("café") == "café"  # an accent is not a look-alike


def test_scripts_written_together_are_one_script() -> None:
    for word in (
        "refund",
        "сор",
        "東京タワー",
        "ひらがなカタカナ漢字",
        "한국어漢字",
        "abc123_",
        "été",
    ):
        assert not is_mixed_script(word), word
    for word in ("rеfund", "cор", "kπ", "tシャツ", "k팝"):
        assert is_mixed_script(word), word


def test_match_key_folds_only_disguised_words() -> None:
    assert match_key("refund") == "refund"
    assert match_key("refᴜnd") == MARK + "refund"  # small capital U: in use nowhere
    assert match_key("kız") == "kız"  # Turkish dotless ı: a letter in use
    assert match_key("rеfund") == MARK + "refund"
    assert match_key("сор") == "сор"  # Russian, one script
    assert match_key("cор") == MARK + "cop"
    assert match_key("ab漢") == "ab漢"  # mixed, but nothing to fold


def test_has_lookalikes_and_lookalike_words_see_characters_past_the_bmp() -> None:
    astral = next(ch for ch in _RAW["fold"] if ord(ch) > 0xFFFF)
    assert has_lookalikes("x" + astral)
    assert not has_lookalikes("plain café 東京")
    assert has_lookalikes("сор")
    assert lookalike_words(["a" + astral, "café"]) == ["a" + astral]
    assert lookalike_words(["сор", "café", "refund"]) == ["сор"]


def test_fold_words_replaces_only_disguised_words() -> None:
    assert fold_words("rеfund the сор") == "refund the сор"
    assert fold_words("plain") == "plain"
    # Past the BMP: one look-alike in use (kept alone), one in use nowhere (folded).
    used = next(c for c in _RAW["fold"] if ord(c) > 0xFFFF and c not in _RAW["uncommon"])
    unused = next(c for c in _RAW["fold"] if ord(c) > 0xFFFF and c in _RAW["uncommon"])
    assert fold_words(f"rеfund {used} {unused}") == f"refund {used} {fold(unused)}"
    assert fold(unused) != unused


def test_script_lookups_are_remembered() -> None:
    tables = data()
    is_mixed_script("жук")
    assert "ж" in tables.cache


def test_the_data_file_is_what_the_script_generates() -> None:
    pytest.importorskip("icu", reason="PyICU regenerates the data; see scripts/gen_confusables.py")
    script = Path(__file__).resolve().parent.parent / "scripts" / "gen_confusables.py"
    result = subprocess.run([sys.executable, str(script), "--check"], check=False)
    assert result.returncode == 0, "run python scripts/gen_confusables.py and commit the result"


def test_the_script_cache_is_bounded() -> None:
    import guardrails.text.confusables as confusables

    tables = data()
    saved = dict(tables.cache)
    tables.cache.pop("ѣ", None)
    original = confusables._CACHE_SIZE
    confusables._CACHE_SIZE = len(tables.cache)
    try:
        assert is_mixed_script("rѣfund")  # ѣ not seen before: computed, not stored
        assert "ѣ" not in tables.cache
    finally:
        confusables._CACHE_SIZE = original
        tables.cache.clear()
        tables.cache.update(saved)


# -- many words at once: the block table -------------------------------------------

# Words that reach each way a word is cleared or suspected: one script (Latin,
# Cyrillic, Japanese, Korean, Han), scripts written together (Han and kana),
# mixed scripts, a block whose letters are of several scripts (Greek shares
# its block with Coptic), a look-alike in use nowhere in a clear-looking word
# (Cyrillic ѡ, small capital ᴜ), digits with another script, past the BMP.
_ASTRAL_USED = next(c for c in _RAW["fold"] if ord(c) > 0xFFFF and c not in _RAW["uncommon"])
_ASTRAL_UNUSED = next(c for c in _RAW["fold"] if ord(c) > 0xFFFF and c in _RAW["uncommon"])
_WORDS = [
    *["refund", "café", "straße", "сор", "ѡсор", "東京タワー", "한국어", "漢字", "ひらがな"],
    *["rеfund", "cор", "refᴜnd", "kπ", "πρόσωπο", "ϣπ", "2024年", "x1", "k팝", "tシャツ"],
    *["kız", "łódź", "điện", "ab漢", _ASTRAL_USED, "a" + _ASTRAL_UNUSED, "аррlе"],
]
_letters = st.sampled_from(sorted({c for w in _WORDS for c in w} | set("abcеорху")))


def _expected(words: list[str]) -> dict[str, str]:
    return {w: k for w in set(words) if (k := match_key(w)) != w}


@given(st.lists(st.text(_letters, min_size=1, max_size=6), max_size=30))
def test_disguises_finds_every_word_match_key_folds(words: list[str]) -> None:
    words = [w for w in (normalise(w) for w in words) if re.fullmatch(r"\w+", w)]
    assert disguises(" ".join(words)) == _expected(words)


def test_the_words_above_reach_every_branch_of_disguises() -> None:
    tables = data()
    shapes = {
        w: w.encode("utf-16-be", "surrogatepass")[::2].translate(tables.blocks) for w in _WORDS
    }
    clear = {w for w, s in shapes.items() if _one_script(s, tables.block_scripts)}
    unsure = {w for w, s in shapes.items() if _UNSURE in s}
    uncommon = {w for w in clear if not tables.uncommon.isdisjoint(w)}
    folded = set(_expected(_WORDS))
    assert {"refund", "сор", "東京タワー", "한국어"} <= clear  # cleared in C
    assert {"πρόσωπο", _ASTRAL_USED} <= unsure  # a block of several scripts; past the BMP
    assert {"ѡсор", "refᴜnd"} <= uncommon | folded and "ѡсор" in uncommon
    assert {"2024年", "ab漢"} <= set(_WORDS) - clear - folded  # suspected, then cleared
    assert {"rеfund", "cор", "refᴜnd", "ѡсор"} <= folded
    assert disguises(" ".join(_WORDS)) == _expected(_WORDS)


def test_a_block_s_signature_promises_only_scripts_its_letters_share() -> None:
    # What lets disguises() clear a word in C: every letter of a block stands
    # in every script its signature byte names.
    tables = data()
    assert tables.blocks[0x25] == _SEPARATOR  # U+2500, put between words
    for cp in range(0x10000):
        ch = chr(cp)
        if not (0xD800 <= cp <= 0xDFFF) and re.fullmatch(r"\w", ch):
            byte = tables.blocks[cp >> 8]
            assert byte != _SEPARATOR, hex(cp)
            if byte in tables.block_scripts:
                shared = tables.block_scripts[byte]
                assert tables.mask(ch) & shared == shared, hex(cp)
            else:
                assert byte in (_UNSURE, _ANY_SCRIPT), hex(cp)
                assert byte == _UNSURE or tables.mask(ch) == -1, hex(cp)


def test_disguises_of_text_without_look_alikes_is_empty() -> None:
    assert disguises("plain café 東京 2024年") == {}
    assert disguises("") == {}


def test_disguises_of_other_text_is_match_key_of_each_space_separated_item() -> None:
    # Not the words of a normalised text: still exact, item by item.
    for text in ("rеfund ─ cор", "rеfund  cор ", "a-rеfund\tсор", "ⁱrеfund ─x"):
        items = text.split(" ")
        assert disguises(text) == _expected(items), text


def test_data_without_uncommon_look_alikes_loads_and_suspects_none() -> None:
    raw = {**_RAW, "uncommon": ""}
    tables = FoldData(raw)
    assert tables.uncommon_bmp.search("refᴜnd") is None
    assert tables.uncommon_astral.search("x") is None
