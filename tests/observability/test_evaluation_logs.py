"""Verdicts as log-based ``gen_ai.evaluation.result`` events, read with the SDK's in-memory exporter."""

from __future__ import annotations

from typing import Any

import pytest
from opentelemetry.sdk._logs import LoggerProvider
from opentelemetry.sdk._logs.export import InMemoryLogRecordExporter, SimpleLogRecordProcessor
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from guardrails import Guardrails, GuardResult, NotConfigured, Verdict, guard, tool
from guardrails.observe.telemetry import OpenTelemetryRecorder


@tool
def lookup(key: str) -> str:
    """Look a key up."""
    return key


@guard(outcome="invalid_args")
def short_key(call: Any) -> GuardResult | Verdict:
    return GuardResult.rejected("too_long") if len(call.arguments["key"]) > 4 else Verdict.PASS


@guard
def configured(call: Any) -> Verdict:
    raise NotConfigured("no table")


@pytest.fixture
def exporters() -> tuple[
    TracerProvider, InMemorySpanExporter, LoggerProvider, InMemoryLogRecordExporter
]:
    spans, logs = InMemorySpanExporter(), InMemoryLogRecordExporter()
    tracer_provider, logger_provider = TracerProvider(), LoggerProvider()
    tracer_provider.add_span_processor(SimpleSpanProcessor(spans))
    logger_provider.add_log_record_processor(SimpleLogRecordProcessor(logs))
    return tracer_provider, spans, logger_provider, logs


def test_each_verdict_is_one_log_record_in_the_context_of_its_span(exporters: Any) -> None:
    tracer_provider, spans, logger_provider, logs = exporters
    recorder = OpenTelemetryRecorder(tracer_provider, logger_provider=logger_provider)
    rails = Guardrails([lookup], [short_key, configured], recorder=recorder)
    rails.turn().call("lookup", {"key": "abcdef"})
    (span,) = spans.get_finished_spans()
    records = [r.log_record for r in logs.get_finished_logs()]
    assert [r.event_name for r in records] == ["gen_ai.evaluation.result"] * 2
    by_guard = {dict(r.attributes or {})["gen_ai.evaluation.name"]: r for r in records}
    assert set(by_guard) == {"short_key", "configured"}
    rejected = dict(by_guard["short_key"].attributes or {})
    assert rejected["gen_ai.evaluation.score.label"] == "reject"
    assert rejected["guardrails.reason"] == "too_long"
    failed = dict(by_guard["configured"].attributes or {})
    assert failed["error.type"] == "guardrails.errors.NotConfigured"
    context = span.get_span_context()
    assert all(r.trace_id == context.trace_id and r.span_id == context.span_id for r in records)
    # The same attributes as the span events, which stay by default.
    events = {
        dict(e.attributes or {})["gen_ai.evaluation.name"]: dict(e.attributes or {})
        for e in span.events
        if e.name == "gen_ai.evaluation.result"
    }
    assert events == {name: dict(r.attributes or {}) for name, r in by_guard.items()}


def test_span_events_and_log_events_can_each_be_turned_off(exporters: Any) -> None:
    tracer_provider, spans, logger_provider, logs = exporters
    recorder = OpenTelemetryRecorder(
        tracer_provider, logger_provider=logger_provider, span_events=False
    )
    Guardrails([lookup], [short_key], recorder=recorder).turn().call("lookup", {"key": "ab"})
    (span,) = spans.get_finished_spans()
    assert [e.name for e in span.events] == []
    assert len(logs.get_finished_logs()) == 1
    quiet = OpenTelemetryRecorder(
        tracer_provider, logger_provider=logger_provider, log_events=False
    )
    Guardrails([lookup], [short_key], recorder=quiet).turn().call("lookup", {"key": "ab"})
    assert len(logs.get_finished_logs()) == 1  # no new record
    assert [e.name for e in spans.get_finished_spans()[-1].events] == ["gen_ai.evaluation.result"]


def test_pre_turn_verdicts_are_log_records_too(exporters: Any) -> None:
    tracer_provider, spans, logger_provider, logs = exporters

    @guard(at="pre_turn")
    def no_weather(request: Any) -> Verdict:
        return Verdict.REJECT if "weather" in request.text else Verdict.PASS

    recorder = OpenTelemetryRecorder(tracer_provider, logger_provider=logger_provider)
    Guardrails([lookup], [no_weather], recorder=recorder).turn().pre_turn("weather?", ["lookup"])
    (record,) = [r.log_record for r in logs.get_finished_logs()]
    assert dict(record.attributes or {})["gen_ai.evaluation.name"] == "no_weather"
    assert record.span_id == spans.get_finished_spans()[0].get_span_context().span_id


def test_without_an_sdk_logger_provider_nothing_is_emitted_and_nothing_fails(
    exporters: Any,
) -> None:
    from opentelemetry._logs import NoOpLoggerProvider

    tracer_provider, spans, _, _ = exporters
    recorder = OpenTelemetryRecorder(tracer_provider, logger_provider=NoOpLoggerProvider())
    Guardrails([lookup], [short_key], recorder=recorder).turn().call("lookup", {"key": "ab"})
    assert recorder.failures == 0 and len(spans.get_finished_spans()) == 1
