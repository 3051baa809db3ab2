"""Composite text values: every word grounded, or one of a few literal words.

A rule with ``words = ["lunch", "with", "re:"]`` on a text parameter accepts
a value when each of its words (split on whitespace, the punctuation at its
edges dropped, in the ``text`` normal form) was seen as a word in the rule's
``grounded_in`` sources or is one of those literal words. ``"Lunch with Ana"``
passes when the user wrote "Ana"; ``"Lunch with Ana at evil.example"`` does
not. It checks words, not their order or how many times each appears.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator

from ..errors import ConfigurationError
from ._punct import EDGES
from ._seen import Seen
from .kinds import normalise_text

__all__ = ["Words"]

# The reason codes (``checks.Check`` values; that module imports this one).
_UNKNOWN, _NOT_GROUNDED = "provenance_unknown", "word_not_grounded"


class Words:
    """The words check of one rule, prepared once."""

    __slots__ = ("literal", "need_names")

    def __init__(self, literal: Iterable[str], grounded: frozenset[str] | None) -> None:
        if isinstance(literal, str):
            raise ConfigurationError("words must be a list of words")
        out = set()
        for word in literal:
            if not isinstance(word, str):
                raise ConfigurationError("words must be a list of words")
            norm = normalise_text(word).strip(EDGES)
            if not norm or " " in norm:
                raise ConfigurationError(f"words {word!r} is not one word")
            out.add(norm)
        self.literal = frozenset(out)
        self.need_names = grounded

    def failures(self, value: str, seen: Seen | None) -> Iterator[str]:
        """The reason codes of the words of ``value`` that are neither literal nor grounded."""
        need = seen.mask_of(self.need_names) if seen is not None and self.need_names else 0
        for word in set(normalise_text(value).split()):
            word = word.strip(EDGES)
            if not word or word in self.literal:
                continue
            if need and seen is not None and seen.lookup(word) & need:
                continue
            partial = seen.partial & need if seen is not None else 0
            yield _UNKNOWN if partial else _NOT_GROUNDED
            return  # one failure names the check: the rest adds nothing
