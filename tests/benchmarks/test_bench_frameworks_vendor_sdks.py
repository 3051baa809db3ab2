"""The vendor-SDK adapter benchmark (Agent Framework, ADK, Claude Agent SDK) runs and gives well-formed rows. Timings are never checked."""

from __future__ import annotations

import importlib
from pathlib import Path

import pytest

BENCHMARKS = Path(__file__).resolve().parents[2] / "benchmarks"


@pytest.mark.slow
def test_framework_benchmark_rows_are_well_formed(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.syspath_prepend(str(BENCHMARKS))
    harness = importlib.import_module("_harness")
    monkeypatch.setattr(harness, "QUICK", harness.Budget(rounds=2, round_s=0.0002, max_n=3))
    bench = importlib.import_module("bench_frameworks_vendor_sdks")
    rows = bench.run(quick=True)
    assert sorted({r["group"] for r in rows}) == sorted(bench.FRAMEWORKS)
    for r in rows:
        harness.check_row(r)
        assert r["median_us"] is not None or r["note"].startswith("not installed")
    timed = [r for r in rows if r["median_us"] is not None]
    assert all(r["floor"] == next(iter(rows_of(rows, r["group"])))["name"] for r in timed)


def rows_of(rows: list[dict[str, object]], group: str) -> list[dict[str, object]]:
    return [r for r in rows if r["group"] == group]
