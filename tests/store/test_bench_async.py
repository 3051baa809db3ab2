"""The async benchmark runs and gives well-formed rows (timings are never checked)."""

from __future__ import annotations

import importlib
import os
from pathlib import Path

import pytest

from guardrails.store import SQLiteStore

BENCHMARKS = Path(__file__).resolve().parents[2] / "benchmarks"


def test_the_async_workload_passes_every_call_and_reports_throughput_and_lag(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.syspath_prepend(str(BENCHMARKS))
    harness = importlib.import_module("_harness")
    bench = importlib.import_module("bench_async")
    rows = bench._measure("async.sqlite", lambda: SQLiteStore(os.path.join(tmp_path, "a.db")), True)
    for row in rows:
        harness.check_row(row)
    concurrent, sequential = rows
    assert concurrent["name"] == "200 concurrent acall (audited, budgeted)"
    assert sequential["name"] == "200 sequential sync call (one thread)"
    assert {
        "calls_per_s",
        "worst_loop_lag_ms",
        "worst_lag_while_running_ms",
        "longest_step_ms",
    } <= set(concurrent)


def test_the_bare_floor_is_measured_the_same_way(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.syspath_prepend(str(BENCHMARKS))
    harness = importlib.import_module("_harness")
    bench = importlib.import_module("bench_async")
    (floor,) = bench._floor(True)
    harness.check_row(floor)
    assert floor["group"] == "async.bare"
    assert floor["name"] == "200 concurrent bare async def calls"
    assert floor["worst_lag_while_running_ms"] <= floor["worst_loop_lag_ms"]


def test_the_objects_of_calls_in_flight_are_counted_at_both_waits(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.syspath_prepend(str(BENCHMARKS))
    bench = importlib.import_module("bench_async")
    counted = bench.in_flight(200)
    assert set(counted) == {"waiting for the reservation", "waiting in the tool"}
    # Each call in flight holds at least its task and its coroutines, and at most
    # the 23 tracked objects measured when they were cut from 29-39: every one
    # more is scanned by each full collection, a thousand times over in a burst.
    assert all(6 <= per_call <= 25 for per_call in counted.values()), counted
