"""The ``pattern`` of a parameter rule: RE2, linear in the value, bounded when loaded.

Python's ``re`` backtracks: ``(a+)+b`` against 25 ``a`` takes seconds and a
few more characters take hours. A policy pattern is compiled with RE2
(``google-re2``), whose time is linear in the value and in the size of the
compiled program, and whose syntax has no backreferences or lookaround
(they are refused when the policy is loaded, as are ``\\Z``, possessive and
atomic groups: write ``\\z``). ``\\d``, ``\\w``, ``\\s`` and ``\\b`` are ASCII.

Bounds checked at load: ``MAX_CHARS`` characters, ``MAX_GROUPS`` capture
groups, ``MAX_PROGRAM`` RE2 instructions (RE2 itself refuses a repetition
count over 1,000); RE2 holds at most ``MAX_MEMORY`` bytes for a pattern. A match whose worst case (bytes of the value times the
program's size) is over ``INLINE_COST`` runs on a worker thread under the
rule's deadline: RE2 releases the GIL, so the caller is released at the
deadline (the match itself runs to its end on the worker).
"""

from __future__ import annotations

from typing import Any

import re2

from .._aio import call_with_timeout
from ..errors import ConfigurationError

__all__ = [
    "INLINE_COST",
    "MAX_CHARS",
    "MAX_GROUPS",
    "MAX_MEMORY",
    "MAX_PROGRAM",
    "UNANCHORED",
    "Pattern",
]

MAX_CHARS = 1_000
MAX_GROUPS = 100
MAX_PROGRAM = 10_000
# RE2's memory for one pattern (its program and the caches of its automata,
# which fill as values are matched): a thousand rules hold at most 1 GiB.
MAX_MEMORY = 1 << 20
# Bytes times instructions matched on the caller's thread: RE2's slowest
# engine (NFA) takes about 5 ns per unit, so at most about 20 ms.
INLINE_COST = 1 << 22

_BOTH = re2._re2.RE2.Anchor.ANCHOR_BOTH
UNANCHORED = re2._re2.RE2.Anchor.UNANCHORED
_NO_MATCH = (-1, -1)


def _options(capture: bool, longest: bool = False) -> Any:
    options = re2.Options()
    options.log_errors = False  # RE2 would write the parse error to stderr itself
    options.never_capture = not capture
    options.longest_match = longest
    options.max_mem = MAX_MEMORY
    return options


class Pattern:
    """A compiled policy pattern. ``fullmatch`` never raises."""

    __slots__ = ("_match", "compiled", "inline_bytes", "inline_chars", "program", "text")

    def __init__(self, text: str, *, longest: bool = False) -> None:
        """``longest``: a search finds the leftmost-longest match (POSIX), as a
        user-defined kind's scan of a text needs (``custom_kinds``)."""
        if text.__class__ is not str:
            raise ConfigurationError("pattern must be a string")
        if len(text) > MAX_CHARS:
            raise ConfigurationError(
                f"pattern has {len(text):,} characters; at most {MAX_CHARS:,} are allowed"
            )
        try:
            text.encode("utf-8")
        except UnicodeEncodeError:
            raise ConfigurationError("pattern is not valid Unicode text") from None
        with_groups = _compile(text, capture=True)
        if with_groups.groups > MAX_GROUPS:
            raise ConfigurationError(
                f"pattern has {with_groups.groups:,} capture groups; at most {MAX_GROUPS} "
                "are allowed (use (?:...) to group without capturing)"
            )
        compiled = _compile(text, capture=False, longest=longest)
        self.program = compiled.programsize
        if self.program > MAX_PROGRAM:
            raise ConfigurationError(
                f"pattern compiles to {self.program:,} RE2 instructions; at most "
                f"{MAX_PROGRAM:,} are allowed (a smaller repetition count shrinks it)"
            )
        self.text = text
        self.compiled = compiled
        # The compiled program's own matcher: one call, no match object built.
        self._match = compiled._regexp.Match
        self.inline_bytes = INLINE_COST // max(self.program, 1)
        self.inline_chars = self.inline_bytes // 4  # a character is at most 4 bytes of UTF-8

    def __repr__(self) -> str:
        return f"Pattern({self.text!r})"

    def fullmatch(self, value: str) -> bool:
        """Whether all of ``value`` matches, on this thread (a short value: see ``inline_chars``)."""
        try:
            data = value.encode("utf-8")
        except UnicodeEncodeError:  # a lone surrogate is no text a pattern can match
            return False
        return bool(self._match(_BOTH, data, 0, len(data))[0] != _NO_MATCH)

    def fullmatch_within(self, value: str, timeout: float) -> bool | None:
        """``fullmatch``, or None when a long match did not end within ``timeout`` seconds."""
        try:
            data = value.encode("utf-8")
        except UnicodeEncodeError:
            return False
        if len(data) <= self.inline_bytes:
            return bool(self._match(_BOTH, data, 0, len(data))[0] != _NO_MATCH)
        try:
            spans = call_with_timeout(self._match, timeout, _BOTH, data, 0, len(data))
        except TimeoutError:
            return None
        return bool(spans[0] != _NO_MATCH)


def _compile(text: str, *, capture: bool, longest: bool = False) -> Any:
    try:
        return re2.compile(text, _options(capture, longest))
    except re2.error as exc:
        detail = exc.args[0] if exc.args else "rejected"
        if isinstance(detail, bytes):
            detail = detail.decode("utf-8", "replace")
        detail = " ".join(str(detail).split())[:200]  # one line, whatever the pattern holds
        raise ConfigurationError(
            f"pattern does not compile as RE2 syntax (no backreferences or lookaround): {detail}"
        ) from None
