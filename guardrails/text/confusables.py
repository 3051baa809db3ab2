"""Look-alike characters: folding a disguised word to what it imitates.

``rеfund`` written with a Cyrillic ``е`` is not the word ``refund`` to a
computer, but is to a reader. Unicode's confusables data (UTS #39) gives each
character the text it can be mistaken for; ``fold`` replaces every non-ASCII
character of a normalised word by that text (Cyrillic ``е`` -> ``e``, Greek
``ο`` -> ``o``).

Only disguised words are folded when text is matched (``match_key``): a word
whose letters come from two scripts never written together (Latin and
Cyrillic, Latin and Greek), or that holds a look-alike no language writes
today (``ɑ``, ``ɡ``, small capitals: not "Recommended" in UTS #39). A word in
one script, of letters in use, is ordinary writing: the Russian ``сор`` stays
Russian and never matches the English ``cop``, the Turkish ``kız`` keeps its
``ı``, and ``cор`` (Latin ``c``, Cyrillic ``ор``) matches both ``cop`` and ``сор``.
Scripts are compared as UTS #39 does ("resolved script sets", with Han,
Hiragana and Katakana together as Japanese, Han and Hangul as Korean): the
Japanese ``東京タワー`` is one script. ASCII is never folded (``m`` and ``rn``
stay different words: ``modem`` must not match ``modern``).

``disguises`` does what ``match_key`` does for many words at once, clearing
most of them in C (see its docstring).

The data (``_confusables.json``) is generated from ICU's UTS #39 skeletons
and Script_Extensions by ``scripts/gen_confusables.py``, and loaded on first use.
"""

from __future__ import annotations

import bisect
import json
import re
import unicodedata
from collections.abc import Collection
from functools import cache, reduce
from importlib.resources import files
from itertools import compress
from operator import and_

__all__ = [
    "MARK",
    "FoldData",
    "data",
    "disguises",
    "fold",
    "fold_words",
    "has_lookalikes",
    "is_mixed_script",
    "lookalike_words",
    "match_key",
]

# Put before a folded word in ``Text.word_bytes``: never in a word, not
# whitespace for ``bytes.split``, so a folded word is one token that no word
# of single-script text can equal.
MARK = "\x00"

# Characters whose script set is remembered (every letter of the common
# scripts fits many times over; text made of rare characters cannot grow it).
_CACHE_SIZE = 65_536

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
    """The loaded tables: the fold (a ``str.translate`` table), the look-alikes
    in use in no language, the script ranges, and per block of 256 code
    points the scripts its letters share (``blocks``, for ``disguises``)."""

    __slots__ = (
        "_bmp",
        "_ends",
        "_lookalike_word",
        "_masks",
        "_starts",
        "block_scripts",
        "blocks",
        "cache",
        "foldable",
        "foldable_astral",
        "source",
        "table",
        "uncommon",
        "uncommon_astral",
        "uncommon_bmp",
    )

    def __init__(self, raw: dict[str, object]) -> None:
        fold = raw["fold"]
        scripts = raw["scripts"]
        if not isinstance(fold, dict) or not isinstance(scripts, list):
            raise ValueError("malformed confusables data")
        self.source = str(raw.get("source", ""))
        self.uncommon = frozenset(str(raw.get("uncommon", "")))
        uncommon = sorted(map(ord, self.uncommon))
        self.uncommon_bmp = _any_of([c for c in uncommon if c <= 0xFFFF])
        self.uncommon_astral = _any_of([c for c in uncommon if c > 0xFFFF])
        self.table: dict[int, str] = {ord(k): v for k, v in fold.items()}
        # Whether a text holds any foldable character: one character class for
        # the Basic Multilingual Plane (re tests it with a bitmap), one for the
        # rest (a list of ranges, slow: searched only when needed).
        codes = sorted(self.table)
        self._bmp = _char_class([c for c in codes if c <= 0xFFFF])
        self.foldable = re.compile(self._bmp)
        self.foldable_astral = re.compile(_char_class([c for c in codes if c > 0xFFFF]))
        self._lookalike_word: re.Pattern[str] | None = None
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
        self.blocks, self.block_scripts = _block_table(self._starts, self._ends, self._masks)
        # Per character, filled on first sight (at most _CACHE_SIZE of them).
        self.cache: dict[str, int] = {}

    def lookalike_word(self) -> re.Pattern[str]:
        """A word holding a foldable character (compiled on first use: a class
        of thousands of characters takes tens of milliseconds to compile)."""
        if self._lookalike_word is None:
            # \b at its start keeps the search linear.
            self._lookalike_word = re.compile(rf"\b\w*?{self._bmp}\w*")
        return self._lookalike_word

    def mask(self, ch: str) -> int:
        """The script set of ``ch`` as bits; -1 (every script) for Common and Inherited."""
        cp = ord(ch)
        at = bisect.bisect_right(self._starts, cp) - 1
        value = self._masks[at] if at >= 0 and cp <= self._ends[at] else -1
        if len(self.cache) < _CACHE_SIZE:
            self.cache[ch] = value
        return value


