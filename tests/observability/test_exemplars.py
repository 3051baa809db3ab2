"""Escape and fault counters carry the trace id of their latest event as an OpenMetrics exemplar."""

from __future__ import annotations

from typing import Any

from opentelemetry.sdk.trace import TracerProvider
from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.openmetrics.exposition import generate_latest as openmetrics

from guardrails import Guardrails, NotConfigured, Verdict, guard, tool
from guardrails.observe.metrics import PrometheusRecorder


@tool
def lookup(key: str) -> str:
    """Look a key up."""
    return key


@guard
def configured(call: Any) -> Verdict:
    raise NotConfigured("no table")


@guard(fail_closed=True)
def strict(call: Any) -> Verdict:
    if call.arguments["key"] == "stop":
        raise RuntimeError("cannot decide")
    return Verdict.PASS


def test_the_latest_escape_and_fault_name_their_trace() -> None:
    registry = CollectorRegistry()
    rails = Guardrails([lookup], [configured, strict], recorder=PrometheusRecorder(registry))
    tracer = TracerProvider().get_tracer("agent")
    with tracer.start_as_current_span("turn") as span:
        rails.turn().call("lookup", {"key": "stop"})
    trace_id = format(span.get_span_context().trace_id, "032x")
    text = openmetrics(registry).decode()
    escape = next(
        line
        for line in text.splitlines()
        if 'guard="configured"' in line
        and 'reason="not_configured"' in line
        and line.startswith("guardrails_fail_open_escapes_total")
    )
    fault = next(
        line
        for line in text.splitlines()
        if 'guard="strict"' in line
        and 'reason="raised"' in line
        and line.startswith("guardrails_fail_closed_faults_total")
    )
    assert f'# {{trace_id="{trace_id}"}} 1.0' in escape
    assert f'# {{trace_id="{trace_id}"}} 1.0' in fault
    # The classic text format has no exemplars and is unchanged.
    assert "trace_id" not in generate_latest(registry).decode()


def test_an_escape_outside_any_trace_has_no_exemplar() -> None:
    registry = CollectorRegistry()
    rails = Guardrails([lookup], [configured], recorder=PrometheusRecorder(registry))
    rails.turn().call("lookup", {"key": "a"})
    assert "trace_id" not in openmetrics(registry).decode()
