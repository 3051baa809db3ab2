"""A call stopped because what it needed was down is a fault, never an escape.

An escape counts an action that went on without a decision. When the audit
log cannot take an effectful tool's first row, the tool does not run: the
metrics, the span and the coverage report count a fail-closed fault, so the
escape alert ("actions let through") does not page for it.
"""

from __future__ import annotations

from typing import Any

from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import StatusCode
from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.parser import text_string_to_metric_families

from guardrails import Guardrails, Outcome, Verdict, guard, tool
from guardrails.audit import AuditLog
from guardrails.observe.coverage import tally_audit
from guardrails.observe.metrics import PrometheusRecorder
from guardrails.observe.telemetry import OpenTelemetryRecorder
from guardrails.store import AuditRow, MemoryStore


class Down(MemoryStore):
    """A store whose audit log cannot take a row."""

    def append(self, row: AuditRow) -> Any:
        raise OSError("disk full")


@tool(effect=True)
def pay(amount: int) -> str:
    """Pay an amount."""
    return "paid"


@tool
def read(key: str) -> str:
    """Read a key."""
    return key


def counts(registry: CollectorRegistry, family: str) -> dict[tuple[str, str], float]:
    out = {}
    for f in text_string_to_metric_families(generate_latest(registry).decode()):
        for s in f.samples:
            if s.name == family and s.labels.get("guard") == "audit":
                out[(s.labels["guard"], s.labels["reason"])] = s.value
    return out


def test_an_effectful_call_stopped_by_the_audit_log_is_a_fault_and_a_read_that_ran_an_escape() -> (
    None
):
    registry = CollectorRegistry()
    metrics = PrometheusRecorder(registry)
    audit = AuditLog(Down())
    rails = Guardrails([pay, read], [], hooks=[audit], recorder=[audit, metrics])
    metrics.bind(rails)
    stopped = rails.turn().call("pay", {"amount": 5})
    assert (stopped.outcome, stopped.reason) == (Outcome.UNAVAILABLE, "audit_unavailable")
    assert counts(registry, "guardrails_fail_closed_faults_total") == {
        ("audit", "audit_unavailable"): 1
    }
    assert (
        counts(registry, "guardrails_fail_open_escapes_total").get(
            ("audit", "audit_unavailable"), 0
        )
        == 0
    )
    ran = rails.turn().call("read", {"key": "k"})  # a read-only tool runs without its row
    assert ran.outcome is Outcome.OK
    assert counts(registry, "guardrails_fail_open_escapes_total") == {
        ("audit", "audit_unavailable"): 1
    }
    assert counts(registry, "guardrails_fail_closed_faults_total") == {
        ("audit", "audit_unavailable"): 1
    }


def test_the_span_of_a_stopped_call_has_a_fault_event_not_an_escape_event() -> None:
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    audit = AuditLog(Down())
    rails = Guardrails(
        [pay, read], [], hooks=[audit], recorder=[audit, OpenTelemetryRecorder(provider)]
    )
    rails.turn().call("pay", {"amount": 5})
    rails.turn().call("read", {"key": "k"})
    spans = {s.name: s for s in exporter.get_finished_spans()}
    stopped, ran = spans["execute_tool pay"], spans["execute_tool read"]
    assert [e.name for e in stopped.events] == ["guardrails.fail_closed_fault"]
    assert stopped.status.status_code is StatusCode.ERROR
    assert [e.name for e in ran.events] == ["guardrails.escape"]
    assert dict(stopped.events[0].attributes or {})["exception.type"] == "OSError"


def test_coverage_of_audit_rows_counts_a_stopped_call_as_a_fault() -> None:
    store = MemoryStore()
    audit = AuditLog(store)
    rails = Guardrails([pay, read], [], hooks=[audit], recorder=[audit])
    rails.turn().call("pay", {"amount": 5})
    (row,) = [r for r in audit.rows(kind="tool_call")]
    escapes = '[{"guard":"audit","choke_point":"tool_call","reason":"audit_unavailable"}]'
    stopped = row._replace(outcome="unavailable", reason="audit_unavailable", escapes=escapes)
    ran = row._replace(outcome="ok", reason=None, escapes=escapes, tool="read")
    # Near miss: stopped for another reason (a guard's refusal) with the same escape.
    refused = row._replace(outcome="unavailable", reason="guard", escapes=escapes)
    t = tally_audit([stopped, ran, refused])
    assert t.faults[("audit", "tool_call")] == {"audit_unavailable": 1}
    assert t.escapes[("audit", "tool_call")] == {"audit_unavailable": 2}


@guard(at="pre_turn", fail_closed=True)
def topics(turn: Any) -> Verdict:
    raise RuntimeError("no topic list")


def test_a_fail_closed_fault_at_pre_turn_sets_the_span_status_to_error() -> None:
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    rails = Guardrails([read], [topics], recorder=OpenTelemetryRecorder(provider))
    rails.turn().pre_turn("hello", ["read"])
    (span,) = exporter.get_finished_spans()
    assert span.name == "guardrails pre_turn"
    assert [e.name for e in span.events] == [
        "gen_ai.evaluation.result",
        "guardrails.fail_closed_fault",
    ]
    assert span.status.status_code is StatusCode.ERROR
