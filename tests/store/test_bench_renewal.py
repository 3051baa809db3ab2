"""The renewal benchmark runs and gives well-formed rows (timings are never checked)."""

from __future__ import annotations

import importlib
from pathlib import Path

import pytest

BENCHMARKS = Path(__file__).resolve().parents[2] / "benchmarks"


def test_each_store_is_renewed_both_ways_and_every_lease_is_counted(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.syspath_prepend(str(BENCHMARKS))
    harness = importlib.import_module("_harness")
    bench = importlib.import_module("bench_renewal")
    rows = bench.run(quick=True)  # raises if a pass renewed other than every lease
    for found in rows:
        harness.check_row(found)
        assert found["pass_ms"] >= 0
    groups = sorted({r["group"] for r in rows})
    assert {"renewal.memory", "renewal.sqlite"} <= set(groups)
    for group in groups:
        one, at_once = (r for r in rows if r["group"] == group)
        assert one["name"] == "200 holders, 2 leases each, one by one"
        assert at_once["name"] == "200 holders, 2 leases each, all at once (renew_leases_of)"
        assert at_once["ratio"] > 0
