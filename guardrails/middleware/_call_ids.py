"""Call ids for the calls the model gave none: ``gr_``, a per-process random
prefix, and a counter.

The counter is written in hexadecimal as a block number followed by three
digits: each block of 4,096 ids is one string, ``gr_<prefix><block>``, joined
to the 4,096 three-digit suffixes made once at import. The suffix has a fixed
width, so two (block, suffix) pairs never make the same id; an id costs one
string concatenation instead of formatting an integer.

Unique across threads: every step is C code (``count``, ``format``,
``map``, ``repeat``, ``str.__add__``) and each block number is taken once.
The join is ``str.__add__`` with the block string from ``repeat``, not the
block string's bound ``__add__``: a thread switch inside the join (a
collection running a finalizer) may let another thread use up the block and
free its ``map``, and then nothing of that ``map`` is still in use; the
arguments of the join are held by the call itself. Unique across processes:
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
    joined = map(map, repeat(str.__add__), map(repeat, blocks), repeat(_SUFFIXES))
    return chain.from_iterable(joined)


CALL_IDS = ids()


def new_call_id() -> str:
    """The next generated id (the pipeline takes ``next(CALL_IDS)`` inline)."""
    return next(CALL_IDS)


def _after_fork() -> None:
    global CALL_IDS
    CALL_IDS = ids()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_after_fork)
