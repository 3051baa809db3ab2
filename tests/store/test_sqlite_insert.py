"""SQLite's audit INSERT with its NULL columns in the statement: the compiled split of a row
against its Python twin, and rows of every shape stored as they were given.

``params_py`` is the reference; the C split (``sqlite_params``) must give the same
bits and the same objects, read nothing of a value but its identity with None, and
hand anything that is not an ``AuditRow`` back (None). Through the store, a row reads
back column for column as it was appended whatever its NULL columns, past the table of
statements too, and the chain verifies.
"""

from __future__ import annotations

import gc
import hashlib
import sys
import tracemalloc
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from guardrails.native._compiled import load
from guardrails.store import AUDIT_COLUMNS, AuditRow, SQLiteStore, _sqlite_insert
from guardrails.store._sqlite_insert import INSERT, insert, params_py
from guardrails.store._storable import core_plan, storable
from guardrails.store.verify import verify
from tests._examples import examples
from tests._hostile import CALLS, LoudStr, Shifty

CORE = load()  # the compiled core whatever GUARDRAILS_PURE chose for the stores
needs_compiled = pytest.mark.skipif(CORE is None, reason="the C extension was not built")


@pytest.fixture(autouse=True)
def _configured() -> None:
    """The core configured as the stores configure it (with GUARDRAILS_PURE=1 they do not)."""
    if CORE is not None:
        CORE.configure_chain(AuditRow, *core_plan(), hashlib.sha256, True)


_ODD_VALUES = (LoudStr("x"), Shifty(), b"NULL", "NULL", "?", "'); DROP TABLE x; --")
_VALUES = st.one_of(
    st.none(),
    st.none(),
    st.text(max_size=8),
    st.integers(),
    st.floats(),
    st.integers(0, len(_ODD_VALUES) - 1).map(_ODD_VALUES.__getitem__),  # never hashed
)


def _row(values: list[Any]) -> AuditRow:
    return AuditRow._make([*values, None])


@pytest.mark.slow
@needs_compiled
def test_the_compiled_split_is_the_twins_and_runs_nothing_of_a_value() -> None:
    @settings(max_examples=examples(800), deadline=None, suppress_health_check=list(HealthCheck))
    @given(st.lists(_VALUES, min_size=len(AUDIT_COLUMNS), max_size=len(AUDIT_COLUMNS)))
    def check(values: list[Any]) -> None:
        assert CORE is not None
        row = _row(values)
        CALLS.clear()
        split = CORE.sqlite_params(row, 7, "d" * 64)
        assert not CALLS
        assert split is not None
        twin = params_py(row, 7, "d" * 64)
        assert split[0] == twin[0]
        assert len(split[1]) == len(twin[1])
        assert all(a is b for a, b in zip(split[1], twin[1], strict=True))
        assert not CALLS

    check()


def test_the_twin_names_each_null_column_by_its_bit() -> None:
    row = AuditRow("tool_call", 1.0, "c1", tool="lookup", duration_us=3)
    nulls, params = params_py(row, 9, "h")
    assert params == (9, "tool_call", 1.0, "c1", "lookup", 3, "h")
    named = [c for i, c in enumerate(AUDIT_COLUMNS) if nulls >> i & 1]
    assert named == [c for c, v in zip(AUDIT_COLUMNS, row, strict=False) if v is None]
    assert params_py(AuditRow("k", 1.0, *("x" for _ in AUDIT_COLUMNS[2:])), 1, "h")[0] == 0


@needs_compiled
def test_anything_but_an_audit_row_is_handed_back() -> None:
    assert CORE is not None

    class Row(AuditRow):
        pass

    row = AuditRow("tool_call", 1.0)
    assert CORE.sqlite_params(tuple(row), 1, "h") is None
    assert CORE.sqlite_params(Row._make(row), 1, "h") is None
    with pytest.raises(TypeError):
        CORE.sqlite_params(row, 1)  # type: ignore[call-arg]


