"""The compiled chain hash against its Python twin: the same hash, or a refusal that hands
the row to the twin.

``sealed_py`` (``storable_py``, ``content_py``, ``link``) is the reference. The
C pass (``chain_link``) must give the hash of every row ``storable_py`` keeps,
byte for byte, and None for every other row, without running anything the row
holds; ``chain_text`` the same row's content text (what ``content`` and
``storable`` ask it), and None for the same rows.
Hashes already stored in users' files depend on it: chains written by either
path verify after the other appends.
"""

from __future__ import annotations

import gc
import hashlib
import math
import platform
import tracemalloc
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from guardrails.native._compiled import load
from guardrails.store import AUDIT_COLUMNS, AuditRow, SQLiteStore, sqlite
from guardrails.store._chain import GENESIS, content, content_py, link, sealed, sealed_py
from guardrails.store._storable import JSON_LIMIT, TEXT_LIMIT, core_plan, storable, storable_py
from guardrails.store.verify import verify
from tests._hostile import CALLS, LoudFloat, LoudInt, LoudStr, Unprintable
from tests._refcounts import SHARED, assert_kept, counts

CORE = load()  # the compiled core whatever GUARDRAILS_PURE chose for the stores
needs_compiled = pytest.mark.skipif(CORE is None, reason="the C extension was not built")


def _configure(native: bool) -> bool:
    assert CORE is not None
    return CORE.configure_chain(AuditRow, *core_plan(), hashlib.sha256, native)


@pytest.fixture(params=["native", "hashlib"], autouse=True)
def route(request: pytest.FixtureRequest) -> Any:
    """Each test of the C pass runs with the CPU's SHA extensions (where it has them) and
    with hashlib; the stores' own configuration is put back after."""
    if CORE is None:
        yield request.param
        return
    _configure(request.param == "native")
    yield request.param
    _configure(True)


@needs_compiled
def test_the_sha_extensions_hash_where_the_cpu_has_them() -> None:
    cpuinfo = Path("/proc/cpuinfo")
    flags = cpuinfo.read_text() if cpuinfo.exists() else ""
    has = platform.machine() == "x86_64" and " sha_ni" in flags and " sse4_1" in flags
    assert _configure(True) is has
    assert _configure(False) is False


@needs_compiled
def test_every_length_of_message_hashes_as_hashlib_does() -> None:
    assert CORE is not None
    row = AuditRow("tool_call", 1.0, "c1")
    for n in range(300):  # every padding case: the message ends anywhere in a block
        previous = "a" * n
        assert CORE.chain_link(row, previous, 7) == link(previous, 7, content_py(row))


class LoudRow(AuditRow):
    """An AuditRow subclass whose iteration counts; the twin may iterate it, C never does."""

    def __iter__(self) -> Any:
        CALLS["iter"] += 1
        return tuple.__iter__(self)


def _text(limit: int) -> st.SearchStrategy[str]:
    """Any text (lone surrogates, NUL, every plane) and plain text at and past ``limit``."""
    return st.one_of(
        st.text(max_size=20),
        st.text(st.characters(codec="ascii"), max_size=20),
        st.sampled_from(["é", "€", "😀", "\x00", "a\x00b", "\udc80", "x\ud800y", "ÿ"]),
        st.integers(min_value=limit - 2, max_value=limit + 2).map(lambda n: "é" * n),
        st.integers(min_value=limit - 2, max_value=limit + 2).map(lambda n: "x" * n),
    )


_NUMBERS = st.one_of(
    st.integers(min_value=-(2**63), max_value=2**63 - 1),
    st.sampled_from([2**63, -(2**63) - 1, 10**30, True, False]),
    st.floats(),  # nan, infinities, -0.0 and subnormals included
    st.sampled_from([0.0, -0.0, 5e-324, -2.2250738585072014e-308, 1e308, 0.1]),
)
_ODD_VALUES = (b"x", 1j, (), LoudStr("x"), LoudInt(1), LoudFloat(1.0), Unprintable())
_ODD = st.integers(0, len(_ODD_VALUES) - 1).map(_ODD_VALUES.__getitem__)  # never hashed


def _column(column: str) -> st.SearchStrategy[Any]:
    limit = (
        JSON_LIMIT
        if column in {"verdicts", "escapes", "detail", "error", "altered"}
        else TEXT_LIMIT
    )
    typical = (
        _NUMBERS
        if column in {"at", "cost", "duration_us", "tokens_in", "tokens_out"}
        else _text(limit)
    )
    return st.one_of(st.none(), typical, typical, _NUMBERS, _text(limit), _ODD)


def _rows() -> st.SearchStrategy[AuditRow]:
    plain = st.tuples(*(_column(c) for c in AUDIT_COLUMNS)).map(
        lambda values: AuditRow._make([*values, None])
    )
    # Half the rows are storable already, column by column, as nearly all rows are.
    storable_rows = plain.map(storable_py)
    return st.one_of(plain, storable_rows, storable_rows)


