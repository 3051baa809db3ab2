"""Telemetry under a hostile model and failing exporters.

10,000 invented tool names (and names with path separators, control
characters or 10 KB of text) must not create Prometheus series or span names;
an exporter or span processor that raises must never reach a tool call, and
its failures are counted.
"""

from __future__ import annotations

import threading
from typing import Any

from opentelemetry.sdk.trace import ReadableSpan, SpanProcessor, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor, SpanExporter, SpanExportResult
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from prometheus_client import CollectorRegistry, generate_latest

from guardrails import Guardrails, NotConfigured, Outcome, Tool, Verdict, guard
from guardrails.observe.metrics import UNKNOWN_TOOL, PrometheusRecorder
from guardrails.observe.telemetry import OpenTelemetryRecorder

SECRET_MARK = "sk-live-7f3a9c"
SCHEMA = {"type": "object", "properties": {"q": {"type": "string"}}}
HOSTILE = [
    "../../etc/passwd",
    "a/b\\c",
    "name\x00with\nnul",
    "\x1b[31mred",
    "l" * 10_000,
    f"leak_{SECRET_MARK}",
    'quote"brace{label="x"}',
    "look\u200bup",
]


def invented(i: int) -> str:
    return f"invented_{i}_{HOSTILE[i % len(HOSTILE)]}"


def samples(registry: CollectorRegistry) -> set[tuple[str, tuple[tuple[str, str], ...]]]:
    return {
        (s.name, tuple(sorted(s.labels.items()))) for m in registry.collect() for s in m.samples
    }


def test_ten_thousand_invented_tool_names_add_no_prometheus_series(ledger: Any) -> None:
    registry = CollectorRegistry()
    prometheus = PrometheusRecorder(registry)
    flaky = guard(lambda _: 1 / 0, name="flaky")
    rails = Guardrails([Tool("lookup", lambda q: "ok", SCHEMA)], [flaky], recorder=[prometheus])
    prometheus.bind(rails)
    turn = rails.turn()
    turn.call("lookup", {"q": "x"})
    turn.call(invented(0), {"q": "x"})
    before = samples(registry)

    results = [turn.call(invented(i), {"q": "x"}) for i in range(1, 10_000)]

    after = samples(registry)
    assert after == before
    tools = {dict(labels).get("tool") for _, labels in after} - {None}
    assert tools == {"lookup", UNKNOWN_TOOL}
    exposition = generate_latest(registry).decode()
    assert SECRET_MARK not in exposition and "invented_" not in exposition
    assert f'outcome="unavailable",tool="{UNKNOWN_TOOL}"}} 10000.0' in exposition
    for result in results:
        assert ledger.check("telemetry", result, ("q",)) == []
        assert result.outcome is Outcome.UNAVAILABLE
    assert prometheus.failures == 0
    ledger.add("telemetry", prometheus_series=len(after))


def test_ten_thousand_invented_tool_names_add_no_span_names(ledger: Any) -> None:
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    otel = OpenTelemetryRecorder(provider)
    rails = Guardrails([Tool("lookup", lambda q: "ok", SCHEMA)], recorder=[otel])
    turn = rails.turn()

    turn.call("lookup", {"q": "x"})
    for i in range(10_000):
        turn.call(invented(i), {"q": "x"})

    spans = exporter.get_finished_spans()
    assert len(spans) == 10_001
    assert {s.name for s in spans} == {"execute_tool lookup", f"execute_tool {UNKNOWN_TOOL}"}
    for span in spans:
        for value in (span.attributes or {}).values():
            assert "invented_" not in str(value) and SECRET_MARK not in str(value)
    assert otel.failures == 0
    ledger.add("telemetry", inputs=10_001, span_names=len({s.name for s in spans}))
    provider.shutdown()


class RaisingExporter(SpanExporter):
    def __init__(self) -> None:
        self.calls = 0

    def export(self, spans: Any) -> SpanExportResult:
        self.calls += 1
        raise ConnectionError(f"collector down, token={SECRET_MARK}")

    def shutdown(self) -> None:
        pass


class RaisingProcessor(SpanProcessor):
    def on_start(self, span: Any, parent_context: Any = None) -> None:
        raise RuntimeError(SECRET_MARK)

    def on_end(self, span: ReadableSpan) -> None:
        raise RuntimeError(SECRET_MARK)


