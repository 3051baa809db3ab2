"""Normalisation for matching: of one text, and of many tokens at once.

``normalise`` removes invisible characters, then applies NFKC and casefold.
``normalise_tokens`` does the same for the tokens of a text that hold a
non-ASCII character, all in one call of each kind, splits each into words,
keys its disguised words (``guardrails.text.confusables.disguises``), and
remembers the result in a bounded memo: the words of a language recur from
turn to turn.
"""

from __future__ import annotations

import re
import unicodedata
from itertools import compress, islice, repeat
from operator import is_

from .confusables import data, disguises

__all__ = ["fold_width", "normalise", "normalise_tokens"]

_WORDS = re.compile(r"\w+")


# Unicode's Default_Ignorable_Code_Point set (zero-width characters, soft
# hyphen, joiners, bidi controls, variation selectors, tags): invisible, kept
# by NFKC, and not word characters, so one inside a term would split it.
# Two classes: re tests the first (all below U+10000) with a bitmap, and the
# second, a list of ranges, only in text that holds a character past U+FFFF.
_IGNORABLE = re.compile(
    "[\u00ad\u034f\u061c\u115f\u1160\u17b4\u17b5\u180b-\u180f\u200b-\u200f"
    "\u202a-\u202e\u2060-\u206f\u3164\ufe00-\ufe0f\ufeff\uffa0\ufff0-\ufff8]"
)
_IGNORABLE_ASTRAL = re.compile("[\U0001bca0-\U0001bca3\U0001d173-\U0001d17a\U000e0000-\U000e0fff]")
_ASTRAL = re.compile("[\U00010000-\U0010ffff]")


def normalise(text: str) -> str:
    """Invisible characters removed, NFKC, then casefold.

    ``ＲＥＦＵＮＤ``, ``Refund``, and ``refund`` with a zero-width space inside,
    all become ``refund``.
    """
    return fold_width(text).casefold()


def fold_width(text: str) -> str:
    """Invisible characters removed, then NFKC (``normalise`` without the casefold)."""
    text = _IGNORABLE.sub("", text)
    if _ASTRAL.search(text):
        text = _IGNORABLE_ASTRAL.sub("", text)
    return unicodedata.normalize("NFKC", text)


# Between tokens in the one string that all odd tokens are normalised as:
# NFKC, casefold and the removal of invisible characters neither make nor
# remove it, nor combine anything across it, and no token holds it (every
# ASCII byte but letters, digits and "_" is a space in the token buffer). Not
# MARK ("\x00"), which a disguised word is given in that string.
_JOIN = "\x01"
_NON_WORD = re.compile(r"[^\w\x01]+")


def normalise_tokens(odd: list[bytes]) -> list[bytes]:
    """The normalised words (keyed) of each odd token, UTF-8, separated by spaces.

    Tokens seen before (in any text) come from a bounded memo: the words of
    a language recur from turn to turn.
    """
    known = _KNOWN
    # get(), never [] after a test: another thread may empty the memo between.
    cached = list(map(known.get, odd))
    missing = cached.count(None)
    if not missing:
        return cached  # type: ignore[return-value]
    if missing == len(odd):
        words = _normalise_fresh(odd)
        fresh = dict(zip(odd, words, strict=True))
    else:
        new = list(compress(odd, map(is_, cached, repeat(None))))
        fresh = dict(zip(new, _normalise_fresh(new), strict=True))
        words = list(map(fresh.get, odd, cached))  # type: ignore[arg-type]
    if len(known) + len(fresh) > _KNOWN_SIZE:
        known.clear()
    if len(fresh) <= _KNOWN_SIZE and max(map(len, fresh)) <= _KNOWN_TOKEN:
        known.update(fresh)  # the usual case, in one C call
    else:
        short = ((t, w) for t, w in fresh.items() if len(t) <= _KNOWN_TOKEN)
        known.update(islice(short, _KNOWN_SIZE))
    return words


# The memo: at most this many tokens, each at most this many bytes (a long
# token is rare and would hold memory for nothing).
_KNOWN: dict[bytes, bytes] = {}
_KNOWN_SIZE = 32_768
_KNOWN_TOKEN = 64


def _normalise_fresh(odd: list[bytes]) -> list[bytes]:
    # One call of each kind for all of them: joined by _JOIN, normalised,
    # every run of non-word characters made a space, disguised words keyed,
    # split again.
    normal = normalise(_JOIN.encode().join(odd).decode("utf-8", "surrogatepass"))
    spaced = _NON_WORD.sub(" ", normal)
    keys = disguises(spaced.replace(_JOIN, " "))
    if keys:
        pattern = _WORDS if _ASTRAL.search(spaced) else data().lookalike_word()
        spaced = pattern.sub(lambda m: keys.get(m.group(), m.group()), spaced)
    return spaced.encode("utf-8", "surrogatepass").split(_JOIN.encode())
