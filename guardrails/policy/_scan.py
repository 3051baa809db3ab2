"""One text being scanned for values: what was found, its reversed copy, the candidates tried.

Every scan (``_links``, ``_codes``, ``_extract``) reads from cheap anchors
through a ``Scan``: ``left`` reads the text left of an anchor in a reversed
copy made once, so a backwards read costs what it reads and no more;
``add`` reads each candidate once per text; ``joined_before`` and
``joined_after`` say whether a token goes on (a letter or digit of any
script, ``_``, or a hyphen joined to one), so that a value is never read out
of a longer token.
"""

from __future__ import annotations

import re
from collections.abc import Callable

from .kinds import Kind

__all__ = ["EMAIL", "HOST", "IBAN", "PHONE", "URL", "Reader", "Scan", "continues", "run_end"]

# The key prefix of each kind (a text value is its own key).
EMAIL, URL, HOST, IBAN, PHONE = (f"{k.value}\x00" for k in Kind if k is not Kind.TEXT)

Reader = Callable[[str], tuple[str, ...]]


class Scan:
    """One text being scanned: what was found, its reversed copy, the candidates tried."""

    __slots__ = ("_rev", "found", "size", "text", "tried")

    def __init__(self, text: str, found: set[str]) -> None:
        self.text = text
        self.size = len(text)
        self.found = found
        self.tried: dict[Reader, dict[str, tuple[str, ...]]] = {}
        self._rev: str | None = None

    def left(self, pattern: re.Pattern[str], at: int) -> int:
        """How many characters just left of ``at`` the reversed ``pattern`` matches."""
        if self._rev is None:
            self._rev = self.text[::-1]
        match = pattern.match(self._rev, self.size - at)
        return 0 if match is None else match.end() - (self.size - at)

    def add(self, candidate: str, read: Reader) -> bool:
        """The keys ``read`` makes of ``candidate`` (each read once per text); whether any."""
        tried = self.tried.get(read)
        if tried is None:
            tried = self.tried[read] = {}
        keys = tried.get(candidate)
        if keys is None:
            keys = tried[candidate] = read(candidate)
        self.found.update(keys)
        return bool(keys)

    def joined_before(self, at: int) -> bool:
        """Whether the token at ``at`` continues to its left (a word character, a joining hyphen)."""
        text = self.text
        if at == 0:
            return False
        before = text[at - 1]
        return continues(before) or (before == "-" and at > 1 and continues(text[at - 2]))

    def joined_after(self, end: int) -> bool:
        """Whether the token ending at ``end`` continues to its right."""
        text = self.text
        if end >= self.size:
            return False
        after = text[end]
        return continues(after) or (
            after == "-" and end + 1 < self.size and continues(text[end + 1])
        )


def run_end(pattern: re.Pattern[str], text: str, at: int) -> int:
    """Where a run that ``pattern`` (which may match nothing) reads from ``at`` ends."""
    match = pattern.match(text, at)
    return at if match is None else match.end()


def continues(char: str) -> bool:
    """Whether ``char`` goes on a token: a letter or digit of any script, or ``_``."""
    return char.isalnum() or char == "_"