def test_raising_exporter_and_span_processor_never_reach_the_call(ledger: Any) -> None:
    exporter = RaisingExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    provider.add_span_processor(RaisingProcessor())
    otel = OpenTelemetryRecorder(provider)
    registry = CollectorRegistry()
    prometheus = PrometheusRecorder(registry)
    flaky = guard(lambda _: 1 / 0, name="flaky")
    rails = Guardrails(
        [Tool("lookup", lambda q: "ok", SCHEMA)], [flaky], recorder=[otel, prometheus]
    )
    prometheus.bind(rails)

    results = [rails.call("lookup", {"q": str(i)}) for i in range(50)]

    for result in results:
        assert ledger.check("telemetry", result, ("q",)) == []
        assert result.outcome is Outcome.OK
    # Prometheus still counted every escape, whatever happened to the spans.
    exposition = generate_latest(registry).decode()
    assert 'guard="flaky",reason="raised"} 50.0' in exposition
    assert SECRET_MARK not in exposition
    # Each span that could not be started is one counted, exported failure.
    assert otel.failures == 50
    assert 'guardrails_telemetry_failures_total{recorder="opentelemetry"} 50.0' in exposition
    provider.shutdown()
    ledger.add("telemetry", faults_injected=50, faults_counted=50)


def test_raising_exporter_alone_is_absorbed_by_the_sdk(ledger: Any) -> None:
    exporter = RaisingExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    otel = OpenTelemetryRecorder(provider)
    rails = Guardrails([Tool("lookup", lambda q: "ok", SCHEMA)], recorder=[otel])

    results = [rails.call("lookup", {"q": str(i)}) for i in range(50)]

    assert [r.outcome for r in results] == [Outcome.OK] * 50
    # The OpenTelemetry SDK catches and logs an exporter's exceptions itself.
    assert exporter.calls == 50
    provider.shutdown()
    ledger.add("telemetry", inputs=50, faults_injected=50, faults_counted=exporter.calls)


def _raises(exc: BaseException) -> Any:
    def body(_: Any) -> Any:
        raise exc

    return body


def test_every_escape_is_in_the_counter_and_on_the_span(ledger: Any) -> None:
    release = threading.Event()
    faults = {
        "raised": _raises(RuntimeError(SECRET_MARK)),
        "not_configured": _raises(NotConfigured(SECRET_MARK)),
        "invalid_return": lambda _: "pass",
        "declined": lambda _: Verdict.NOT_EVALUATED,
        "timeout": lambda _: release.wait(1.0),
    }
    # Only the hanging guard may miss its deadline (an answer after it is a timeout).
    guards = [
        guard(fn, name=f"g_{reason}", timeout=0.3 if reason == "timeout" else 30.0)
        for reason, fn in faults.items()
    ]
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    registry = CollectorRegistry()
    prometheus = PrometheusRecorder(registry)
    rails = Guardrails(
        [Tool("lookup", lambda q: "ok", SCHEMA)],
        guards,
        recorder=[OpenTelemetryRecorder(provider), prometheus],
    )
    prometheus.bind(rails)
    try:
        results = [rails.call("lookup", {"q": str(i)}) for i in range(3)]
    finally:
        release.set()

    exposition = generate_latest(registry).decode()
    spans = exporter.get_finished_spans()
    counted = 0
    for reason in faults:
        line = f'guardrails_fail_open_escapes_total{{choke_point="tool_call",guard="g_{reason}",reason="{reason}"}} 3.0'
        on_spans = sum(
            1
            for span in spans
            for event in span.events
            if event.name == "guardrails.escape"
            and (event.attributes or {}).get("guardrails.reason") == reason
        )
        if line in exposition and on_spans == 3:
            counted += 3
        assert line in exposition, reason
        assert on_spans == 3, reason
    for result in results:
        assert ledger.check("telemetry", result, ("q",)) == []
        assert result.outcome is Outcome.OK
    assert SECRET_MARK not in exposition and SECRET_MARK not in repr([s.events for s in spans])
    provider.shutdown()
    ledger.add("telemetry", faults_injected=3 * len(faults), faults_counted=counted)
