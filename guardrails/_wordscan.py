"""The words of a text looked up in a table of keys, in C when the compiled core is built.

``WordTable`` holds the ASCII forms of a term set's words, compiled once
(``guardrails/_csrc/triggers.c``). ``Text.present`` hands it the text's token
buffer (``Text.tokens``); ``scan`` walks it once without making a Python
object per word and returns the keys found, each with the offset of its
first occurrence as a whole token, and the distinct tokens holding a
non-ASCII byte (raw UTF-8, normalised later by ``_normal.normalise_tokens``).

``scan_py`` is the reference: the same answer, in Python. Without the
compiled core (or with ``GUARDRAILS_PURE=1``) ``WordTable.compiled`` is None
and ``Text.present`` takes its own pure path, a chunk at a time.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from types import ModuleType
from typing import Any

from ._compiled import CORE as _LOADED

__all__ = ["CORE", "WordTable", "scan", "scan_py"]


def usable(core: ModuleType | None) -> ModuleType | None:
    """``core`` when it has the word scan (an older build may not), else None."""
    return core if core is not None and hasattr(core, "scan_words") else None


# The core tables are compiled with; tests swap it to run both paths.
CORE = usable(_LOADED)


class WordTable:
    """A set of keys (UTF-8 words) and, with the compiled core, its C table."""

    __slots__ = ("_scan", "compiled", "keys")

    def __init__(self, keys: Iterable[bytes]) -> None:
        given = tuple(keys)
        for key in given:
            # Exact bytes only: a subclass's __hash__ or __eq__ is never run.
            if type(key) is not bytes:
                raise TypeError(f"a key must be bytes, not {type(key).__name__}")
        self.keys = frozenset(given)
        # The core that compiled the table is the one that reads it.
        self.compiled: Any = None if CORE is None else CORE.word_table(tuple(self.keys))
        self._scan: Any = None if CORE is None else CORE.scan_words

    def __reduce__(self) -> tuple[type[WordTable], tuple[tuple[bytes, ...]]]:
        # The C table is not picklable: a copy compiles its own.
        return (WordTable, (tuple(self.keys),))

    def __len__(self) -> int:
        return len(self.keys)


Found = tuple[dict[bytes, int], list[bytes] | None]


def scan(table: WordTable, tokens: bytes, want_odd: bool) -> Found:
    """The keys of ``table`` that are all-ASCII tokens of ``tokens`` -> first offset,
    and (``want_odd``) the distinct tokens holding a non-ASCII byte, in order."""
    if table.compiled is None or type(tokens) is not bytes:
        return scan_py(table.keys, tokens, want_odd)
    found: Found = table._scan(table.compiled, tokens, want_odd)
    return found


# A token: a run of bytes that bytes.split() keeps together.
_TOKEN = re.compile(rb"[^ \t\n\r\x0b\x0c]+")


def scan_py(keys: frozenset[bytes], tokens: bytes, want_odd: bool) -> Found:
    """What ``scan`` returns, computed in Python (the reference for the C scan)."""
    found: dict[bytes, int] = {}
    odd: dict[bytes, None] | None = {} if want_odd else None
    for match in _TOKEN.finditer(tokens):
        token = match.group()
        if not token.isascii():
            if odd is not None:
                odd.setdefault(token)
        elif token in keys and token not in found:
            found[token] = match.start()
    return found, None if odd is None else list(odd)
