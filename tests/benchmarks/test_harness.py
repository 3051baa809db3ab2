"""The benchmark harness runs and produces well-formed rows. Timings are never checked."""

from __future__ import annotations

import importlib
import json
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

BENCHMARKS = Path(__file__).resolve().parents[2] / "benchmarks"


@pytest.fixture
def harness(monkeypatch: pytest.MonkeyPatch) -> ModuleType:
    monkeypatch.syspath_prepend(str(BENCHMARKS))
    module = importlib.import_module("_harness")
    # A tiny quick mode: one round of a few calls per case.
    monkeypatch.setattr(module, "QUICK", module.Budget(rounds=2, round_s=0.0002, max_n=50))
    return module


def test_compare_gives_a_row_per_case_with_ratio_to_the_floor(harness: ModuleType) -> None:
    def bare() -> int:
        return 1

    async def awaited() -> int:
        return 1

    rows = harness.compare(
        "g",
        {"bare": bare, "twice": lambda: bare() + bare(), "async": awaited},
        floor="bare",
        quick=True,
    )

    assert [r["name"] for r in rows] == ["bare", "twice", "async"]
    for r in rows:
        harness.check_row(r)
        assert r["group"] == "g"
        assert r["median_us"] > 0
        assert r["rounds"] == 2
    assert rows[0]["ratio"] == 1.0
    assert rows[0]["added_us"] == 0.0


def test_compare_rejects_a_floor_that_is_not_a_case(harness: ModuleType) -> None:
    with pytest.raises(ValueError, match="floor"):
        harness.compare("g", {"a": lambda: None}, floor="b", quick=True)


@pytest.mark.parametrize(
    "bad",
    [
        {"name": "x", "median_us": 1.0},
        {"group": "g", "name": "x", "median_us": -1.0},
        {"group": "g", "name": "x", "median_us": "fast"},
        {"group": "g", "name": "x", "median_us": 1.0, "ratio": "2x"},
    ],
)
def test_check_row_rejects_malformed_rows(harness: ModuleType, bad: dict[str, Any]) -> None:
    with pytest.raises(ValueError):
        harness.check_row(bad)


@pytest.mark.slow
def test_pipeline_benchmark_rows_are_well_formed(harness: ModuleType) -> None:
    bench = importlib.import_module("bench_pipeline")

    rows = bench.run(quick=True)

    names = {(r["group"], r["name"]) for r in rows}
    assert ("pipeline", "valid, MemoryRecorder") in names
    assert ("pipeline", "rejected: invalid_args (schema)") in names
    for r in rows:
        harness.check_row(r)


def test_extract_benchmark_rows_are_well_formed(
    harness: ModuleType, monkeypatch: pytest.MonkeyPatch
) -> None:
    bench = importlib.import_module("bench_extract")
    monkeypatch.setattr(bench, "SIZES", {"1 KB": 1_000, "2 KB": 2_000})

    rows = bench.run(quick=True)

    assert len(rows) == 2 * (len(bench.HOSTILE) + 1)
    for r in rows:
        harness.check_row(r)
        assert r["floor_us"] > 0 and r["ratio"] > 0 and r["us_per_kb"] > 0
    assert {r["growth"] for r in rows if r["group"] == "extract: 1 KB"} == {1.0}


def test_runner_finds_every_bench_module_and_writes_markdown_and_json(
    harness: ModuleType, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "bench_ok.py").write_text(
        "from _harness import compare\n"
        "def run(quick=False):\n"
        "    return compare('tiny', {'bare': lambda: None, 'more': lambda: [1]}, floor='bare', quick=quick)\n"
    )
    (tmp_path / "bench_broken.py").write_text(
        "def run(quick=False):\n    raise RuntimeError('boom')\n"
    )
    (tmp_path / "helper.py").write_text("raise AssertionError('not a benchmark')\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    runner = importlib.import_module("run")

    names = runner.discover(tmp_path)
    rows, errors, _ = runner.run_modules(names, quick=True, directory=tmp_path)
    table = runner.markdown(rows)

    assert names == ["bench_broken", "bench_ok"]
    assert [e["module"] for e in errors] == ["bench_broken"]
    assert {r["name"] for r in rows} == {"bare", "more"}
    assert "### tiny" in table and "| bare |" in table
    json.dumps(rows)
    for name in names:
        sys.modules.pop(name, None)


@pytest.mark.slow
def test_runner_main_writes_results_with_machine_and_versions(
    harness: ModuleType, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    runner = importlib.import_module("run")

    status = runner.main(["--quick", "--only", "bench_pipeline", "--out", str(tmp_path)])

    assert status == 0
    raw = json.loads((tmp_path / "quick.json").read_text())
    assert raw["meta"]["machine"]["python"] == sys.version.split()[0]
    assert raw["meta"]["packages"]["pydantic"]
    assert raw["rows"] and raw["errors"] == []
    assert "### pipeline" in (tmp_path / "quick.md").read_text()


def test_splice_replaces_only_the_text_between_markers(harness: ModuleType) -> None:
    runner = importlib.import_module("run")
    document = "intro\n<!-- results:start -->\nold\n<!-- results:end -->\noutro\n"

    spliced = runner.splice(document, "results", "new table\n")

    assert spliced == "intro\n<!-- results:start -->\nnew table\n<!-- results:end -->\noutro\n"
    with pytest.raises(ValueError, match="markers"):
        runner.splice("no markers", "results", "x")


@pytest.mark.slow
def test_peer_benchmark_rows_are_well_formed_with_or_without_the_peers(harness: ModuleType) -> None:
    bench = importlib.import_module("bench_peers")

    rows = bench.run(quick=True)

    groups = {r["group"] for r in rows}
    assert groups == set(bench.ARGUMENTS)
    for r in rows:
        harness.check_row(r)
        # A peer that is not installed gets a row with no figure and the reason.
        assert r["median_us"] is not None or "not installed" in r["note"]


@pytest.mark.slow
def test_scaling_benchmark_rows_are_well_formed(
    harness: ModuleType, monkeypatch: pytest.MonkeyPatch
) -> None:
    bench = importlib.import_module("bench_scaling")
    monkeypatch.setattr(bench, "TOOL_COUNTS", (2, 3))
    monkeypatch.setattr(bench, "GUARD_COUNTS", (0, 1, 2))
    monkeypatch.setattr(bench, "PROPERTY_COUNTS", (5,))
    monkeypatch.setattr(bench, "THROUGHPUT_CALLS", 200)

    rows = bench.run(quick=True)

    names = {r["name"] for r in rows}
    assert {"3 tools", "2 guards", "5 properties: pipeline, valid"} <= names
    assert {"valid calls, 2 threads", "valid calls, 2 processes"} <= names
    for r in rows:
        harness.check_row(r)
