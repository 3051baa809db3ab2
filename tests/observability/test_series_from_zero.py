"""Every series an alert or panel reads exists at zero from bind(); faults and observe mode are told apart."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import StatusCode
from prometheus_client import CollectorRegistry
from prometheus_client.parser import text_string_to_metric_families

from guardrails import EscapeReason, Guardrails, Outcome, Verdict, guard, tool
from guardrails.observe.coverage import from_exposition
from guardrails.observe.metrics import (
    FAIL_CLOSED_FAULTS,
    FAIL_OPEN_ESCAPES,
    FAULT_REASONS,
    GUARD_EVALUATIONS,
    GUARD_REGISTERED,
    TOOL_OUTCOMES,
    PrometheusRecorder,
)
from guardrails.observe.telemetry import OpenTelemetryRecorder
from guardrails.rules.required_action import required_action

Samples = dict[tuple[str, frozenset[tuple[str, str]]], float]


def samples(text: str) -> Samples:
    return {
        (s.name, frozenset(s.labels.items())): s.value
        for f in text_string_to_metric_families(text)
        for s in f.samples
    }


def labels_of(found: Samples, name: str, **match: str) -> list[dict[str, str]]:
    want = set(match.items())
    return [dict(lbl) for (n, lbl), _ in found.items() if n == name and want <= set(lbl)]


@tool
def lookup(key: str) -> str:
    """Look a key up."""
    return key


@tool
def notify_human(reason: str) -> str:
    """Page a human."""
    return reason


@guard
def region_rules(call: Any) -> Verdict:
    return Verdict.PASS


@guard(fail_closed=True)
def strict(call: Any) -> Verdict:
    raise RuntimeError("the rules service is down")


@guard(observe=True)
def shadow(call: Any) -> Verdict:
    return Verdict.REJECT


def test_bind_exposes_every_escape_fault_verdict_outcome_and_backstop_series_at_zero(
    registry: CollectorRegistry, scrape: Callable[[], str]
) -> None:
    escalate = required_action("notify_human", when=lambda run: True, arguments={"reason": "x"})
    metrics = PrometheusRecorder(registry)
    metrics.bind(Guardrails([lookup, notify_human], [region_rules, shadow, escalate]))
    found = samples(scrape())
    for g in ("region_rules", "shadow"):
        reasons = {lbl["reason"] for lbl in labels_of(found, FAIL_OPEN_ESCAPES, guard=g)}
        assert reasons == {r.value for r in EscapeReason}
        faults = {lbl["reason"] for lbl in labels_of(found, FAIL_CLOSED_FAULTS, guard=g)}
        assert faults == {r.value for r in FAULT_REASONS}
    modes = {(lbl["guard"], lbl["mode"]) for lbl in labels_of(found, GUARD_EVALUATIONS)}
    assert modes == {
        ("region_rules", "enforce"),
        ("shadow", "observe"),
        ("required_notify_human", "enforce"),
    }
    tools = {lbl["tool"] for lbl in labels_of(found, TOOL_OUTCOMES)}
    assert tools == {"lookup", "notify_human", "_unknown"}  # invented tools' calls too
    assert len(labels_of(found, TOOL_OUTCOMES, tool="_unknown")) == 5
    backstop = (
        "guardrails_backstop_actions_total",
        frozenset({("rule", "required_notify_human"), ("tool", "notify_human")}),
    )
    assert found[backstop] == 0
    assert all(v == 0 for (n, _), v in found.items() if n.endswith("_total"))


def test_tools_and_guards_added_after_bind_are_exposed_and_counted_by_name(
    registry: CollectorRegistry, scrape: Callable[[], str]
) -> None:
    metrics = PrometheusRecorder(registry)
    rails = Guardrails([lookup], recorder=metrics)
    metrics.bind(rails)
    rails.add_tool(notify_human)
    rails.add_guard(region_rules)
    found = samples(scrape())
    assert labels_of(found, GUARD_REGISTERED, guard="region_rules")
    assert labels_of(found, TOOL_OUTCOMES, tool="notify_human")
    rails.turn().call("notify_human", {"reason": "x"})
    after = samples(scrape())
    ok = (TOOL_OUTCOMES, frozenset({("tool", "notify_human"), ("outcome", "ok")}))
    assert after[ok] == 1
    unknown = (TOOL_OUTCOMES, frozenset({("tool", "_unknown"), ("outcome", "ok")}))
    assert after.get(unknown, 0) == 0


def test_a_late_tool_is_counted_by_name_at_its_first_call_before_any_scrape(
    registry: CollectorRegistry, scrape: Callable[[], str]
) -> None:
    metrics = PrometheusRecorder(registry)
    rails = Guardrails([lookup], recorder=metrics)
    metrics.bind(rails)
    rails.add_tool(notify_human)
    rails.turn().call("notify_human", {"reason": "x"})
    ok = (TOOL_OUTCOMES, frozenset({("tool", "notify_human"), ("outcome", "ok")}))
    assert samples(scrape())[ok] == 1


def test_a_fail_closed_guard_that_raised_is_a_fault_not_an_escape_and_not_evaluated_in_coverage(
    registry: CollectorRegistry,
    scrape: Callable[[], str],
    provider: TracerProvider,
    exporter: InMemorySpanExporter,
) -> None:
    metrics = PrometheusRecorder(registry)
    rails = Guardrails([lookup], [strict], recorder=[metrics, OpenTelemetryRecorder(provider)])
    metrics.bind(rails)
    for _ in range(3):
        assert rails.turn().call("lookup", {"key": "k"}).outcome is Outcome.UNAVAILABLE
    found = samples(scrape())
    fault = (
        FAIL_CLOSED_FAULTS,
        frozenset({("guard", "strict"), ("choke_point", "tool_call"), ("reason", "raised")}),
    )
    assert found[fault] == 3
    assert sum(v for (n, lbl), v in found.items() if n == FAIL_OPEN_ESCAPES) == 0
    (row,) = from_exposition(scrape()).guards
    assert (row.rejected, row.not_evaluated, row.not_evaluated_share) == (0, 3, 1.0)
    assert dict(row.faults) == {"raised": 3} and not row.escapes
    span = exporter.get_finished_spans()[0]
    assert span.status.status_code is StatusCode.ERROR
    assert (span.attributes or {})["error.type"] == "RuntimeError"
    assert [e.name for e in span.events] == [
        "gen_ai.evaluation.result",
        "guardrails.fail_closed_fault",
    ]
    assert "rules service" not in str(span.to_json())


def test_observe_mode_verdicts_are_labelled_observe(
    registry: CollectorRegistry, scrape: Callable[[], str]
) -> None:
    metrics = PrometheusRecorder(registry)
    rails = Guardrails([lookup], [shadow, region_rules], recorder=metrics)
    metrics.bind(rails)
    assert rails.turn().call("lookup", {"key": "k"}).outcome is Outcome.OK
    found = samples(scrape())

    def count(g: str, mode: str, verdict: str) -> float:
        key = frozenset(
            {("guard", g), ("choke_point", "tool_call"), ("verdict", verdict), ("mode", mode)}
        )
        return found.get((GUARD_EVALUATIONS, key), -1)

    assert count("shadow", "observe", "reject") == 1
    assert count("shadow", "enforce", "reject") == -1  # no such series: shadow never enforces
    assert count("region_rules", "enforce", "pass") == 1
    escape = (
        FAIL_OPEN_ESCAPES,
        frozenset({("guard", "shadow"), ("choke_point", "tool_call"), ("reason", "observe_only")}),
    )
    assert found[escape] == 1
    (region, shadow_row) = from_exposition(scrape()).guards
    assert (shadow_row.guard, shadow_row.observed, region.observed) == ("shadow", 1, 0)


def test_a_registration_that_cannot_be_read_at_scrape_is_counted_not_raised(
    registry: CollectorRegistry, scrape: Callable[[], str]
) -> None:
    class Engine:
        recorder = None

        def __init__(self) -> None:
            self.tools: dict[str, Any] = {"lookup": lookup}
            self.guards: dict[str, Any] = {}

    engine = Engine()
    metrics = PrometheusRecorder(registry, engine=engine)
    engine.tools = {object(): lookup}  # type: ignore[dict-item]
    text = scrape()
    assert 'guardrails_telemetry_failures_total{recorder="prometheus"} 1.0' in text
    assert 'tool="lookup"' in text
    assert metrics.failures == 1
