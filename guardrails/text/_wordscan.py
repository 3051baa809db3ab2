"""The words of a text looked up in a table of keys, in C when the compiled core is built.

``WordTable`` holds the ASCII forms of a term set's words, compiled once
(``guardrails/native/_csrc/triggers.c``). ``Text.present`` hands it the text's token
buffer (``Text.tokens``); ``scan`` walks it once without making a Python
object per word and returns the keys found, each with the offset of its
first occurrence as a whole token; the distinct tokens holding a non-ASCII
byte (raw UTF-8, normalised later by ``_normal.normalise_tokens``); and for
the *tracked* keys (the first words of multi-word terms) the offsets of
their first ``STARTS`` occurrences, where a sequence of words is then
confirmed.

``scan_py`` is the reference: the same answer, in Python. Without the
compiled core (or with ``GUARDRAILS_PURE=1``) ``WordTable.compiled`` is None
and ``Text.present`` takes its own pure path, a chunk at a time.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from types import ModuleType
from typing import Any

from ..native._compiled import CORE as _LOADED

__all__ = ["CORE", "STARTS", "WordTable", "scan", "scan_py"]


def usable(core: ModuleType | None) -> ModuleType | None:
    """``core`` when it has the word scan (an older build may not), else None."""
    return core if core is not None and hasattr(core, "scan_words") else None


# The core tables are compiled with; tests swap it to run both paths.
CORE = usable(_LOADED)


class WordTable:
    """A set of keys (UTF-8 words) and, with the compiled core, its C table.

    ``tracked`` (a subset of the keys) are the keys whose occurrences ``scan``
    records.
    """

    __slots__ = ("_scan", "compiled", "keys", "tracked")

    def __init__(self, keys: Iterable[bytes], tracked: Iterable[bytes] = ()) -> None:
        given = tuple(keys)
        for key in given:
            # Exact bytes only: a subclass's __hash__ or __eq__ is never run.
            if type(key) is not bytes:
                raise TypeError(f"a key must be bytes, not {type(key).__name__}")
        self.keys = frozenset(given)
        self.tracked = self.keys.intersection(t for t in tracked if type(t) is bytes)
        # The core that compiled the table is the one that reads it; the
        # tracked keys go first.
        order = (*self.tracked, *(self.keys - self.tracked))
        self.compiled: Any = None if CORE is None else CORE.word_table(order, len(self.tracked))
        self._scan: Any = None if CORE is None else CORE.scan_words

    def __reduce__(self) -> tuple[type[WordTable], tuple[tuple[bytes, ...], tuple[bytes, ...]]]:
        # The C table is not picklable: a copy compiles its own.
        return (WordTable, (tuple(self.keys), tuple(self.tracked)))

    def __len__(self) -> int:
        return len(self.keys)


# Occurrences recorded per tracked key (STARTS in triggers.c): fewer means all.
STARTS = 64

Found = tuple[dict[bytes, int], list[bytes] | None, dict[bytes, list[int]]]


def scan(table: WordTable, tokens: bytes, want_odd: bool) -> Found:
    """The keys of ``table`` that are all-ASCII tokens of ``tokens`` -> first offset;
    (``want_odd``) the distinct tokens holding a non-ASCII byte, in order; and
    the tracked keys found -> the offsets of their first ``STARTS`` occurrences."""
    if table.compiled is None or type(tokens) is not bytes:
        return scan_py(table, tokens, want_odd)
    found: Found = table._scan(table.compiled, tokens, want_odd)
    return found


# A token: a run of bytes that bytes.split() keeps together.
_TOKEN = re.compile(rb"[^ \t\n\r\x0b\x0c]+")


def scan_py(table: WordTable, tokens: bytes, want_odd: bool) -> Found:
    """What ``scan`` returns, computed in Python (the reference for the C scan)."""
    keys, tracked = table.keys, table.tracked
    found: dict[bytes, int] = {}
    odd: dict[bytes, None] | None = {} if want_odd else None
    starts: dict[bytes, list[int]] = {}
    for match in _TOKEN.finditer(tokens):
        token = match.group()
        if not token.isascii():
            if odd is not None:
                odd.setdefault(token)
        elif token in keys:
            found.setdefault(token, match.start())
            if token in tracked:
                seen = starts.setdefault(token, [])
                if len(seen) < STARTS:
                    seen.append(match.start())
    return found, None if odd is None else list(odd), starts
