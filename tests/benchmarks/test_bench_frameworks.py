"""The framework-adapter benchmark (Agents SDK, LangChain, pydantic-ai) runs and gives
well-formed rows. Timings are never checked."""

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
    bench = importlib.import_module("bench_frameworks")
    rows = bench.run(quick=True)
    groups = {r["group"] for r in rows}
    assert len(groups) == len(bench.FRAMEWORKS) * len(bench.CALLS)
    for r in rows:
        harness.check_row(r)
    for group in groups:
        names = [r["name"] for r in rows if r["group"] == group]
        assert names == [bench.UNGUARDED, bench.GUARDED] or names == ["not installed"]
