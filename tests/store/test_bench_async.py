"""The async benchmark runs and gives well-formed rows (timings are never checked)."""

from __future__ import annotations

import asyncio
import importlib
import os
import time
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
    at_once, arriving, sequential = rows
    assert at_once["name"] == "200 concurrent acall (audited, budgeted)"
    assert arriving["name"] == (
        "200 concurrent acall (audited, budgeted), arriving 100 per iteration"
    )
    assert sequential["name"] == "200 sequential sync call (one thread)"
    for concurrent in (at_once, arriving):
        assert {
            "calls_per_s",
            "worst_loop_lag_ms",
            "worst_lag_while_running_ms",
            "longest_step_ms",
            "first_tick_lag_ms",
            "worst_lag_after_first_tick_ms",
        } <= set(concurrent)
        assert concurrent["neighbour_worst_lag_ms"] is None  # no neighbour was started


def test_the_bare_floor_is_measured_the_same_way(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.syspath_prepend(str(BENCHMARKS))
    harness = importlib.import_module("_harness")
    bench = importlib.import_module("bench_async")
    at_once, arriving = bench._floor(True)
    for floor in (at_once, arriving):
        harness.check_row(floor)
        assert floor["group"] == "async.bare"
        assert floor["worst_lag_while_running_ms"] <= floor["worst_loop_lag_ms"]
    assert at_once["name"] == "200 concurrent bare async def calls"
    assert arriving["name"] == "200 concurrent bare async def calls, arriving 100 per iteration"


def test_the_first_tick_is_taken_apart_for_three_kinds_of_calls(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.syspath_prepend(str(BENCHMARKS))
    harness = importlib.import_module("_harness")
    bench = importlib.import_module("bench_async")
    rows = bench.first_steps(quick=True)
    for found in rows:
        harness.check_row(found)
        assert found["group"] == "async.first_steps"
        assert found["tasks_made_ms"] > 0 and found["first_steps_ms"] > 0
        assert found["worst_first_steps_ms"] >= found["first_steps_ms"]
    assert [r["name"].split(": ", 1)[1] for r in rows] == [
        "bare async def (runs to its end)",
        "async def that yields once",
        "guarded acall (SQLite, audited, budgeted)",
    ]


def test_the_calls_arriving_are_all_in_flight_together(monkeypatch: pytest.MonkeyPatch) -> None:
    """Started a few per iteration, every call is started before any is awaited to
    its end: calls that each wait for the last one to start all finish."""
    monkeypatch.syspath_prepend(str(BENCHMARKS))
    bench = importlib.import_module("bench_async")
    started: list[int] = []
    everyone = asyncio.Event()

    async def call(index: int) -> int:
        started.append(index)
        if len(started) == 50:
            everyone.set()
        await everyone.wait()
        return index

    async def arriving() -> list[int]:
        coros = [call(i) for i in range(50)]
        return list(await asyncio.wait_for(bench._arriving(coros, 10), timeout=10))

    assert asyncio.run(arriving()) == list(range(50))
    assert started == list(range(50))


def test_the_neighbour_reports_its_lateness_in_a_window_and_is_stopped(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.syspath_prepend(str(BENCHMARKS))
    bench = importlib.import_module("bench_async")
    with bench.neighbour() as neighbour:
        start = time.monotonic()
        time.sleep(0.05)
        worst = neighbour.worst(start, time.monotonic())
        assert worst >= 0.0
        assert neighbour.worst(0.0, 0.0) == 0.0  # a window with no wake-up in it
        process = neighbour.process
    assert process.poll() is not None  # stopped at the end of the block


@pytest.mark.slow
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
