"""``OpenTelemetryRecorder.hook()``: the tool's own spans are children of its execute_tool span."""

from __future__ import annotations

import asyncio
import json
from typing import Any

from opentelemetry import trace
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import NoOpTracerProvider

from guardrails import Guardrails, Outcome, Verdict, guard, tool
from guardrails.observe._tool_spans import _OPEN
from guardrails.observe.telemetry import OpenTelemetryRecorder
from guardrails.rules.ceiling import TurnCeiling


def open_spans() -> tuple[object, ...]:
    return _OPEN.get()


def traced_tools(provider: TracerProvider) -> list[Any]:
    backend = provider.get_tracer("backend")

    @tool
    def lookup(key: str) -> str:
        """Look a key up in a backend that traces its own requests."""
        with backend.start_as_current_span("GET /keys"):
            return key

    @tool
    async def fetch(key: str) -> str:
        """The same, async."""
        with backend.start_as_current_span("GET /keys"):
            await asyncio.sleep(0)
            return key

    return [lookup, fetch]


@guard
def short_key(call: Any) -> Verdict:
    return Verdict.PASS if len(call.arguments["key"]) < 6 else Verdict.REJECT


def by_name(exporter: InMemorySpanExporter) -> dict[str, ReadableSpan]:
    spans = exporter.get_finished_spans()
    names = [s.name for s in spans]
    assert len(names) == len(set(names)), names
    return {s.name: s for s in spans}


def assert_child(child: ReadableSpan, parent: ReadableSpan) -> None:
    assert child.parent is not None and parent.context is not None
    assert child.parent.span_id == parent.context.span_id


def test_the_tools_own_span_is_a_child_of_its_execute_tool_span(
    provider: TracerProvider, exporter: InMemorySpanExporter
) -> None:
    spans = OpenTelemetryRecorder(provider)
    rails = Guardrails(traced_tools(provider), [short_key], hooks=[spans.hook()], recorder=[spans])
    outside = trace.get_current_span()
    assert rails.turn().call("lookup", {"key": "ab"}, call_id="c-1").outcome is Outcome.OK
    assert trace.get_current_span() is outside  # the context is restored
    found = by_name(exporter)
    call = found["execute_tool lookup"]
    assert_child(found["GET /keys"], call)
    attributes = call.attributes or {}
    assert attributes["gen_ai.tool.call.id"] == "c-1"
    assert attributes["guardrails.verdict"] == "pass"
    assert [e.name for e in call.events] == ["gen_ai.evaluation.result"]
    assert spans.failures == 0 and not open_spans()


async def test_an_async_tools_span_is_a_child_too(
    provider: TracerProvider, exporter: InMemorySpanExporter
) -> None:
    spans = OpenTelemetryRecorder(provider)
    rails = Guardrails(traced_tools(provider), [short_key], hooks=[spans.hook()], recorder=spans)
    assert (await rails.turn().acall("fetch", {"key": "ab"})).outcome is Outcome.OK
    found = by_name(exporter)
    assert_child(found["GET /keys"], found["execute_tool fetch"])


def test_a_call_refused_before_the_hooks_gets_one_span_after_the_fact(
    provider: TracerProvider, exporter: InMemorySpanExporter
) -> None:
    spans = OpenTelemetryRecorder(provider)
    rails = Guardrails(
        traced_tools(provider),
        [short_key],
        hooks=[spans.hook()],
        recorder=spans,
        max_calls_per_turn=0,  # the ceiling hook runs first and stops the call
    )
    assert rails.turn().call("lookup", {"key": "ab"}).outcome is Outcome.LIMIT
    assert rails.turn().call("lookup", {"key": "abcdefgh"}).outcome is Outcome.UNAVAILABLE
    spans_ = exporter.get_finished_spans()
    assert [s.name for s in spans_] == ["execute_tool lookup"] * 2
    assert [(s.attributes or {})["error.type"] for s in spans_] == ["limit", "unavailable"]
    assert spans.failures == 0 and not open_spans()


