"""The Prometheus recorder: closed label sets, registered guards, failures, threads."""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import pytest
from opentelemetry.sdk.trace import ReadableSpan, SpanProcessor, TracerProvider
from prometheus_client import REGISTRY, CollectorRegistry
from prometheus_client.parser import text_string_to_metric_families

from guardrails import (
    ChokePoint,
    Escape,
    EscapeReason,
    Guardrails,
    GuardResult,
    Outcome,
    ToolResult,
    Verdict,
    VerdictRecord,
    guard,
    tool,
)
from guardrails.observe.metrics import (
    EXPORTED,
    GUARD_EVALUATIONS,
    TOOL_OUTCOMES,
    UNKNOWN_TOOL,
    PrometheusRecorder,
)
from guardrails.observe.telemetry import OpenTelemetryRecorder
from guardrails.rules.effects import Perform


@tool
def lookup(key: str) -> str:
    """Look a key up."""
    return key


@guard
def short_key(call: Any) -> Verdict:
    return Verdict.PASS if len(call.arguments["key"]) < 5 else Verdict.REJECT


@dataclass(frozen=True)
class Decision:
    """A pre_turn or post_run payload."""

    verdicts: tuple[Any, ...]
    escapes: tuple[Any, ...] = ()


def series(text: str, name: str) -> dict[frozenset[tuple[str, str]], float]:
    return {
        frozenset(s.labels.items()): s.value
        for family in text_string_to_metric_families(text)
        for s in family.samples
        if s.name == name
    }


def test_invented_tool_names_collapse_into_one_series(
    registry: CollectorRegistry, scrape: Callable[[], str]
) -> None:
    metrics = PrometheusRecorder(registry)
    rails = Guardrails([lookup], [short_key], recorder=metrics)
    metrics.bind(rails)
    turn = rails.turn()
    hostile = ['x"} 1\nfake_metric 9', "a" * 10_000, "\N{PILE OF POO}"]
    for name in [*hostile, *(f"tool_{i}" for i in range(300))]:
        assert turn.call(name, {}).outcome is Outcome.UNAVAILABLE
    text = scrape()
    outcomes = series(text, TOOL_OUTCOMES)
    assert {dict(k)["tool"] for k in outcomes} == {"lookup", UNKNOWN_TOOL}
    assert outcomes[frozenset({("tool", UNKNOWN_TOOL), ("outcome", "unavailable")})] == 303
    assert "fake_metric" not in text and "tool_1" not in text


def test_bind_exposes_registered_guards_and_every_outcome_at_zero(
    registry: CollectorRegistry, scrape: Callable[[], str]
) -> None:
    rails = Guardrails([lookup], [short_key])
    PrometheusRecorder(registry, engine=rails)
    text = scrape()
    assert series(text, "guardrails_guard_registered") == {
        frozenset({("guard", "short_key"), ("choke_point", "tool_call")}): 1.0
    }
    evaluations = series(text, GUARD_EVALUATIONS)
    assert len(evaluations) == len(Verdict) and set(evaluations.values()) == {0.0}
    assert len(series(text, TOOL_OUTCOMES)) == 2 * len(Outcome)  # lookup and _unknown


def test_every_family_is_exported_with_its_documented_labels(
    registry: CollectorRegistry, scrape: Callable[[], str]
) -> None:
    metrics = PrometheusRecorder(registry, engine=Guardrails([lookup], [short_key]))
    metrics.on_event("backstop", {"rule": "r", "tool": "lookup"})
    metrics.on_event(
        "post_run", Decision((VerdictRecord("g", ChokePoint.POST_RUN, Verdict.NOT_EVALUATED),))
    )
    metrics.on_event(
        "post_run", Decision((), (Escape("g", ChokePoint.POST_RUN, EscapeReason.RAISED),))
    )
    metrics.on_event(  # a fail-closed guard that raised: a fault
        "post_run",
        Decision(
            (VerdictRecord("g", ChokePoint.POST_RUN, Verdict.REJECT),),
            (Escape("g", ChokePoint.POST_RUN, EscapeReason.RAISED),),
        ),
    )
    found: dict[str, set[str]] = {}
    for family in text_string_to_metric_families(scrape()):
        for s in family.samples:
            name = s.name.removesuffix("_bucket").removesuffix("_sum").removesuffix("_count")
            found.setdefault(name, set()).update(k for k in s.labels if k != "le")
    assert found == {name: set(labels) for name, labels in EXPORTED.items()}


def test_guards_an_unbound_recorder_has_not_seen_get_series_on_first_use(
    registry: CollectorRegistry, scrape: Callable[[], str]
) -> None:
    metrics = PrometheusRecorder(registry)
    rails = Guardrails([lookup], [short_key])  # results handed over, never bound
    metrics.on_tool_result(rails.turn().call("lookup", {"key": "ab"}))
    metrics.on_tool_result(rails.turn().call("lookup", {"key": "abcdef"}))
    evaluations = series(scrape(), GUARD_EVALUATIONS)
    key = {("guard", "short_key"), ("choke_point", "tool_call")}
    mode = ("mode", "enforce")
    assert evaluations[frozenset({*key, ("verdict", "pass"), mode})] == 1
    assert evaluations[frozenset({*key, ("verdict", "reject"), mode})] == 1
    assert "guardrails_guard_registered{" not in scrape()


