"""Latency per tool call: the whole call, and the time its guards took together."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from prometheus_client import CollectorRegistry
from prometheus_client.parser import text_string_to_metric_families

from guardrails import Guardrails, Verdict, guard, tool
from guardrails.observe.metrics import PrometheusRecorder


@tool
def slow(key: str) -> str:
    """Sleep 20 ms."""
    time.sleep(0.02)
    return key


@guard
def patient(call: Any) -> Verdict:
    time.sleep(0.002)
    return Verdict.PASS


def histogram(text: str, family: str, tool: str) -> tuple[dict[str, float], float, float]:
    buckets, total, count = {}, 0.0, 0.0
    for f in text_string_to_metric_families(text):
        for s in f.samples:
            if s.labels.get("tool") != tool:
                continue
            if s.name == f"{family}_bucket":
                buckets[s.labels["le"]] = s.value
            elif s.name == f"{family}_sum":
                total = s.value
            elif s.name == f"{family}_count":
                count = s.value
    return buckets, total, count


def test_a_call_is_observed_whole_and_in_its_guards_and_every_tool_starts_at_zero(
    registry: CollectorRegistry, scrape: Callable[[], str]
) -> None:
    metrics = PrometheusRecorder(registry)
    rails = Guardrails([slow], [patient], recorder=metrics)
    _, _, before = histogram(scrape(), "guardrails_tool_call_duration_seconds", "slow")
    assert before == 0  # bound at construction: the series exist before the first call
    _, _, unknown = histogram(scrape(), "guardrails_tool_call_duration_seconds", "_unknown")
    assert unknown == 0
    result = rails.turn().call("slow", {"key": "k"})
    text = scrape()
    whole, whole_sum, whole_n = histogram(text, "guardrails_tool_call_duration_seconds", "slow")
    _, guards_sum, guards_n = histogram(text, "guardrails_tool_call_guard_seconds", "slow")
    assert (whole_n, guards_n) == (1, 1)
    assert whole_sum == result.duration_ns / 1e9
    assert guards_sum == sum(r.duration_ns for r in result.verdicts) / 1e9
    assert 0 < guards_sum < whole_sum
    # The call is counted in the first bucket whose bound it does not exceed
    # (and in every one above), and in none below.
    seconds = result.duration_ns / 1e9
    bounds = sorted((float(le), n) for le, n in whole.items())
    assert [n for bound, n in bounds] == [0 if bound < seconds else 1 for bound, _ in bounds]
    assert seconds >= 0.02 and whole["0.01"] == 0
    assert {"30.0", "60.0"} <= whole.keys()  # whole calls may wait on a network


def test_a_refused_call_counts_its_guard_time_and_an_invented_tool_counts_as_unknown(
    registry: CollectorRegistry, scrape: Callable[[], str]
) -> None:
    metrics = PrometheusRecorder(registry)
    rails = Guardrails([slow], [patient], recorder=metrics)
    rails.turn().call("slow", {})  # missing argument: refused before the guards
    rails.turn().call("made_up", {})
    text = scrape()
    _, guards_sum, n = histogram(text, "guardrails_tool_call_guard_seconds", "slow")
    assert (n, guards_sum) == (1, 0.0)
    _, _, unknown = histogram(text, "guardrails_tool_call_duration_seconds", "_unknown")
    assert unknown == 1
