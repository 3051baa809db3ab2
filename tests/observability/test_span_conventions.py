"""Spans after the GenAI conventions: description, error.type, evaluation events, call ids, reuse of an id."""

from __future__ import annotations

import asyncio
import threading
from typing import Any

from hypothesis import given
from hypothesis import strategies as st
from opentelemetry import trace
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from guardrails import Guardrails, Outcome, Verdict, guard, tool
from guardrails.observe._span_fields import MAX_CALL_ID, call_id_value
from guardrails.observe._tool_spans import _OPEN
from guardrails.observe.telemetry import OpenTelemetryRecorder


@tool
def lookup(key: str) -> str:
    """Look a key up in the order book."""
    return key


@guard
def allowed(call: Any) -> Verdict:
    return Verdict.PASS


def test_the_tool_description_is_on_the_span_when_known(
    provider: TracerProvider, exporter: InMemorySpanExporter
) -> None:
    spans = OpenTelemetryRecorder(provider)
    rails = Guardrails([lookup], [allowed], recorder=spans)
    spans.bind(rails)
    rails.turn().call("lookup", {"key": "k"})
    rails.turn().call("invented", {})
    known, unknown = exporter.get_finished_spans()
    assert (known.attributes or {})["gen_ai.tool.description"] == "Look a key up in the order book."
    assert "gen_ai.tool.description" not in (unknown.attributes or {})


def test_the_hook_span_has_the_description_without_bind(
    provider: TracerProvider, exporter: InMemorySpanExporter
) -> None:
    spans = OpenTelemetryRecorder(provider)
    rails = Guardrails([lookup], hooks=[spans.hook()], recorder=spans)
    rails.turn().call("lookup", {"key": "k"})
    (span,) = exporter.get_finished_spans()
    assert (span.attributes or {})["gen_ai.tool.description"] == "Look a key up in the order book."


def test_each_verdict_is_an_evaluation_event(
    provider: TracerProvider, exporter: InMemorySpanExporter
) -> None:
    rails = Guardrails([lookup], [allowed], recorder=OpenTelemetryRecorder(provider))
    rails.turn().call("lookup", {"key": "k"})
    (span,) = exporter.get_finished_spans()
    (event,) = span.events
    assert event.name == "gen_ai.evaluation.result"
    assert dict(event.attributes or {}) == {
        "gen_ai.evaluation.name": "allowed",
        "gen_ai.evaluation.score.label": "pass",
        "guardrails.choke_point": "tool_call",
        "guardrails.enforced": True,
    }


@given(st.one_of(st.text(max_size=400), st.none(), st.integers(), st.binary(max_size=10)))
def test_a_recorded_call_id_is_short_printable_text_or_nothing(call_id: Any) -> None:
    recorded = call_id_value(call_id)
    if type(call_id) is not str or not call_id:
        assert recorded is None
    elif len(call_id) <= MAX_CALL_ID and call_id.isprintable():
        assert recorded == call_id
    else:  # the branch for long or unprintable ids is reached by generated input
        assert recorded is not None and recorded.startswith("sha256:") and len(recorded) == 39
        assert recorded == call_id_value(call_id)  # the same id, the same digest


def test_a_huge_or_empty_call_id_never_reaches_the_span_as_is(
    provider: TracerProvider, exporter: InMemorySpanExporter
) -> None:
    rails = Guardrails([lookup], recorder=OpenTelemetryRecorder(provider))
    huge = "x" * 200_008
    for call_id in (huge, "", "line\nbreak"):
        rails.turn().call("lookup", {"key": "k"}, call_id=call_id)
    for span in exporter.get_finished_spans():
        recorded = (span.attributes or {}).get("gen_ai.tool.call.id")
        assert recorded is None or (len(recorded) <= MAX_CALL_ID and recorded.isprintable())


def traced(provider: TracerProvider, barrier: threading.Barrier | None = None) -> Any:
    backend = provider.get_tracer("backend")

    @tool
    def slow(key: str) -> str:
        """Wait for the others, inside a span of its own."""
        with backend.start_as_current_span(f"GET /{key}"):
            if barrier is not None:
                barrier.wait(timeout=30)
            return key

    @tool
    async def aslow(key: str) -> str:
        """The same, async."""
        with backend.start_as_current_span(f"GET /{key}"):
            await asyncio.sleep(0)
            await asyncio.sleep(0)
            return key

    return slow, aslow


def check_tree(spans: tuple[ReadableSpan, ...], calls: int) -> None:
    tool_spans = {s.context.span_id: s for s in spans if s.name.startswith("execute_tool")}
    inner = [s for s in spans if s.name.startswith("GET /")]
    assert len(tool_spans) == len(inner) == calls
    parents = [s.parent.span_id for s in inner if s.parent is not None]
    assert sorted(parents) == sorted(tool_spans)  # each inner span has its own ended parent
    for s in inner:
        parent = tool_spans[s.parent.span_id]  # type: ignore[union-attr]
        assert (parent.attributes or {})["gen_ai.tool.call.id"] == "same"
        key = s.name.removeprefix("GET /")
        assert parent.end_time is not None and key


def test_concurrent_calls_reusing_one_call_id_in_threads_keep_the_trace(
    provider: TracerProvider, exporter: InMemorySpanExporter
) -> None:
    barrier = threading.Barrier(4)
    spans = OpenTelemetryRecorder(provider)
    slow, aslow = traced(provider, barrier)
    rails = Guardrails([slow, aslow], hooks=[spans.hook()], recorder=spans)
    outside = trace.get_current_span()
    results: list[Outcome] = []

    def call(i: int) -> None:
        results.append(rails.turn().call("slow", {"key": f"k{i}"}, call_id="same").outcome)
        assert trace.get_current_span() is trace.INVALID_SPAN

    threads = [threading.Thread(target=call, args=(i,)) for i in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=60)
    assert results == [Outcome.OK] * 4
    assert trace.get_current_span() is outside and not _OPEN.get()
    check_tree(exporter.get_finished_spans(), 4)
    assert spans.failures == 0


async def test_concurrent_async_calls_reusing_one_call_id_keep_the_trace(
    provider: TracerProvider, exporter: InMemorySpanExporter
) -> None:
    spans = OpenTelemetryRecorder(provider)
    _, aslow = traced(provider)
    rails = Guardrails([aslow], hooks=[spans.hook()], recorder=spans)
    turn = rails.turn()
    results = await asyncio.gather(
        *(turn.acall("aslow", {"key": f"k{i}"}, call_id="same") for i in range(8))
    )
    assert [r.outcome for r in results] == [Outcome.OK] * 8
    assert not _OPEN.get() and spans.failures == 0
    check_tree(exporter.get_finished_spans(), 8)
