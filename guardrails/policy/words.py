"""Composite text values: every word grounded, or one of a few literal words.

A rule with ``words = ["lunch", "with", "re:"]`` on a text parameter accepts
a value when each of its words (split on whitespace, the punctuation at its
edges dropped, in the ``text`` normal form) was seen as a word in the rule's
``grounded_in`` sources or is one of those literal words. ``"Lunch with Ana"``
passes when the user wrote "Ana"; ``"Lunch with Ana at evil.example"`` does
not. It checks words, not their order or how many times each appears.

A run of words grounded whole (a field of a tool's result, a line, a phrase
of the user's: ``"Re: Offsite logistics"`` when a mail's subject was
``Offsite logistics``) stands for its words: tool results label whole values,
never their single words, so a value built from a field and literal words
passes only so. A run is at most ``MAX_SPAN`` words, so the check stays linear.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator

from ..errors import ConfigurationError
from ._punct import EDGES
from ._seen import Seen
from .kinds import normalise_text

__all__ = ["MAX_SPAN", "Words"]

MAX_SPAN = 16  # words of a run grounded whole

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
        words = normalise_text(value).split()
        for word in set(words):
            if not self._word(word.strip(EDGES), seen, need):
                break
        else:
            return  # every word on its own: the common case, one lookup per distinct word
        if need and seen is not None and self._runs(words, seen, need):
            return
        partial = seen.partial & need if seen is not None else 0
        yield _UNKNOWN if partial else _NOT_GROUNDED

    def _word(self, word: str, seen: Seen | None, need: int) -> bool:
        if not word or word in self.literal:
            return True
        return bool(need and seen is not None and seen.lookup(word) & need)

    def _runs(self, words: list[str], seen: Seen, need: int) -> bool:
        """Whether the words split into literal or grounded words and runs grounded whole."""
        count = len(words)
        reach = [False] * (count + 1)  # reach[i]: the first i words are accounted for
        reach[0] = True
        for start in range(count):
            if not reach[start]:
                continue
            if self._word(words[start].strip(EDGES), seen, need):
                reach[start + 1] = True
            for stop in range(start + 2, min(count, start + MAX_SPAN) + 1):
                if not reach[stop] and _grounded_run(" ".join(words[start:stop]), seen, need):
                    reach[stop] = True
        return reach[count]


def _grounded_run(run: str, seen: Seen, need: int) -> bool:
    if seen.lookup(run) & need:
        return True
    bare = run.strip(EDGES)
    return bare != run and bool(seen.lookup(bare) & need)