_HEX = st.text(st.characters(codec="ascii"), max_size=64)  # a stored hash is ASCII
_PREVIOUS = st.one_of(st.just(GENESIS), _HEX, _HEX, st.text(max_size=8))
_IDS = st.one_of(st.integers(min_value=1, max_value=2**63 - 1), st.sampled_from([0, -5, 2**64]))


def _same(a: tuple[AuditRow, str], b: tuple[AuditRow, str]) -> bool:
    """Rows equal column by column, by type and value (nan is nan), and the same hash."""
    return a[1] == b[1] and _same_row(a[0], b[0])


def _same_row(row_a: AuditRow, row_b: AuditRow) -> bool:
    return all(
        type(x) is type(y)
        and (x == y or (isinstance(x, float) and math.isnan(x) and math.isnan(y)))
        for x, y in zip(row_a, row_b, strict=True)
    )


@pytest.mark.slow
@needs_compiled
def test_the_compiled_hash_is_the_twins_and_it_refuses_exactly_what_storable_rewrites() -> None:
    reached: Counter[str] = Counter()

    @settings(
        max_examples=1500, deadline=None, suppress_health_check=list(HealthCheck)
    )  # every run: counted by the reach check
    @given(_rows(), _PREVIOUS, _IDS)
    def check(row: AuditRow, previous: str, row_id: int) -> None:
        assert CORE is not None
        CALLS.clear()
        twin = sealed_py(row, previous, row_id)
        digest = CORE.chain_link(row, previous, row_id)
        text = CORE.chain_text(row)
        kept = storable_py(row) is row
        assert (text is not None) is kept  # chain_text refuses exactly what storable rewrites
        assert (
            storable(row) is storable_py(row)
            if kept
            else _same_row(storable(row), storable_py(row))
        )
        if kept:
            assert text == content(row) == content_py(row)
        if digest is None:
            plain = previous.isascii() and -(2**63) <= row_id < 2**63
            # Refused: storable rewrites the row, or the hint is out of the C range.
            assert not kept or not plain
            reached["refused"] += 1
        else:
            assert kept
            assert digest == twin[1] == link(previous, row_id, content_py(row))
            reached["hashed"] += 1
            if any(type(v) is str and not v.isascii() for v in row):
                reached["hashed non-ASCII"] += 1
            if any(type(v) is float for v in row[1:]):
                reached["hashed floats"] += 1
        assert _same(sealed(row, previous, row_id), twin)
        assert not CALLS  # neither path ran a method of a value

    check()
    total = sum(reached[k] for k in ("hashed", "refused"))
    # Shares with room for hypothesis's draws, which vary from run to run.
    assert reached["hashed"] > total * 0.15 and reached["refused"] > total * 0.15, reached
    assert reached["hashed non-ASCII"] > total * 0.05, reached
    assert reached["hashed floats"] > total * 0.1, reached


# What the chain of users' files is made of: the content of fixed rows, and their
# hash as row 7 after a row hashed "ab" * 32, as every release so far has written them.
_KNOWN = [
    (
        AuditRow("tool_call", 1.0, "gr_0001", "acme", tool="lookup", duration_us=42, cost=-0.1),
        "s9:tool_call|f0x1.0000000000000p+0|s7:gr_0001|s4:acme|~|~|~|s6:lookup|~|~|~|~|~|i42|~|~"
        "|f-0x1.999999999999ap-4|~|~|~|~",
        "95afbf9c38b542c1261f5e4845f9a01b1c5da54c999e7016d21c9aeea8de6223",
    ),
    (
        AuditRow("paid_call", 5e-324, "é€😀", tokens_in=-(2**63), tokens_out=2**63 - 1),
        "s9:paid_call|f0x0.0000000000001p-1022|s3:é€😀|~|~|~|~|~|~|~|~|~|~|~"
        "|i-9223372036854775808|i9223372036854775807|~|~|~|~|~",
        "3b65b65953d3a9087ca30832a6253c8ad45719c68c993509a43327069762d70a",
    ),
]


@pytest.mark.parametrize(("row", "text", "digest"), _KNOWN)
def test_the_content_and_hash_of_known_rows_are_unchanged(
    row: AuditRow, text: str, digest: str
) -> None:
    assert content(row) == content_py(row) == text
    assert link("ab" * 32, 7, text) == sealed(row, "ab" * 32, 7)[1] == digest


@needs_compiled
@pytest.mark.parametrize(
    "row",
    [
        AuditRow(LoudStr("tool_call"), 1.0),
        AuditRow("tool_call", 1.0, LoudStr("x")),
        AuditRow("tool_call", 1.0, duration_us=LoudInt(3)),
        AuditRow("tool_call", LoudFloat(1.0)),
        AuditRow("tool_call", 1.0, cost=LoudFloat(2.0)),
        AuditRow("tool_call", 1.0, reason=Unprintable()),  # type: ignore[arg-type]
        LoudRow("tool_call", 1.0, "c1"),
    ],
    ids=["str kind", "str column", "int", "float at", "float cost", "object", "row subclass"],
)
def test_hostile_values_are_refused_in_c_and_handed_whole_to_the_twin(row: AuditRow) -> None:
    assert CORE is not None
    CALLS.clear()
    assert CORE.chain_link(row, "", 1) is None
    assert CORE.chain_text(row) is None
    assert not CALLS
    plain = sealed_py(AuditRow._make(tuple(row)), "", 1)
    assert _same(sealed(row, "", 1), plain)


