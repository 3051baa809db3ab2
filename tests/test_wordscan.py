"""The C word scan against its reference, and against hostile callers.

``scan_py`` is the reference; ``scan_words`` (``guardrails/native/_csrc/triggers.c``)
must give the same keys, first offsets and odd tokens on any buffer.
"""

from __future__ import annotations

import contextlib
import datetime
import gc
import os
import pickle
import re
import sys
import threading
import tracemalloc
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from guardrails.native._compiled import load
from guardrails.text import _wordscan
from guardrails.text._wordscan import STARTS, WordTable, scan, scan_py
from tests._refcounts import assert_kept, counts

CORE = _wordscan.usable(load())
needs_compiled = pytest.mark.skipif(CORE is None, reason="the C extension was not built")


def test_the_word_scan_is_built_where_ci_requires_it() -> None:
    if os.environ.get("GUARDRAILS_REQUIRE_CCORE") == "1":
        assert CORE is not None
        pure = os.environ.get("GUARDRAILS_PURE") == "1"
        assert (_wordscan.CORE is None) is pure


def _compiled(keys: frozenset[bytes], tracked: frozenset[bytes] = frozenset()) -> Any:
    """A C table, whatever GUARDRAILS_PURE says (the tracked keys first)."""
    assert CORE is not None
    tracked = keys & tracked
    return CORE.word_table((*tracked, *(keys - tracked)), len(tracked))


def _reference(keys: frozenset[bytes], buffer: bytes, want_odd: bool, tracked: Any = ()) -> Any:
    return scan_py(WordTable(keys, tracked), buffer, want_odd)


# Bytes that matter to the walk: every kind of separator bytes.split() cuts at,
# bytes that look like separators and are not (\x1c-\x1f, \x85 and \xa0 are
# whitespace to str, not to bytes), ASCII letters, and UTF-8 lead and
# continuation bytes.
_BYTES = st.sampled_from(
    [
        b" ",
        b"\t",
        b"\n",
        b"\r",
        b"\x0b",
        b"\x0c",
        b"\x1c",
        b"\x1f",
        b"\x00",
        b"\x85",
        b"\xa0",
        b"a",
        b"b",
        b"ab",
        b"x",
        b"_",
        b"\xc3\xa9",
        b"\xe4\xb8\xad",
        b"\xf0\x9f\x98\x80",
        b"\xff",
    ]
)
_BUFFERS = st.lists(_BYTES, max_size=60).map(b"".join)
_KEYS = st.frozensets(st.sampled_from([b"a", b"b", b"ab", b"ba", b"x", b"\x00", b"", b"a\xc3\xa9"]))


@needs_compiled
@given(_KEYS, _BUFFERS, st.booleans(), _KEYS)
def test_the_c_scan_gives_what_the_reference_gives(
    keys: frozenset[bytes], buffer: bytes, want_odd: bool, tracked: frozenset[bytes]
) -> None:
    assert CORE is not None
    got = CORE.scan_words(_compiled(keys, tracked), buffer, want_odd)
    assert got == _reference(keys, buffer, want_odd, tracked)


@needs_compiled
@given(st.frozensets(st.binary(max_size=6), max_size=40), st.binary(max_size=300))
def test_any_bytes_and_keys_scan_as_the_reference_does(
    keys: frozenset[bytes], buffer: bytes
) -> None:
    # Keys are drawn from the buffer's own tokens too, so lookups succeed.
    keys |= frozenset(buffer.split()[::3])
    tracked = frozenset(list(keys)[::2])
    assert CORE is not None
    got = CORE.scan_words(_compiled(keys, tracked), buffer, True)
    assert got == _reference(keys, buffer, True, tracked)


