"""Call ids for the calls the model gave none: ``gr_``, a per-process random
prefix, and a counter.

The counter is written in hexadecimal as a block number followed by three
digits: each block of 4,096 ids is one string, ``gr_<prefix><block>``, joined
to the 4,096 three-digit suffixes made once at import. The suffix has a fixed
width, so two (block, suffix) pairs never make the same id; an id costs one
string concatenation instead of formatting an integer.

Unique across threads: every step of the chain is C code (``count``,
``format``, ``map``, ``str.__add__``), so no thread switches in the middle of
taking an id, and each block number is taken once. Unique across processes:
the prefix is 32 random bits, drawn again in a child after ``fork``, whose
ids would otherwise repeat the parent's.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from itertools import chain, count, repeat

__all__ = ["CALL_IDS", "ids", "new_call_id"]

_SUFFIXES = tuple(f"{i:03x}" for i in range(4096))


def ids() -> Iterator[str]:
    """A fresh stream of ids with a new random prefix."""
    head = "gr_" + os.urandom(4).hex()
    blocks = map(str.__add__, repeat(head), map(format, count(1), repeat("x")))
    joins = map(getattr, blocks, repeat("__add__"))
    return chain.from_iterable(map(map, joins, repeat(_SUFFIXES)))


CALL_IDS = ids()


def new_call_id() -> str:
    """The next generated id (the pipeline takes ``next(CALL_IDS)`` inline)."""
    return next(CALL_IDS)


def _after_fork() -> None:
    global CALL_IDS
    CALL_IDS = ids()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_after_fork)