@needs_compiled
@pytest.mark.parametrize(
    ("previous", "row_id"),
    [(LoudStr("ab"), 1), ("ab", LoudInt(1)), ("ab", True), ("é", 1), ("ab", 2**63)],
    ids=["str subclass hint", "int subclass id", "bool id", "non-ASCII hint", "id past 64 bits"],
)
def test_an_unusual_hint_is_refused_without_running_it(previous: str, row_id: int) -> None:
    assert CORE is not None
    CALLS.clear()
    assert CORE.chain_link(_KNOWN[0][0], previous, row_id) is None
    assert not CALLS


@needs_compiled
def test_a_wrongly_shaped_call_raises_instead_of_reading_past_the_row() -> None:
    assert CORE is not None
    with pytest.raises(TypeError):
        CORE.chain_link(_KNOWN[0][0], "")  # type: ignore[call-arg]
    with pytest.raises(TypeError):
        CORE.chain_text()  # type: ignore[call-arg]
    assert CORE.chain_link(tuple(_KNOWN[0][0]), "", 1) is None  # a plain tuple, not a row


def _append_all(store: SQLiteStore, rows: list[AuditRow]) -> None:
    for row in rows[:-2]:
        store.append(row)
    store.append_many(rows[-2:])


@pytest.mark.parametrize("first", ["python", "compiled"])
def test_a_chain_written_by_one_path_verifies_after_the_other_appends(
    tmp_path: Any, monkeypatch: pytest.MonkeyPatch, first: str
) -> None:
    rows = [row for row, _, _ in _KNOWN] + [
        AuditRow("tool_call", 2.5, "c\udc80", reason="\x00", detail="é" * (JSON_LIMIT + 1)),
        AuditRow("event", 3.0, "c3", tenant="t", verdicts="[]"),
        AuditRow("event", 4.0, "c4", cost=0.5),
    ]
    path = tmp_path / "audit.db"
    for turn in (first, "compiled" if first == "python" else "python"):
        with monkeypatch.context() as patch:
            if turn == "python":
                patch.setattr(sqlite, "sealed", sealed_py)
            with SQLiteStore(path) as store:
                _append_all(store, rows)
    with SQLiteStore(path) as store:
        found = verify(store)
        assert (found.ok, found.rows) == (True, 2 * len(rows))


_CASES = [row for row, _, _ in _KNOWN] + [
    AuditRow("tool_call", 1.0, "x" * 5000),  # too long: refused after writing
    AuditRow("tool_call", 1.0, "é" * 3000, detail="😀" * 3000),  # past the stack buffer
    AuditRow("tool_call", 1.0, reason="\udc80"),
    AuditRow("tool_call", math.inf),
    AuditRow("tool_call", 1.0, duration_us=2**70),
    AuditRow("tool_call", 1.0, reason=LoudStr("x")),
]


def _private(value: Any) -> Any:
    """``value`` as a new object that only the row holding it refers to.

    A constant or an interned string (``"acme"``, ``1.0``) is shared with the
    rest of the process: its count moves whenever another thread (a store
    thread of an earlier test finishing its pass) drops a row that held it.
    """
    if type(value) is str:
        return value.encode("utf-8", "surrogatepass").decode("utf-8", "surrogatepass")
    if type(value) is float:
        return float(repr(value))
    return value


def _hash_cases(times: int, cases: list[AuditRow] = _CASES) -> None:
    assert CORE is not None
    for _ in range(times):
        for row in cases:
            CORE.chain_link(row, "ab", 9)
            CORE.chain_text(row)


@pytest.mark.slow
@needs_compiled
def test_reference_counts_are_unchanged_after_many_calls() -> None:
    assert CORE is not None
    cases = [AuditRow(*(_private(v) for v in row)) for row in _CASES]
    # Only objects of the rows' own: not small ints or one-character strings (cached
    # by the interpreter), whose counts move with whatever else it does.
    probes = [
        v for row in cases for v in row if type(v) is float or (type(v) is str and len(v) > 1)
    ]
    probes += cases
    gc.collect()
    before = counts(probes)
    assert max(before) < SHARED  # nobody else holds them: every count is checked exactly
    _hash_cases(1000, cases)
    gc.collect()
    assert_kept(probes, before, 1000)


@pytest.mark.slow
@needs_compiled
def test_no_memory_is_kept_over_100000_calls() -> None:
    assert CORE is not None
    _hash_cases(1)
    gc.collect()
    tracemalloc.start()
    try:
        start, _ = tracemalloc.get_traced_memory()
        _hash_cases(100_000 // len(_CASES) + 1)
        gc.collect()
        end, _ = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert end - start < 64_000
