"""The audit benchmark runs and gives well-formed rows (timings are never checked)."""

from __future__ import annotations

import importlib
from pathlib import Path

import pytest

BENCHMARKS = Path(__file__).resolve().parents[2] / "benchmarks"


def test_the_sqlite_group_compares_the_store_and_audited_calls_to_a_bare_insert(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.syspath_prepend(str(BENCHMARKS))
    harness = importlib.import_module("_harness")
    monkeypatch.setattr(harness, "QUICK", harness.Budget(rounds=2, round_s=0.0002, max_n=20))
    bench = importlib.import_module("bench_audit")
    rows = bench._sqlite(quick=True)
    for row in rows:
        harness.check_row(row)
    assert [r["name"] for r in rows] == [
        "bare INSERT (WAL, commit per row)",
        "bare INSERT, NULL columns in the statement",
        "SQLiteStore.append",
        "SQLiteStore.append, head moved by another writer",
        "guarded call, no audit",
        "guarded call + AuditLog, a store that keeps nothing",
        "guarded call + AuditLog (audited call)",
    ]
    assert rows[0]["ratio"] == 1.0


@pytest.mark.postgres
def test_the_statement_group_reads_the_servers_time_of_each_statement(
    monkeypatch: pytest.MonkeyPatch, pg_dsn: str
) -> None:
    monkeypatch.syspath_prepend(str(BENCHMARKS))
    harness = importlib.import_module("_harness")
    bench = importlib.import_module("bench_audit")
    rows = bench._statements(pg_dsn, quick=True)
    for row in rows:
        harness.check_row(row)
        assert row["median_us"] > 0
    assert [r["name"] for r in rows] == [
        "bare INSERT",
        "append, head as last seen (the client's hash)",
        "the same row through the statement for a moved hint, head as last seen "
        "(the previous single-row append)",
        "append, head moved (hashed in SQL after the locked head)",
        "append_many of 8 rows, head as last seen (the client's hashes), per row",
    ]


@pytest.mark.postgres
def test_the_threads_group_counts_calls_of_forty_threads_on_four_connections(
    monkeypatch: pytest.MonkeyPatch, pg_dsn: str
) -> None:
    monkeypatch.syspath_prepend(str(BENCHMARKS))
    harness = importlib.import_module("_harness")
    bench = importlib.import_module("bench_audit")
    rows = bench._threads(pg_dsn, quick=True)
    for row in rows:
        harness.check_row(row)
        assert row["ops_per_s"] > 0 and row["fewest_calls_of_a_thread"] > 0
    assert [r["name"] for r in rows] == [
        "incr of its own counter, 40 threads, max_size=4",
        "append, 40 threads, max_size=4",
        "incr of its own counter, 36 threads, max_size=4, 4 more threads idle after one call each",
        "append, 36 threads, max_size=4, 4 more threads idle after one call each",
    ]