def test_a_hook_after_it_that_stops_the_call_still_ends_the_span(
    provider: TracerProvider, exporter: InMemorySpanExporter
) -> None:
    spans = OpenTelemetryRecorder(provider)
    rails = Guardrails(
        traced_tools(provider), [short_key], hooks=[spans.hook(), TurnCeiling(0)], recorder=spans
    )
    outside = trace.get_current_span()
    assert rails.turn().call("lookup", {"key": "ab"}).outcome is Outcome.LIMIT
    assert trace.get_current_span() is outside
    (span,) = exporter.get_finished_spans()
    assert (span.attributes or {})["error.type"] == "limit"
    assert spans.failures == 0 and not open_spans()


def test_without_an_sdk_the_hook_opens_nothing() -> None:
    spans = OpenTelemetryRecorder(NoOpTracerProvider())
    rails = Guardrails(
        traced_tools(TracerProvider()), [short_key], hooks=[spans.hook()], recorder=spans
    )
    outside = trace.get_current_span()
    assert rails.turn().call("lookup", {"key": "ab"}).outcome is Outcome.OK
    assert trace.get_current_span() is outside
    assert not open_spans() and spans.failures == 0


def test_a_ticket_gets_the_span_turn_call_gets(
    provider: TracerProvider, exporter: InMemorySpanExporter
) -> None:
    spans = OpenTelemetryRecorder(provider)
    rails = Guardrails(traced_tools(provider), [short_key], hooks=[spans.hook()], recorder=[spans])
    turn = rails.turn()
    outside = trace.get_current_span()
    first = turn.admit("lookup", {"key": "ab"}, call_id="c-1")
    second = turn.admit("lookup", {"key": "cd"}, call_id="c-2")
    assert trace.get_current_span() is outside  # admit leaves the caller's context alone
    second.fail(ValueError("elsewhere"))
    first.complete("ab")
    assert trace.get_current_span() is outside
    finished = {s.attributes["gen_ai.tool.call.id"]: s for s in exporter.get_finished_spans()}
    assert sorted(finished) == ["c-1", "c-2"]
    ok, failed = finished["c-1"], finished["c-2"]
    assert ok.name == failed.name == "execute_tool lookup"
    assert (ok.attributes or {})["guardrails.verdict"] == "pass"
    assert "error.type" not in (ok.attributes or {})
    assert (failed.attributes or {})["error.type"] == "ValueError"  # as for a tool that raised
    assert spans.failures == 0 and not open_spans()


def test_the_audit_row_keeps_the_trace_and_span_ids_of_its_call() -> None:
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

    from guardrails import Guardrails, tool
    from guardrails.audit import AuditLog
    from guardrails.observe.telemetry import OpenTelemetryRecorder
    from guardrails.store import MemoryStore

    @tool
    def lookup(key: str) -> str:
        """Look a key up."""
        return key

    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    spans = OpenTelemetryRecorder(provider)
    audit = AuditLog(MemoryStore())
    rails = Guardrails([lookup], hooks=[audit, spans.hook()], recorder=[audit, spans])
    turn = rails.turn()
    turn.call("lookup", {"key": "a"}, call_id="c-1")
    turn.call("lookup", {"key": "b"}, call_id="c-2")
    rows = {r.call_id: json.loads(r.detail or "{}") for r in audit.rows(kind="tool_call")}
    for span in exporter.get_finished_spans():
        ids = span.get_span_context()
        call_id = (span.attributes or {})["gen_ai.tool.call.id"]
        assert rows[call_id] == {
            "trace_id": format(ids.trace_id, "032x"),
            "span_id": format(ids.span_id, "016x"),
            "revision": rails.revision,
        }
    assert len(rows) == 2 and rows["c-1"] != rows["c-2"]