def test_a_second_recorder_on_the_same_registry_is_refused(registry: CollectorRegistry) -> None:
    PrometheusRecorder(registry)
    with pytest.raises(ValueError, match="Duplicated timeseries"):
        PrometheusRecorder(registry)


def test_without_a_registry_the_default_one_is_used() -> None:
    metrics = PrometheusRecorder()
    try:
        assert metrics.registry is REGISTRY
        assert (
            REGISTRY.get_sample_value(
                "guardrails_telemetry_failures_total", {"recorder": "prometheus"}
            )
            == 0
        )
    finally:
        REGISTRY.unregister(metrics.collector)


def test_a_payload_outside_the_closed_sets_is_counted_as_a_failure_and_not_raised(
    registry: CollectorRegistry, scrape: Callable[[], str], caplog: pytest.LogCaptureFixture
) -> None:
    metrics = PrometheusRecorder(registry)
    bad_verdict = VerdictRecord("g", ChokePoint.PRE_TURN, "maybe")  # type: ignore[arg-type]
    bad_reason = Escape("g", ChokePoint.PRE_TURN, "bored")  # type: ignore[arg-type]
    with caplog.at_level(logging.WARNING, logger="guardrails"):
        metrics.on_event("pre_turn", Decision((bad_verdict,)))
        metrics.on_event("pre_turn", Decision((), (bad_reason,)))
        metrics.on_event("pre_turn", object())  # no verdicts at all: nothing to count
    assert metrics.failures == 2
    assert "prometheus recorder failed (1 failures so far)" in caplog.text
    text = scrape()
    assert "maybe" not in text and "bored" not in text
    assert (
        registry.get_sample_value("guardrails_telemetry_failures_total", {"recorder": "prometheus"})
        == 2
    )


class RaisingProcessor(SpanProcessor):
    """A span processor whose backend is down: it raises on every span end."""

    def on_end(self, span: ReadableSpan) -> None:
        raise ConnectionError("collector unreachable")


def test_a_failing_exporter_is_logged_and_counted_and_the_call_goes_on(
    registry: CollectorRegistry, caplog: pytest.LogCaptureFixture
) -> None:
    provider = TracerProvider()
    provider.add_span_processor(RaisingProcessor())
    spans = OpenTelemetryRecorder(provider)
    metrics = PrometheusRecorder(registry)
    rails = Guardrails([lookup], [short_key], recorder=[spans, metrics])
    metrics.bind(rails)
    with caplog.at_level(logging.WARNING, logger="guardrails"):
        results = [rails.turn().call("lookup", {"key": "ab"}) for _ in range(12)]
    assert [r.outcome for r in results] == [Outcome.OK] * 12
    assert spans.failures == 12
    assert caplog.text.count("opentelemetry recorder failed") == 2  # the 1st and the 10th
    get = registry.get_sample_value
    assert get("guardrails_telemetry_failures_total", {"recorder": "opentelemetry"}) == 12
    assert get("guardrails_tool_outcomes_total", {"tool": "lookup", "outcome": "ok"}) == 12
    provider.shutdown()