def test_a_statement_is_built_from_the_null_bits_alone(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(_sqlite_insert, "_statements", {0: INSERT})  # room for its shape
    row = AuditRow("tool_call", 1.0, "NULL", tenant="?", reason="'); DROP TABLE x; --")
    sql, params = insert(row, 3, "h")
    assert "DROP" not in sql and sql.count("?") == len(params)
    assert sql.count("NULL") == sum(v is None for v in row[:-1])
    assert sql.count("?") == len(params) == 2 + sum(v is not None for v in row[:-1])


def test_past_the_table_of_statements_a_row_binds_every_column(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(_sqlite_insert, "_statements", {0: INSERT})
    for nulls in range(1, _sqlite_insert._STATEMENTS_KEPT + 5):
        _sqlite_insert._statement(nulls)
    assert len(_sqlite_insert._statements) == _sqlite_insert._STATEMENTS_KEPT
    row = AuditRow("tool_call", 1.0, "c1", tool="t")
    assert insert(row, 3, "h") == (INSERT, (3, *row[:-1], "h"))


@pytest.mark.parametrize("route", ["compiled", "python"])
def test_rows_of_every_shape_read_back_as_appended_and_the_chain_verifies(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, route: str
) -> None:
    if route == "python":
        monkeypatch.setattr(_sqlite_insert, "_params", lambda row, row_id, digest: None)
    # More sets of NULL columns than the table of statements keeps: the rest bind them all.
    monkeypatch.setattr(_sqlite_insert, "_statements", {0: INSERT})
    shapes = _sqlite_insert._STATEMENTS_KEPT + 20
    rows = []
    for n in range(shapes):
        values: list[Any] = ["tool_call", float(n)]
        for i, column in enumerate(AUDIT_COLUMNS[2:]):
            if n >> (i % 7) & 1 or column == "altered":
                values.append(None)
            elif column in {"duration_us", "tokens_in", "tokens_out"}:
                values.append(n * 10 + i)
            elif column == "cost":
                values.append(n / 8)
            else:
                values.append(f"{column}-{n}" if i % 3 else "NULL")
        rows.append(_row(values[: len(AUDIT_COLUMNS)]))
    rows += [_row(["tool_call", 9.0, "c", *([None] * (len(AUDIT_COLUMNS) - 3))])] * 3
    with SQLiteStore(tmp_path / "audit.db") as store:
        ids = [store.append(row) for row in rows]
        assert ids == list(range(1, len(rows) + 1))
        stored = store.audit_rows(limit=len(rows))
        assert [r._replace(id=None) for r in stored] == rows
        assert [r.id for r in stored] == ids
        assert verify(store).ok
    assert len(_sqlite_insert._statements) <= _sqlite_insert._STATEMENTS_KEPT


def test_a_hostile_row_is_made_storable_before_it_is_split(tmp_path: Path) -> None:
    row = AuditRow("tool_call", 1.0, LoudStr("c1"), reason=Shifty())  # type: ignore[arg-type]
    with SQLiteStore(tmp_path / "audit.db") as store:
        CALLS.clear()
        store.append(row)
        assert not CALLS
        (stored,) = store.audit_rows()
        assert stored._replace(id=None) == storable(row)
        assert stored.call_id == "c1" and stored.reason == "<not text: Shifty>"
        assert verify(store).ok


_SPLIT = [
    AuditRow("tool_call", 1.0, "c1", tool="lookup", duration_us=3),
    AuditRow("tool_call", 2.0, *("x" * i for i in range(1, len(AUDIT_COLUMNS) - 1))),
    AuditRow("tool_call", 3.5),
]


def _split(times: int) -> None:
    assert CORE is not None
    for _ in range(times):
        for row in _SPLIT:
            CORE.sqlite_params(row, 12345678, "digest")
        CORE.sqlite_params(tuple(_SPLIT[0]), 1, "d")


@pytest.mark.slow
@needs_compiled
def test_reference_counts_and_memory_are_unchanged_after_many_splits() -> None:
    probes = [v for row in _SPLIT for v in row if type(v) in (str, float)] + _SPLIT
    _split(1)
    gc.collect()
    before = [sys.getrefcount(p) for p in probes]
    tracemalloc.start()
    try:
        start, _ = tracemalloc.get_traced_memory()
        _split(100_000 // len(_SPLIT))
        gc.collect()
        end, _ = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert [sys.getrefcount(p) for p in probes] == before
    assert end - start < 64_000
