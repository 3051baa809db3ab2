"""The PostgreSQL async-path benchmark runs on both paths and gives well-formed rows."""

from __future__ import annotations

import importlib
from pathlib import Path

import pytest

BENCHMARKS = Path(__file__).resolve().parents[2] / "benchmarks"

pytestmark = pytest.mark.postgres


@pytest.mark.parametrize("path", ["threads", "async pool"])
def test_the_store_work_of_concurrent_tasks_is_complete_and_reported(
    monkeypatch: pytest.MonkeyPatch, pg_dsn: str, path: str
) -> None:
    monkeypatch.syspath_prepend(str(BENCHMARKS))
    harness = importlib.import_module("_harness")
    bench = importlib.import_module("bench_pg_async")
    work = bench._threads if path == "threads" else bench._async_pool
    # _measure raises unless every reservation was settled and every row written.
    row = bench._measure(pg_dsn, path, work, True)
    harness.check_row(row)
    assert row["name"] == f"200 concurrent tasks, {path}"
    assert {"calls_per_s", "worst_loop_lag_ms"} <= set(row)
