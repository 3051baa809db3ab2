"""The OpenTelemetry recorder, with the real SDK and an in-memory exporter."""

from __future__ import annotations

import time
from typing import Any

from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.sdk.trace.sampling import ALWAYS_OFF
from opentelemetry.trace import NoOpTracerProvider, ProxyTracerProvider, SpanKind, StatusCode

from guardrails import (
    EscapeReason,
    Guardrails,
    GuardResult,
    NotConfigured,
    Outcome,
    Verdict,
    guard,
    tool,
)
from guardrails.observe.telemetry import OpenTelemetryRecorder
from guardrails.rules.effects import Perform

SECRET = "sk-live-0123456789"


@tool
def lookup(key: str) -> str:
    """Look a key up."""
    if key == "crash":
        raise RuntimeError(f"backend said {SECRET}")
    return key


@guard(outcome="invalid_args")
def short_key(call: Any) -> GuardResult | Verdict:
    if len(call.arguments["key"]) > 5:
        return GuardResult.rejected("too_long")
    return Verdict.PASS


@guard
def configured(call: Any) -> Verdict:
    if call.arguments["key"] == "new":
        raise NotConfigured(f"no rule; token {SECRET}")
    return Verdict.PASS


def engine(recorder: OpenTelemetryRecorder) -> Guardrails:
    return Guardrails([lookup], [short_key, configured], recorder=recorder)


def test_tool_span_follows_the_genai_conventions(
    provider: TracerProvider, exporter: InMemorySpanExporter
) -> None:
    rails = engine(OpenTelemetryRecorder(provider))
    before = time.time_ns()
    result = rails.turn().call("lookup", {"key": "ab"}, call_id="toolu_01")
    after = time.time_ns()
    (span,) = exporter.get_finished_spans()
    assert span.name == "execute_tool lookup"
    assert span.kind is SpanKind.INTERNAL
    assert dict(span.attributes or {}) == {
        "gen_ai.operation.name": "execute_tool",
        "gen_ai.tool.name": "lookup",
        "gen_ai.tool.call.id": "toolu_01",
        "gen_ai.tool.type": "function",
        "gen_ai.tool.description": "Look a key up.",  # the engine bound its recorder
        "guardrails.revision": rails.revision,
        "guardrails.outcome": "ok",
        "guardrails.verdict": "pass",
    }
    assert span.status.status_code is StatusCode.UNSET
    assert span.start_time is not None and span.end_time is not None
    assert before <= span.start_time <= span.end_time <= after
    assert span.end_time - span.start_time == result.duration_ns
    assert [e.name for e in span.events] == ["gen_ai.evaluation.result"] * 2


def test_a_rejected_call_has_error_type_and_an_event_per_verdict(
    provider: TracerProvider, exporter: InMemorySpanExporter
) -> None:
    rails = engine(OpenTelemetryRecorder(provider))
    assert rails.turn().call("lookup", {"key": "abcdefgh"}).outcome is Outcome.INVALID_ARGS
    (span,) = exporter.get_finished_spans()
    attributes = span.attributes or {}
    assert attributes["error.type"] == "invalid_args"
    assert attributes["guardrails.verdict"] == "reject"
    assert attributes["guardrails.reason"] == "guard"
    # A guard's refusal is policy, not a fault: the status stays unset.
    assert span.status.status_code is StatusCode.UNSET
    events = [dict(e.attributes or {}) for e in span.events]
    assert events[0] == {
        "gen_ai.evaluation.name": "short_key",
        "gen_ai.evaluation.score.label": "reject",
        "guardrails.choke_point": "tool_call",
        "guardrails.enforced": True,
        "guardrails.reason": "too_long",
    }
    timestamps = [e.timestamp for e in span.events]
    assert timestamps == sorted(timestamps)
    assert span.start_time is not None and span.end_time is not None
    assert all(span.start_time <= t <= span.end_time for t in timestamps)


