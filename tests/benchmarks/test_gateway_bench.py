"""The gateway benchmark runs against real processes and gives well-formed rows (timings unchecked)."""

from __future__ import annotations

import importlib
from pathlib import Path

import pytest

BENCHMARKS = Path(__file__).resolve().parents[2] / "benchmarks"


@pytest.mark.slow
def test_gateway_benchmark_rows_are_well_formed(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.syspath_prepend(str(BENCHMARKS))
    harness = importlib.import_module("_harness")
    bench = importlib.import_module("bench_gateway")
    monkeypatch.setattr(bench, "CALLS", 2)
    rows = bench.run(quick=True)
    for r in rows:
        harness.check_row(r)
    assert [(r["group"], r["name"]) for r in rows] == [
        ("gateway.stdio", "direct"),
        ("gateway.stdio", "through gateway"),
        ("gateway.stdio", "through gateway, budgeted"),
        ("gateway.http", "direct"),
        ("gateway.http", "through gateway"),
        ("gateway.concurrent", "direct, 8 clients"),
        ("gateway.concurrent", "through gateway, 8 clients"),
    ]
    assert all(r["ops_per_s"] > 0 for r in rows if r["group"] == "gateway.concurrent")