# The signature of a text of words (``disguises``): each character of the Basic
# Multilingual Plane stands for its block of 256 code points, one byte per
# block: the scripts that every letter of the block shares (one byte value per
# set of scripts), or one of these.
_SEPARATOR = 0x20  # between words: the byte of U+2500..U+25FF (box drawing, shapes: no letter)
_SEPARATOR_CHAR = "\u2500"
_ANY_SCRIPT = 0x02  # no letter of any script in the block: digits, symbols
_UNSURE = 0x01  # letters of scripts never written together (and surrogates)


def _block_table(
    starts: list[int], ends: list[int], masks: list[int]
) -> tuple[bytes, dict[int, int]]:
    """The signature byte of each block of 256 code points of the BMP, and
    the set of scripts (as bits) of each signature byte."""
    shared = [-1] * 256
    for first, last, mask in zip(starts, ends, masks, strict=True):
        for block in range(first >> 8, (min(last, 0xFFFF) >> 8) + 1):
            low, high = max(first, block << 8), min(last, block << 8 | 0xFF)
            # Only a letter (a word character) can be in a word of the text.
            if any(chr(cp).isalnum() for cp in range(low, high + 1)):
                shared[block] &= mask
    # Signature bytes never taken for a set of scripts: the three above and
    # what bytes.split() takes for whitespace.
    free = (
        b for b in range(256) if b not in {_SEPARATOR, _ANY_SCRIPT, _UNSURE, *b"\t\n\r\x0b\x0c"}
    )
    names: dict[int, int] = {}
    table = bytearray(256)
    for block, mask in enumerate(shared):
        if mask == -1:
            table[block] = _ANY_SCRIPT
        elif mask == 0:
            table[block] = _UNSURE
        else:
            table[block] = (
                names[mask] if mask in names else names.setdefault(mask, next(free, _UNSURE))
            )
    table[ord(_SEPARATOR_CHAR) >> 8] = _SEPARATOR
    table[0xD8:0xE0] = bytes([_UNSURE]) * 8  # halves of a character past U+FFFF
    return bytes(table), {name: mask for mask, name in names.items() if name != _UNSURE}


def _any_of(codes: list[int]) -> re.Pattern[str]:
    """A pattern matching any of ``codes``; when there is none, nothing."""
    return re.compile(_char_class(codes) if codes else "(?!)")


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
    text = files("guardrails.text").joinpath("_confusables.json").read_text(encoding="utf-8")
    return FoldData(json.loads(text))


_ASTRAL = re.compile("[\U00010000-\U0010ffff]")
_WORDS = re.compile(r"\w+")


def has_lookalikes(text: str) -> bool:
    """Whether ``text`` (normalised) holds any character that ``fold`` changes."""
    tables = data()
    if tables.foldable.search(text):
        return True
    return bool(_ASTRAL.search(text)) and bool(tables.foldable_astral.search(text))


