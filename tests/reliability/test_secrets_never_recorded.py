"""Secrets, argument values and exception text stay out of every record.

A secret bound from the provider, argument values the model sent, and the
text of exceptions raised by tools and guards are planted with unique marks;
after calls that succeed, fail, are refused or are unknown, no mark may
appear in what the model saw, in the audit rows, in the spans (names,
attributes, events) or in the Prometheus exposition.
"""

from __future__ import annotations

from typing import Any

from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from prometheus_client import CollectorRegistry, generate_latest

from guardrails import Guardrails, Outcome, Secret, Tool, Verdict, guard
from guardrails.audit import AuditLog
from guardrails.observe.metrics import PrometheusRecorder
from guardrails.observe.telemetry import OpenTelemetryRecorder
from guardrails.store import MemoryStore

SECRET_VALUE = "sk-live-SECRETVALUE-91c2"
ARGUMENT_VALUE = "ARGVALUE-5d7e"
EXCEPTION_TEXT = "EXCTEXT-a0b3"
MARKS = (SECRET_VALUE, ARGUMENT_VALUE, EXCEPTION_TEXT)

SCHEMA = {
    "type": "object",
    "properties": {"note": {"type": "string"}, "api_key": {"type": "string"}},
    "required": ["note"],
}


def charge(note: str, api_key: str) -> str:
    assert api_key == SECRET_VALUE
    if note.startswith("fail"):
        raise RuntimeError(f"{EXCEPTION_TEXT} while charging with {api_key} for {note}")
    return "charged"


@guard
def suspicious(call: Any) -> Any:
    if "guard" in call.arguments["note"]:
        raise ValueError(f"{EXCEPTION_TEXT} {call.arguments['note']}")
    return Verdict.PASS


def test_no_secret_argument_value_or_exception_text_in_any_record(ledger: Any) -> None:
    store = MemoryStore()
    audit = AuditLog(store)
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    registry = CollectorRegistry()
    prometheus = PrometheusRecorder(registry)
    tool = Tool("charge", charge, SCHEMA, bind={"api_key": Secret("billing")}, effect=True)
    rails = Guardrails(
        [tool],
        [suspicious],
        hooks=[audit],
        recorder=[audit, OpenTelemetryRecorder(provider), prometheus],
        secrets=lambda name: SECRET_VALUE if name == "billing" else None,
    )
    prometheus.bind(rails)
    turn = rails.turn(tenant="acme", session="s1")

    calls = [
        ("charge", {"note": f"ok {ARGUMENT_VALUE}"}),
        ("charge", {"note": f"fail {ARGUMENT_VALUE}"}),
        ("charge", {"note": f"guard {ARGUMENT_VALUE}"}),
        ("charge", {"note": 5, "extra": ARGUMENT_VALUE}),
        ("charge", {"note": "x", "api_key": ARGUMENT_VALUE}),
        ("charge", f'{{"note": "{ARGUMENT_VALUE}"'),
        ("refund", {"note": ARGUMENT_VALUE}),
    ]
    results = [turn.call(name, args) for name, args in calls]
    turn.post_run(f"done {ARGUMENT_VALUE}")

    assert [r.outcome for r in results] == [
        Outcome.OK,
        Outcome.ERROR,
        Outcome.OK,
        Outcome.INVALID_ARGS,
        Outcome.INVALID_ARGS,
        Outcome.INVALID_ARGS,
        Outcome.UNAVAILABLE,
    ]
    for result in results:
        assert ledger.check("secrets", result, ("note",), MARKS) == []
    rows = [repr(row) for row in store.audit_rows()]
    spans = [
        repr(
            (
                s.name,
                dict(s.attributes or {}),
                [(e.name, dict(e.attributes or {})) for e in s.events],
            )
        )
        for s in exporter.get_finished_spans()
    ]
    exposition = generate_latest(registry).decode()
    assert len(rows) >= len(calls) and len(spans) >= len(calls)
    for mark in MARKS:
        assert not [r for r in rows if mark in r], mark
        assert not [s for s in spans if mark in s], mark
        assert mark not in exposition
    provider.shutdown()
    ledger.add("secrets", records_scanned=len(rows) + len(spans) + 1)