def test_counts_are_exact_when_many_threads_call_at_once(
    registry: CollectorRegistry,
) -> None:
    metrics = PrometheusRecorder(registry)
    rails = Guardrails([lookup], [short_key], recorder=metrics)
    barrier = threading.Barrier(4)

    def worker() -> None:
        turn = rails.turn()
        barrier.wait()
        for i in range(2000):
            turn.call("lookup", {"key": "ab" if i % 4 else "abcdef"})

    threads = [threading.Thread(target=worker) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    get = registry.get_sample_value
    labels = {"guard": "short_key", "choke_point": "tool_call"}
    assert get(GUARD_EVALUATIONS, {**labels, "verdict": "pass", "mode": "enforce"}) == 6000
    assert get(GUARD_EVALUATIONS, {**labels, "verdict": "reject", "mode": "enforce"}) == 2000
    assert get("guardrails_guard_duration_seconds_count", labels) == 8000


@guard(at="pre_turn")
def no_weather(request: Any) -> GuardResult | Verdict:
    return GuardResult.rejected("weather") if "weather" in request.text.raw else Verdict.PASS


@guard(at="post_run")
def promised_call(run: Any) -> GuardResult | Verdict:
    if run.text and "we will call you" in run.text and not run.called_ok("lookup"):
        return GuardResult.rejected("promise", evidence=Perform("lookup", {"key": "cb"}))
    return Verdict.PASS


def test_pre_turn_post_run_and_backstop_are_counted(
    registry: CollectorRegistry,
) -> None:
    metrics = PrometheusRecorder(registry)
    rails = Guardrails([lookup], [no_weather, promised_call], recorder=metrics)
    metrics.bind(rails)
    turn = rails.turn()
    turn.pre_turn("what is the weather", ["lookup"])
    turn.pre_turn("hello", ["lookup"])
    turn.post_run("we will call you")
    get = registry.get_sample_value
    pre = {"guard": "no_weather", "choke_point": "pre_turn"}
    assert get(GUARD_EVALUATIONS, {**pre, "verdict": "reject", "mode": "enforce"}) == 1
    assert get(GUARD_EVALUATIONS, {**pre, "verdict": "pass", "mode": "enforce"}) == 1
    post = {"guard": "promised_call", "choke_point": "post_run"}
    assert get(GUARD_EVALUATIONS, {**post, "verdict": "reject", "mode": "enforce"}) == 1
    assert (
        get("guardrails_backstop_actions_total", {"rule": "promised_call", "tool": "lookup"}) == 1
    )
    assert get("guardrails_guard_registered", pre) == 1
    assert get("guardrails_guard_registered", post) == 1


@tool
def refund(order: str) -> str:
    """Refund an order."""
    return order


@guard(tools=["refund"])
def refund_window(call: Any) -> Verdict:
    return Verdict.PASS


def test_engines_bound_to_one_recorder_add_up(
    registry: CollectorRegistry, scrape: Callable[[], str]
) -> None:
    metrics = PrometheusRecorder(registry)
    support = Guardrails([lookup], [short_key], recorder=metrics)
    billing = Guardrails([refund], [refund_window], recorder=metrics)
    metrics.bind(support).bind(billing)
    support.turn().call("lookup", {"key": "ab"})
    billing.turn().call("refund", {"order": "A-1"})
    billing.turn().call("lookup", {"key": "ab"})  # not a tool of billing: unavailable, _unknown
    text = scrape()
    assert {dict(k)["guard"] for k in series(text, "guardrails_guard_registered")} == {
        "short_key",
        "refund_window",
    }
    outcomes = {k: v for k, v in series(text, TOOL_OUTCOMES).items() if v}
    assert outcomes == {
        frozenset({("tool", "lookup"), ("outcome", "ok")}): 1,
        frozenset({("tool", "refund"), ("outcome", "ok")}): 1,
        frozenset({("tool", UNKNOWN_TOOL), ("outcome", "unavailable")}): 1,
    }
    failures = series(text, "guardrails_telemetry_failures_total")
    assert set(failures) == {
        frozenset({("recorder", "prometheus")}),
        frozenset({("recorder", "recorders")}),
    }


def test_a_bound_recorder_counts_an_unregistered_name_as_unknown_even_if_marked_known(
    registry: CollectorRegistry,
) -> None:
    metrics = PrometheusRecorder(registry, engine=Guardrails([lookup], [short_key]))
    forged = ToolResult("c-1", "not_registered", Outcome.OK, "x", Verdict.PASS)
    assert forged.known_tool
    metrics.on_tool_result(forged)
    get = registry.get_sample_value
    assert get(TOOL_OUTCOMES, {"tool": UNKNOWN_TOOL, "outcome": "ok"}) == 1
    assert get(TOOL_OUTCOMES, {"tool": "not_registered", "outcome": "ok"}) is None


def test_an_engine_binds_the_recorder_it_is_given(
    registry: CollectorRegistry, scrape: Callable[[], str]
) -> None:
    metrics = PrometheusRecorder(registry)
    Guardrails([lookup], [short_key], recorder=[metrics])  # no bind() by hand
    text = scrape()
    assert 'guardrails_guard_registered{choke_point="tool_call",guard="short_key"} 1.0' in text
    assert 'guardrails_tool_outcomes_total{outcome="ok",tool="lookup"} 0.0' in text


def test_a_recorder_whose_bind_raises_is_counted_and_the_engine_is_built() -> None:
    class Broken:
        name = "broken"

        def on_tool_result(self, result: Any, /) -> None: ...

        def on_event(self, kind: str, payload: Any, /) -> None: ...

        def bind(self, engine: Any) -> None:
            raise RuntimeError("cannot bind")

    rails = Guardrails([lookup], [short_key], recorder=[Broken()])
    assert rails.recorder is not None and rails.recorder.failures == 1
    assert rails.turn().call("lookup", {"key": "ab"}).outcome.value == "ok"


def test_a_broken_recorder_logs_its_traceback_at_the_1st_10th_100th_failure_only(
    caplog: pytest.LogCaptureFixture,
) -> None:
    class Broken:
        def on_tool_result(self, result: Any, /) -> None:
            raise RuntimeError("exporter down")

        def on_event(self, kind: str, payload: Any, /) -> None:
            raise RuntimeError("exporter down")

        def __repr__(self) -> str:  # never used for the log line
            raise RuntimeError("hostile repr")

    rails = Guardrails([lookup], [short_key], recorder=[Broken()])
    turn = rails.turn()
    with caplog.at_level(logging.WARNING, logger="guardrails"):
        for _ in range(1000):
            turn.call("lookup", {"key": "ab"})
    warnings = [r for r in caplog.records if r.levelno >= logging.WARNING]
    assert [r.getMessage() for r in warnings] == [
        f"Broken recorder failed ({n} failures so far)" for n in (1, 10, 100, 1000)
    ]
    assert all(r.exc_info is not None for r in warnings)
    assert rails.recorder is not None and rails.recorder.failures == 1000
