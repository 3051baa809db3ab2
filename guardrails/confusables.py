"""Look-alike characters: folding a mixed-script word to what it imitates.

``rеfund`` written with a Cyrillic ``е`` is not the word ``refund`` to a
computer, but is to a reader. Unicode's confusables data (UTS #39) gives each
character the text it can be mistaken for; ``fold`` replaces every non-ASCII
character of a normalised word by that text (Cyrillic ``е`` -> ``e``, Greek
``ο`` -> ``o``).

Only mixed-script words are folded when text is matched (``match_key``): a
word whose letters come from two scripts that are never written together
(Latin and Cyrillic, Latin and Greek) is a disguise, while a word in one script
is ordinary writing. So the Russian ``сор`` stays Russian and never matches
the English ``cop``, and ``cор`` (Latin ``c``, Cyrillic ``ор``) matches both.
Scripts are compared as UTS #39 does ("resolved script sets", with Han,
Hiragana and Katakana together as Japanese, Han and Hangul as Korean): the
Japanese ``東京タワー`` is one script. ASCII is never folded (``m`` and ``rn``
stay different words: ``modem`` must not match ``modern``).

The data (``_confusables.json``) is generated from ICU's UTS #39 skeletons
and Script_Extensions by ``scripts/gen_confusables.py``, and loaded on first use.
"""

from __future__ import annotations

import bisect
import json
import re
import unicodedata
from functools import cache
from importlib.resources import files

__all__ = ["MARK", "FoldData", "data", "fold", "is_mixed_script", "match_key"]

# Put before a folded word in ``Text.word_bytes``: never in a word, not
# whitespace for ``bytes.split``, so a folded word is one token that no word
# of single-script text can equal.
MARK = "\x00"

# UTS #39 augmented script sets: Han is also Japanese, Korean and Han with
# Bopomofo; Hiragana and Katakana are Japanese; Hangul is Korean.
_AUGMENT = {
    "Hani": ("Hani", "Hanb", "Jpan", "Kore"),
    "Hira": ("Hira", "Jpan"),
    "Kana": ("Kana", "Jpan"),
    "Hang": ("Hang", "Kore"),
    "Bopo": ("Bopo", "Hanb"),
}


class FoldData:
    """The loaded tables: the fold (a ``str.translate`` table) and script ranges."""

    __slots__ = ("_ends", "_masks", "_starts", "cache", "foldable", "source", "table")

    def __init__(self, raw: dict[str, object]) -> None:
        fold = raw["fold"]
        scripts = raw["scripts"]
        if not isinstance(fold, dict) or not isinstance(scripts, list):
            raise ValueError("malformed confusables data")
        self.source = str(raw.get("source", ""))
        self.table: dict[int, str] = {ord(k): v for k, v in fold.items()}
        # One regular expression that says whether a text holds any foldable character.
        self.foldable = re.compile(_char_class(sorted(self.table)))
        bits: dict[str, int] = {}

        def bit(name: str) -> int:
            return bits.setdefault(name, 1 << len(bits))

        self._starts: list[int] = []
        self._ends: list[int] = []
        self._masks: list[int] = []
        for first, last, names in scripts:
            mask = 0
            for name in names.split():
                for member in _AUGMENT.get(name, (name,)):
                    mask |= bit(member)
            self._starts.append(first)
            self._ends.append(last)
            self._masks.append(mask)
        # Per character, filled on first sight (bounded by the characters seen).
        self.cache: dict[str, int] = {}

    def mask(self, ch: str) -> int:
        """The script set of ``ch`` as bits; -1 (every script) for Common and Inherited."""
        cp = ord(ch)
        at = bisect.bisect_right(self._starts, cp) - 1
        value = self._masks[at] if at >= 0 and cp <= self._ends[at] else -1
        self.cache[ch] = value
        return value


def _char_class(codes: list[int]) -> str:
    ranges: list[list[int]] = []
    for cp in codes:
        if ranges and ranges[-1][1] == cp - 1:
            ranges[-1][1] = cp
        else:
            ranges.append([cp, cp])
    parts = (
        re.escape(chr(a)) if a == b else f"{re.escape(chr(a))}-{re.escape(chr(b))}"
        for a, b in ranges
    )
    return "[" + "".join(parts) + "]"


@cache
def data() -> FoldData:
    """The confusables tables, loaded once."""
    text = files("guardrails").joinpath("_confusables.json").read_text(encoding="utf-8")
    return FoldData(json.loads(text))


def is_mixed_script(word: str) -> bool:
    """Whether the letters of ``word`` come from scripts never written together."""
    tables = data()
    known = tables.cache
    resolved = -1
    for ch in word:
        mask = known.get(ch)
        if mask is None:
            mask = tables.mask(ch)
        resolved &= mask
        if not resolved:
            return True
    return False


def fold(word: str) -> str:
    """``word`` (normalised) with every non-ASCII look-alike replaced by what it imitates."""
    folded = word.translate(data().table)
    if folded == word:
        return word
    return unicodedata.normalize("NFKC", folded).casefold()


def match_key(word: str) -> str:
    """What a normalised word is matched as: itself, or ``MARK`` + its fold when it is
    a mixed-script word holding look-alikes."""
    if word.isascii():
        return word
    folded = fold(word)
    if folded == word or not is_mixed_script(word):
        return word
    return MARK + folded