def test_an_escape_is_an_event_with_guard_choke_point_verdict_and_reason_and_no_text(
    provider: TracerProvider, exporter: InMemorySpanExporter
) -> None:
    rails = engine(OpenTelemetryRecorder(provider))
    assert rails.turn().call("lookup", {"key": "new"}).outcome is Outcome.OK
    (span,) = exporter.get_finished_spans()
    (escape,) = [e for e in span.events if e.name == "guardrails.escape"]
    assert dict(escape.attributes or {}) == {
        "guardrails.guard": "configured",
        "guardrails.choke_point": "tool_call",
        "guardrails.reason": EscapeReason.NOT_CONFIGURED.value,
        "guardrails.verdict": "not_evaluated",
        "exception.type": "guardrails.errors.NotConfigured",  # qualified by its module
    }
    assert (span.attributes or {})["guardrails.verdict"] == "not_evaluated"
    assert SECRET not in str(span.to_json())


def test_a_failed_tool_has_error_type_error_and_no_exception_text(
    provider: TracerProvider, exporter: InMemorySpanExporter
) -> None:
    rails = engine(OpenTelemetryRecorder(provider))
    assert rails.turn().call("lookup", {"key": "crash"}).outcome is Outcome.ERROR
    (span,) = exporter.get_finished_spans()
    # The exception's type, never its text; a fault sets the status.
    assert (span.attributes or {})["error.type"] == "RuntimeError"
    assert (span.attributes or {})["guardrails.reason"] == "raised"
    assert span.status.status_code is StatusCode.ERROR
    assert SECRET not in str(span.to_json())


def test_an_invented_tool_name_never_reaches_a_span(
    provider: TracerProvider, exporter: InMemorySpanExporter
) -> None:
    rails = engine(OpenTelemetryRecorder(provider))
    rails.turn().call("drop_all_tables_now", {})
    (span,) = exporter.get_finished_spans()
    assert span.name == "execute_tool _unknown"
    assert (span.attributes or {})["gen_ai.tool.name"] == "_unknown"
    assert (span.attributes or {})["error.type"] == "unavailable"
    assert "drop_all_tables_now" not in str(span.to_json())


def test_the_tool_span_is_a_child_of_the_current_span(
    provider: TracerProvider, exporter: InMemorySpanExporter
) -> None:
    rails = engine(OpenTelemetryRecorder(provider))
    with provider.get_tracer("agent").start_as_current_span("invoke_agent") as parent:
        rails.turn().call("lookup", {"key": "ab"})
    child, root = exporter.get_finished_spans()
    assert root.name == "invoke_agent"
    assert child.parent is not None
    assert child.parent.span_id == parent.get_span_context().span_id
    assert child.context is not None
    assert child.context.trace_id == parent.get_span_context().trace_id


async def test_async_calls_get_the_same_spans(
    provider: TracerProvider, exporter: InMemorySpanExporter
) -> None:
    rails = engine(OpenTelemetryRecorder(provider))
    await rails.turn().acall("lookup", {"key": "ab"}, call_id="c-1")
    rails.turn().call("lookup", {"key": "ab"}, call_id="c-2")
    a, s = exporter.get_finished_spans()
    strip = {"gen_ai.tool.call.id"}
    assert {k: v for k, v in (a.attributes or {}).items() if k not in strip} == {
        k: v for k, v in (s.attributes or {}).items() if k not in strip
    }
    assert [e.name for e in a.events] == [e.name for e in s.events]


def test_without_an_sdk_no_tracer_is_made_and_nothing_is_recorded() -> None:
    for provider in (NoOpTracerProvider(), ProxyTracerProvider()):
        recorder = OpenTelemetryRecorder(provider)
        rails = engine(recorder)
        for _ in range(3):
            assert rails.turn().call("lookup", {"key": "ab"}).outcome is Outcome.OK
        recorder.on_event("post_run", object())
        assert recorder._tracer is None
        assert recorder.failures == 0