@needs_compiled
def test_tokens_of_every_length_at_every_alignment_are_found() -> None:
    # The walk reads eight bytes at a time while eight remain: a token may
    # end anywhere in a word, hold a control byte (not a separator) anywhere,
    # or run to the end of the buffer.
    assert CORE is not None
    for length in range(1, 26):
        for odd_at in (None, 0, length // 2, length - 1):
            token = bytearray(b"abcdefghijklmnopqrstuvwxyz"[:length])
            if odd_at is not None:
                token[odd_at] = 0x01
            keys = frozenset({bytes(token), bytes(token[:-1])})
            table = _compiled(keys, keys)
            for pad in range(9):
                for tail in (b"", b" ", b"\t\xc3\xa9 q"):
                    buffer = b"y" * pad + b" " + bytes(token) + tail
                    got = CORE.scan_words(table, buffer, True)
                    assert got == _reference(keys, buffer, True, keys), (token, pad, tail)
                    assert bytes(token) in got[0]


def test_the_reference_reads_tokens_as_bytes_split_does() -> None:
    buffer = b" ab\tcd\x1c \xc3\xa9x ab \xc3\xa9x\n"
    found, odd, starts = _reference(frozenset({b"ab", b"cd\x1c", b"zz"}), buffer, True, [b"ab"])
    assert found == {b"ab": 1, b"cd\x1c": 4}
    assert odd == [b"\xc3\xa9x"]
    assert starts == {b"ab": [1, 12]}
    assert [t for t in buffer.split() if not t.isascii()] == [b"\xc3\xa9x", b"\xc3\xa9x"]


@needs_compiled
def test_many_keys_and_many_distinct_odd_tokens() -> None:
    keys = frozenset(f"k{i}".encode() for i in range(1, 60_000, 2)) | {b"k2", b"k4"}
    words = [f"k{i}" if i % 3 else f"é{i}" for i in range(0, 60_000, 2)]
    buffer = " ".join(words).encode()
    assert CORE is not None
    found, odd, _ = got = CORE.scan_words(_compiled(keys), buffer, True)
    assert got == _reference(keys, buffer, True)
    assert len(odd) == 10_000 and found.keys() == {b"k2", b"k4"}


@needs_compiled
def test_a_huge_buffer_and_a_huge_token() -> None:
    # Past the size where the walk lets other threads run.
    buffer = b"word " * 4_000_000 + b"refund " + "é".encode() * 2_000_000 + b" z" * 100
    keys = frozenset({b"refund", b"z", b"word"})
    found, odd, _ = scan(WordTable(keys), buffer, True)
    assert found == {b"word": 0, b"refund": 20_000_000, b"z": len(buffer) - 199}
    assert odd == ["é".encode() * 2_000_000]


# The walk's hash (hash_bytes in triggers.c), to build tokens that collide.
_M64, _MIX = 2**64 - 1, 0x9E3779B97F4A7C15


def _fast_hash(token: bytes) -> int:
    def step(h: int, w: int) -> int:
        h = ((h ^ w) * _MIX) & _M64
        return h ^ (h >> 32)

    h = _MIX
    for at in range(0, len(token), 8):
        h = step(h, int.from_bytes(token[at : at + 8], "little"))
    h = ((h ^ len(token)) * _MIX) & _M64
    h ^= h >> 29
    h = (h * _MIX) & _M64
    return h ^ (h >> 32)


def _colliding(stages: int) -> list[bytes]:
    """2**stages distinct odd tokens with one walk's hash: flipping the top
    bit of a word's last byte changes the state by a fixed difference, which
    flipping two top bits of the next word cancels, whatever came before."""
    a, b = b"\xc3abcdef\xe9", b"\xc3ghi\xeajk\xeb"
    a2 = bytes([*a[:7], a[7] ^ 0x80])
    b2 = bytes([*b[:3], b[3] ^ 0x80, *b[4:7], b[7] ^ 0x80])
    tokens = [b""]
    for _ in range(stages):
        tokens = [t + pair for t in tokens for pair in (a + b, a2 + b2)]
    return tokens


def test_odd_tokens_made_to_collide_are_all_kept() -> None:
    tokens = _colliding(12)
    assert len(set(tokens)) == 4_096 and len({_fast_hash(t) for t in tokens}) == 1
    buffer = b" ".join(tokens + tokens[::-1] + [b"refund"])
    found, odd, _ = scan(WordTable([b"refund"]), buffer, True)
    assert found == {b"refund": len(buffer) - 6}
    assert odd == tokens


def test_the_empty_buffer_and_the_empty_table() -> None:
    for table in (WordTable([]), WordTable([b"a"])):
        assert scan(table, b"", True) == ({}, [], {})
        assert scan(table, b"   ", False) == ({}, None, {})
    assert scan(WordTable([]), b"a b \xc3\xa9", True) == ({}, [b"\xc3\xa9"], {})


@needs_compiled
def test_threads_scanning_one_table_get_the_same_answer() -> None:
    table = WordTable({b"refund", b"card"})
    buffer = b"x " * 100_000 + b"refund " + b"\xc3\xa9t\xc3\xa9 " * 50_000 + b"card"
    expected = scan_py(table, buffer, True)
    results: list[object] = []

    def work() -> None:
        for _ in range(20):
            results.append(scan(table, buffer, True))

    threads = [threading.Thread(target=work) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert results == [expected] * 80


# -- hostile callers: typed errors, nothing foreign read ----------------------------


class Bytes(bytes):
    def split(self, *args: Any, **kwargs: Any) -> Any:
        raise AssertionError("a method of the caller's object was called")

    def __hash__(self) -> int:
        raise AssertionError("a method of the caller's object was called")


@needs_compiled
def test_the_c_scan_takes_exact_types_only() -> None:
    assert CORE is not None
    table = _compiled(frozenset({b"a"}))
    refused: list[tuple[Any, ...]] = [
        (table, Bytes(b"a"), True),
        (table, bytearray(b"a"), True),
        (table, memoryview(b"a"), True),
        (table, "a", True),
        (object(), b"a", True),
        (datetime.datetime_CAPI, b"a", True),  # a capsule of another name
        (table, b"a"),
        (table, b"a", True, True),
        (table, b"a", 1),
    ]
    for args in refused:
        with pytest.raises(TypeError):
            CORE.scan_words(*args)
    for keys in ([b"a"], (b"a", "a"), (Bytes(b"a"),), (b"a", bytearray(b"b")), None):
        with pytest.raises(TypeError):
            CORE.word_table(keys, 0)
    for args in [((b"a",),), ((b"a",), 0, 0), ((b"a",), True), ((b"a",), 1.0)]:
        with pytest.raises(TypeError):
            CORE.word_table(*args)
    for tracked in (-1, 2, 2**70):
        with pytest.raises((ValueError, OverflowError)):
            CORE.word_table((b"a",), tracked)


def test_a_table_takes_bytes_only() -> None:
    with pytest.raises(TypeError):
        WordTable([Bytes(b"a")])
    with pytest.raises(TypeError):
        WordTable(["a"])  # type: ignore[list-item]


def test_a_buffer_of_another_type_takes_the_reference() -> None:
    table = WordTable({b"a"})
    assert scan(table, bytearray(b"b a"), True) == ({b"a": 2}, [], {})  # type: ignore[arg-type]


@needs_compiled
def test_the_first_starts_occurrences_of_a_tracked_key_are_recorded() -> None:
    assert CORE is not None
    keys = frozenset({b"credit", b"card"})
    for count in (1, STARTS - 1, STARTS, STARTS + 1, 3 * STARTS):
        buffer = b"x credit card " * count + b"credit"
        got = CORE.scan_words(_compiled(keys, frozenset({b"credit"})), buffer, False)
        assert got == _reference(keys, buffer, False, [b"credit"])
        places = [m.start() for m in re.finditer(rb"credit", buffer)]
        assert got[2][b"credit"] == places[:STARTS]
        assert b"card" not in got[2]


def test_a_table_pickles_and_compiles_again() -> None:
    table = WordTable({b"refund", b"card"}, tracked=[b"card"])
    copy = pickle.loads(pickle.dumps(table))
    assert copy.keys == table.keys and copy.tracked == {b"card"}
    assert (copy.compiled is None) is (table.compiled is None)
    assert scan(copy, b"a card", True) == ({b"card": 2}, [], {b"card": [2]})


# -- reference counts and leaks ---------------------------------------------------


_KEY_OBJECTS = [b"refund", b"card", b"credit"]
_BUFFERS_SEEN = [
    b"",
    b"x " * 300 + b"refund card",
    b"\xc3\xa9 refund \xc3\xa9 x",
    b"card " * 20_000,
]


@needs_compiled
@pytest.mark.slow
def test_reference_counts_are_unchanged_after_many_scans() -> None:
    assert CORE is not None
    keys = tuple(_KEY_OBJECTS)
    table = CORE.word_table(keys, 1)
    probes = [*_KEY_OBJECTS, keys, *_BUFFERS_SEEN[1:]]  # b"" is shared by everyone
    gc.collect()  # what earlier tests left for the collector
    before = counts(probes)
    for _ in range(1_000):
        for buffer in _BUFFERS_SEEN:
            CORE.scan_words(table, buffer, True)
            CORE.scan_words(table, buffer, False)
        with contextlib.suppress(TypeError):
            CORE.scan_words(table, "text", True)
    del buffer  # the loop's name held the last one
    gc.collect()
    assert_kept(probes, before, 1000)
    assert sys.getrefcount(table) == 2  # this name, and the call's argument
    held = sys.getrefcount(keys)
    del table
    gc.collect()
    assert sys.getrefcount(keys) == held - 1  # the table let its keys go


@needs_compiled
@pytest.mark.slow
def test_no_memory_is_kept_over_100000_scans_and_tables() -> None:
    assert CORE is not None
    keys = tuple(_KEY_OBJECTS)

    def round_() -> None:
        table = CORE.word_table(keys, 2)
        for buffer in _BUFFERS_SEEN[:3]:
            CORE.scan_words(table, buffer, True)
        with contextlib.suppress(TypeError):
            CORE.word_table([b"x"], 0)

    round_()
    gc.collect()
    tracemalloc.start()
    try:
        start, _ = tracemalloc.get_traced_memory()
        for _ in range(100_000 // 4):
            round_()
        gc.collect()
        end, _ = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert end - start < 64_000  # one object kept per call would be megabytes