def lookalike_words(words: Collection[str]) -> list[str]:
    """Those of ``words`` (normalised) that ``fold`` changes."""
    tables = data()
    if _ASTRAL.search(" ".join(words)):
        return [w for w in words if w.translate(tables.table) != w]
    return list(filter(tables.foldable.search, words))


def disguises(words: str) -> dict[str, str]:
    """The disguised words among ``words`` (normalised words separated by
    spaces), each with its ``match_key``.

    For many words at once: each word is checked in C against the block
    table (``FoldData.blocks``), and only the words it cannot clear (letters
    from blocks of different scripts, or from a block whose letters are not
    all of one script, or a look-alike in use nowhere) go through
    ``match_key``.
    """
    if not has_lookalikes(words):
        return {}
    suspects = _suspects(words, data())
    keys = dict(zip(suspects, map(match_key, suspects), strict=True))
    return {word: key for word, key in keys.items() if key != word}


def _suspects(words: str, tables: FoldData) -> set[str]:
    """The words that the block table cannot clear (see ``disguises``)."""
    # One byte per character, the separators kept: the words' shapes, in order.
    spaced = words.replace(" ", _SEPARATOR_CHAR)
    signature = spaced.encode("utf-16-be", "surrogatepass")[::2].translate(tables.blocks)
    shapes = signature.split(_SEPARATOR.to_bytes())
    if len(shapes) != words.count(" ") + 1:
        # Not words of a normalised text (a character of the separator's
        # block in them): every one is a suspect.
        return set(words.split(" "))
    suspects: set[str] = set()
    scripts = tables.block_scripts
    unclear = {shape for shape in set(shapes) if not _one_script(shape, scripts)}
    if unclear:
        suspects.update(compress(words.split(" "), map(unclear.__contains__, shapes)))
    if tables.uncommon_bmp.search(words) or (
        _ASTRAL.search(words) and tables.uncommon_astral.search(words)
    ):
        suspects.update(w for w in set(words.split(" ")) if not tables.uncommon.isdisjoint(w))
    return suspects


_ANY = bytes([_ANY_SCRIPT])


def _one_script(shape: bytes, scripts: dict[int, int]) -> bool:
    """Whether a word's signature shows letters of scripts written together only."""
    blocks = set(shape.translate(None, _ANY))
    if _UNSURE in blocks:
        return False
    return reduce(and_, map(scripts.__getitem__, blocks), -1) != 0


def fold_words(text: str) -> str:
    """``text`` (normalised) with each disguised word replaced by its fold."""
    if text.isascii() or not has_lookalikes(text):
        return text
    pattern = _WORDS if _ASTRAL.search(text) else data().lookalike_word()
    return pattern.sub(_fold_match, text)


def _fold_match(match: re.Match[str]) -> str:
    word = match.group()
    key = match_key(word)
    return key[1:] if key.startswith(MARK) else word


def is_mixed_script(word: str) -> bool:
    """Whether the letters of ``word`` come from scripts never written together."""
    tables = data()
    try:
        # All in C: one dict lookup per character, the script sets and-ed.
        return not reduce(and_, map(tables.cache.__getitem__, word), -1)
    except KeyError:
        return not reduce(and_, map(tables.mask, word), -1)


def fold(word: str) -> str:
    """``word`` (normalised) with every non-ASCII look-alike replaced by what it imitates."""
    folded = word.translate(data().table)
    if folded == word:
        return word
    return unicodedata.normalize("NFKC", folded).casefold()


def match_key(word: str) -> str:
    """What a normalised word is matched as: itself, or ``MARK`` + its fold when it
    is a disguise (mixed-script, or holding a look-alike no language writes)."""
    if word.isascii():
        return word
    if not is_mixed_script(word) and data().uncommon.isdisjoint(word):
        return word
    folded = fold(word)
    return word if folded == word else MARK + folded