def test_unsampled_calls_export_nothing_and_do_not_fail() -> None:
    exporter = InMemorySpanExporter()
    provider = TracerProvider(sampler=ALWAYS_OFF)
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    recorder = OpenTelemetryRecorder(provider)
    engine(recorder).turn().call("lookup", {"key": "new"})
    assert exporter.get_finished_spans() == ()
    assert recorder.failures == 0
    provider.shutdown()


@guard(at="pre_turn")
def no_weather(request: Any) -> GuardResult | Verdict:
    return GuardResult.rejected("weather") if "weather" in request.text.raw else Verdict.PASS


@guard(at="post_run")
def promised_call(run: Any) -> GuardResult | Verdict:
    if run.text and "we will call you" in run.text and not run.called_ok("lookup"):
        return GuardResult.rejected("promise", evidence=Perform("lookup", {"key": "cb"}))
    return Verdict.PASS


def test_pre_turn_post_run_and_backstop_have_spans(
    provider: TracerProvider, exporter: InMemorySpanExporter
) -> None:
    rails = Guardrails(
        [lookup], [no_weather, promised_call], recorder=OpenTelemetryRecorder(provider)
    )
    turn = rails.turn()
    turn.pre_turn("what is the weather", ["lookup"])
    turn.post_run("we will call you")
    spans = {s.name: s for s in exporter.get_finished_spans()}
    assert set(spans) == {
        "guardrails pre_turn",
        "execute_tool lookup",
        "guardrails backstop",
        "guardrails post_run",
    }
    pre = spans["guardrails pre_turn"]
    assert (pre.attributes or {})["guardrails.verdict"] == "reject"
    assert (pre.attributes or {})["guardrails.refused"] is True
    (event,) = pre.events
    assert pre.start_time is not None and pre.end_time is not None
    assert pre.start_time < pre.end_time == event.timestamp  # as long as its one guard took
    assert [dict(e.attributes or {})["gen_ai.evaluation.name"] for e in pre.events] == [
        "no_weather"
    ]
    backstop = spans["guardrails backstop"].attributes or {}
    call = spans["execute_tool lookup"].attributes or {}
    assert backstop["guardrails.rule"] == "promised_call"
    assert backstop["gen_ai.tool.name"] == "lookup"
    assert backstop["gen_ai.tool.call.id"] == call["gen_ai.tool.call.id"]
    post = spans["guardrails post_run"]
    assert (post.attributes or {})["guardrails.choke_point"] == "post_run"
    assert [dict(e.attributes or {})["gen_ai.evaluation.score.label"] for e in post.events] == [
        "reject"
    ]


def test_an_engine_binds_its_span_recorder_so_spans_carry_the_tool_description(
    provider: TracerProvider, exporter: InMemorySpanExporter
) -> None:
    rails = Guardrails([lookup], [], recorder=OpenTelemetryRecorder(provider))  # no bind()
    rails.turn().call("lookup", {"key": "ab"})
    (span,) = exporter.get_finished_spans()
    assert (span.attributes or {})["gen_ai.tool.description"] == lookup.description


def test_the_span_records_the_call_id_admission_fixed(
    provider: TracerProvider, exporter: InMemorySpanExporter
) -> None:
    rails = engine(OpenTelemetryRecorder(provider))
    turn = rails.turn()
    cases = {
        "a" * 128: "a" * 128,  # at the bound: kept
        "b" * 129: "b" * 128,  # one past it: cut
        "id\x00x": "id\\x00x",  # a control character: escaped
    }
    for given in cases:
        turn.call("lookup", {"key": "ab"}, call_id=given)
    turn.call("lookup", {"key": "ab"}, call_id="")
    ids = [(s.attributes or {})["gen_ai.tool.call.id"] for s in exporter.get_finished_spans()]
    assert ids[:3] == list(cases.values())
    assert str(ids[3]).startswith("gr_")
