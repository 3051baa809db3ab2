"""Intent terms match their English inflections, by fixed suffix rules.

``forms("reserve")`` is ``reserve``, ``reserves``, ``reserved``,
``reserving``; the rules (docs/policy.md, "Intent gates and ceilings") are
applied to the first word of a term and, for a plural, to its last word, so
``send money`` also matches ``sending money`` and ``credit card`` matches
``credit cards``. Irregular forms (``paid``, ``sent``, ``wrote``) and other
languages are not derived: list them as terms.
"""

from __future__ import annotations

from collections.abc import Iterable

__all__ = ["forms", "inflected"]

_VOWELS = frozenset("aeiou")
_SIBILANT = ("s", "x", "z", "ch", "sh")


def _plurals(word: str) -> set[str]:
    if word.endswith("y") and len(word) > 2 and word[-2] not in _VOWELS:
        return {word[:-1] + "ies"}
    return {word + "es"} if word.endswith(_SIBILANT) else {word + "s"}


def forms(word: str) -> frozenset[str]:
    """The word and its regular English forms (a word of ASCII letters, 3 or more)."""
    if len(word) < 3 or not (word.isascii() and word.isalpha()):
        return frozenset({word})
    out = {word, *_plurals(word)}
    if word.endswith("ee"):
        out.update({word + "d", word + "ing"})
    elif word.endswith("e"):
        out.update({word + "d", word[:-1] + "ing"})
    elif word.endswith("y") and word[-2] not in _VOWELS:
        out.update({word[:-1] + "ied", word + "ing"})
    else:
        out.update({word + "ed", word + "ing"})
        last, before, third = word[-1], word[-2], word[-3]
        if last not in _VOWELS and last not in "wxy" and before in _VOWELS and third not in _VOWELS:
            out.update({word + last + "ed", word + last + "ing"})  # stop: stopped, stopping
    return frozenset(out)


def inflected(terms: Iterable[str]) -> list[str]:
    """Each term and its forms: its first word inflected, its last word also plural."""
    out: dict[str, None] = {}
    for term in terms:
        out[term] = None
        words = term.split()
        if not words:
            continue
        rest = " ".join(words[1:])
        for first in sorted(forms(words[0].lower())):
            out[f"{first} {rest}" if rest else first] = None
        if len(words) > 1:
            head = " ".join(words[:-1])
            for last in sorted(_plurals(words[-1].lower()) if len(words[-1]) >= 3 else ()):
                out[f"{head} {last}"] = None
    return list(out)
