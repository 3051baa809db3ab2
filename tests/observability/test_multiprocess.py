"""Metrics from several worker processes (prometheus_client's multiprocess mode).

The same workload run by 1 process and by 4 real worker processes gives the
same coverage report and the same summed series, so the dashboard's queries
(sums over every label but the ones they keep) give the same answers.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from collections import defaultdict
from pathlib import Path

import pytest
from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.multiprocess import MultiProcessCollector
from prometheus_client.parser import text_string_to_metric_families

from guardrails.errors import ConfigurationError
from guardrails.observe.coverage import from_exposition
from guardrails.observe.metrics import PrometheusRecorder

WORKLOAD = Path(__file__).with_name("workload.py")
CALLS = 400


def run_workers(directory: Path, workers: int) -> str:
    env = {**os.environ, "PROMETHEUS_MULTIPROC_DIR": str(directory)}
    procs = [
        subprocess.Popen(
            [sys.executable, str(WORKLOAD), str(k), str(workers), str(CALLS)],
            env=env,
            stderr=subprocess.PIPE,
            text=True,
        )
        for k in range(workers)
    ]
    for p in procs:
        _, err = p.communicate(timeout=120)
        assert p.returncode == 0, err
    registry = CollectorRegistry()
    MultiProcessCollector(registry, path=str(directory))  # type: ignore[no-untyped-call]
    return generate_latest(registry).decode()


def summed(text: str) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    """Every guardrails sample summed over ``pid`` (what a dashboard sum sees)."""
    out: dict[tuple[str, tuple[tuple[str, str], ...]], float] = defaultdict(float)
    for family in text_string_to_metric_families(text):
        for s in family.samples:
            # Durations and times differ from run to run; their count does not.
            timed = s.name.endswith(("_bucket", "_sum", "_created", "_timestamp_seconds"))
            if s.name.startswith("guardrails_") and not timed:
                labels = tuple(sorted((k, v) for k, v in s.labels.items() if k != "pid"))
                out[(s.name, labels)] += s.value
    return dict(out)


@pytest.fixture(scope="module")
def expositions(tmp_path_factory: pytest.TempPathFactory) -> dict[int, str]:
    return {n: run_workers(tmp_path_factory.mktemp(f"workers{n}"), n) for n in (1, 4)}


@pytest.mark.slow
def test_four_workers_give_the_same_coverage_as_one(expositions: dict[int, str]) -> None:
    one, four = (from_exposition(expositions[n]) for n in (1, 4))
    assert one == four
    by_name = {g.guard: g for g in four.guards}
    assert by_name["idle"].registered and by_name["idle"].never_ran
    assert by_name["strict"].faults == {"raised": CALLS // 10}  # keys ending in 5
    assert sum(four.tools["lookup"].values()) + sum(four.tools["_unknown"].values()) == CALLS


@pytest.mark.slow
def test_four_workers_give_the_same_summed_series_as_one(expositions: dict[int, str]) -> None:
    one, four = (summed(expositions[n]) for n in (1, 4))
    assert one == four
    # The registered gauge is the max over workers: 1 per guard, not 4.
    registered = {k: v for k, v in four.items() if k[0] == "guardrails_guard_registered"}
    assert registered and set(registered.values()) == {1.0}
    # Series exist at zero from bind(): a never-called tool and a never-run guard.
    assert four[("guardrails_tool_outcomes_total", (("outcome", "ok"), ("tool", "unused")))] == 0
    # ... the recorder's own failures, and the calls of invented tools.
    assert four[("guardrails_telemetry_failures_total", (("recorder", "prometheus"),))] == 0
    unknown = (("outcome", "error"), ("tool", "_unknown"))  # never happens here
    assert four[("guardrails_tool_outcomes_total", unknown)] == 0


def test_the_latest_escape_and_fault_times_are_one_series_per_reason_not_per_worker(
    expositions: dict[int, str],
) -> None:
    latest: dict[str, list[tuple[dict[str, str], float]]] = defaultdict(list)
    for family in text_string_to_metric_families(expositions[4]):
        for s in family.samples:
            if s.name.endswith("_last_timestamp_seconds"):
                latest[s.name].append((s.labels, s.value))
    faults = latest["guardrails_fail_closed_fault_last_timestamp_seconds"]
    assert [labels for labels, _ in faults] == [
        {"guard": "strict", "choke_point": "tool_call", "reason": "raised"}
    ]  # the max over the workers: no pid label, one series
    escapes = latest["guardrails_fail_open_escape_last_timestamp_seconds"]
    assert escapes and all("pid" not in labels for labels, _ in escapes)
    # Unix times of this run (the workers ran within the last few minutes).
    assert all(abs(time.time() - at) < 3600 for _, at in faults + escapes)


def test_multiprocess_mode_without_the_directory_is_a_configuration_error(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv("PROMETHEUS_MULTIPROC_DIR", str(tmp_path / "missing"))
    with pytest.raises(ConfigurationError, match="PROMETHEUS_MULTIPROC_DIR"):
        PrometheusRecorder(CollectorRegistry())
    monkeypatch.setenv("PROMETHEUS_MULTIPROC_DIR", str(tmp_path))
    # Set after prometheus_client was imported: its values are not in files.
    with pytest.raises(ConfigurationError, match="before the process starts"):
        PrometheusRecorder(CollectorRegistry())


EXPLICIT = """
from prometheus_client import CollectorRegistry, generate_latest
from guardrails import Guardrails, tool
from guardrails.observe.metrics import PrometheusRecorder

@tool
def lookup(key: str) -> str:
    \"\"\"Look a key up.\"\"\"
    return key

registry = CollectorRegistry()
metrics = PrometheusRecorder(registry)
PrometheusRecorder(registry)  # a second recorder on it: one collector, no doubled series
rails = Guardrails([lookup], recorder=metrics)
rails.turn().call("lookup", {"key": "k"})
print(generate_latest(registry).decode())
"""


def test_an_explicit_registry_serves_the_workers_sum_in_multiprocess_mode(tmp_path: Path) -> None:
    env = {**os.environ, "PROMETHEUS_MULTIPROC_DIR": str(tmp_path)}
    done = subprocess.run(
        [sys.executable, "-c", EXPLICIT], env=env, capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    ok = 'guardrails_tool_outcomes_total{outcome="ok",tool="lookup"} 1.0'
    assert lines.count(ok) == 1
