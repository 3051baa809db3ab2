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

from guardrails.confusables import (
    MARK,
    data,
    fold,
    fold_words,
    has_lookalikes,
    is_mixed_script,
    lookalike_words,
    match_key,
)

_RAW = json.loads(files("guardrails").joinpath("_confusables.json").read_text(encoding="utf-8"))


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
    import guardrails.confusables as confusables

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
