"""1,000 calls with known verdicts and escapes: exact counts in metrics, spans and coverage."""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from prometheus_client import CollectorRegistry
from prometheus_client.parser import text_string_to_metric_families

from guardrails import (
    ChokePoint,
    Escape,
    EscapeReason,
    Guardrails,
    NotConfigured,
    Verdict,
    VerdictRecord,
    guard,
    tool,
)
from guardrails.cli import main as cli
from guardrails.observe.metrics import PrometheusRecorder
from guardrails.observe.telemetry import OpenTelemetryRecorder


@tool
def lookup(key: str) -> str:
    """Look a key up."""
    return key.upper()


@tool
def explode() -> str:
    """A tool that always fails."""
    raise RuntimeError("disk on fire")


@tool
def notify_human(reason: str) -> str:
    """Escalate to a person."""
    return "queued"


@guard(tools=["lookup"], outcome="invalid_args")
def allow_listed(call: Any) -> Verdict:
    return Verdict.REJECT if call.arguments["key"] == "blocked" else Verdict.PASS


@guard(tools=["lookup"])
def needs_config(call: Any) -> Verdict:
    if call.arguments["key"] == "slow":
        raise NotConfigured("no rule for this key")
    return Verdict.PASS


@guard(tools=["explode"])
def boom_guard(call: Any) -> Verdict:
    raise ValueError("guard bug")


@guard(tools=["notify_human"])
def never(call: Any) -> Verdict:
    return Verdict.PASS


@dataclass(frozen=True)
class Decision:
    """A pre_turn or post_run payload: what those choke-points report."""

    verdicts: tuple[VerdictRecord, ...]
    escapes: tuple[Escape, ...] = ()


@dataclass(frozen=True)
class Action:
    rule: str
    tool: str


PRE = ChokePoint.PRE_TURN
POST = ChokePoint.POST_RUN


def drive(rails: Guardrails) -> None:
    """1,000 tool calls, 10 pre_turn decisions, 5 post_run reports, 3 backstop actions."""
    turn = rails.turn(tenant="acme")
    for i in range(1000):
        kind = i % 10
        if kind <= 5:
            turn.call("lookup", {"key": "a"})
        elif kind == 6:
            turn.call("lookup", {"key": "blocked"})
        elif kind == 7:
            turn.call("lookup", {"key": "slow"})
        elif kind == 8:
            turn.call(f"rm_rf_{i}", {})  # invented by the model: one series for all
        else:
            turn.call("explode", {})
    recorder = rails.recorder
    assert recorder is not None
    for i in range(10):
        if i < 2:
            record = VerdictRecord("topic_filter", PRE, Verdict.NOT_EVALUATED, "timeout")
            escape = (Escape("topic_filter", PRE, EscapeReason.TIMEOUT),)
            recorder.on_event("pre_turn", Decision((record,), escape))
        else:
            recorder.on_event(
                "pre_turn", Decision((VerdictRecord("topic_filter", PRE, Verdict.PASS),))
            )
    for _ in range(5):
        record = VerdictRecord("promised_escalation", POST, Verdict.REJECT)
        recorder.on_event("post_run", Decision((record,)))
    for _ in range(3):
        recorder.on_event("backstop", Action("promised_escalation", "notify_human"))


# (guard, choke_point) -> verdict -> count
EVALUATIONS = {
    ("allow_listed", "tool_call"): {"pass": 700, "reject": 100, "not_evaluated": 0},
    ("needs_config", "tool_call"): {"pass": 700, "reject": 0, "not_evaluated": 100},
    ("boom_guard", "tool_call"): {"pass": 0, "reject": 0, "not_evaluated": 100},
    ("never", "tool_call"): {"pass": 0, "reject": 0, "not_evaluated": 0},
    ("topic_filter", "pre_turn"): {"pass": 8, "reject": 0, "not_evaluated": 2},
    ("promised_escalation", "post_run"): {"pass": 0, "reject": 5, "not_evaluated": 0},
}
ESCAPES = {
    ("needs_config", "tool_call", "not_configured"): 100,
    ("boom_guard", "tool_call", "raised"): 100,
    ("topic_filter", "pre_turn", "timeout"): 2,
}
OUTCOMES = {
    ("lookup", "ok"): 700,
    ("lookup", "invalid_args"): 100,
    ("_unknown", "unavailable"): 100,
    ("explode", "error"): 100,
}


@pytest.fixture
def run(registry: CollectorRegistry, provider: TracerProvider, scrape: Callable[[], str]) -> str:
    metrics = PrometheusRecorder(registry)
    spans = OpenTelemetryRecorder(provider)
    rails = Guardrails(
        [lookup, explode, notify_human],
        [allow_listed, needs_config, boom_guard, never],
        recorder=[metrics, spans],
    )
    metrics.bind(rails)
    drive(rails)
    return scrape()


def samples(text: str, name: str) -> dict[tuple[str, ...], float]:
    out: dict[tuple[str, ...], float] = {}
    for family in text_string_to_metric_families(text):
        for s in family.samples:
            if s.name == name:
                out[tuple(s.labels[k] for k in sorted(s.labels))] = s.value
    return out


def test_exposition_has_the_exact_counts(run: str) -> None:
    evaluations = samples(run, "guardrails_guard_evaluations_total")
    # labels sorted by name: choke_point, guard, mode, verdict
    expected = {
        (point, guard, "enforce", verdict): float(n)
        for (guard, point), by_verdict in EVALUATIONS.items()
        for verdict, n in by_verdict.items()
    }
    assert evaluations == expected
    escapes = {k: v for k, v in samples(run, "guardrails_fail_open_escapes_total").items() if v}
    assert escapes == {(p, g, r): float(n) for (g, p, r), n in ESCAPES.items()}
    faults = samples(run, "guardrails_fail_closed_faults_total")
    assert set(faults.values()) == {0.0}  # no guard here is fail-closed
    outcomes = {k: v for k, v in samples(run, "guardrails_tool_outcomes_total").items() if v}
    assert outcomes == {(o, t): float(n) for (t, o), n in OUTCOMES.items()}
    assert samples(run, "guardrails_backstop_actions_total") == {
        ("promised_escalation", "notify_human"): 3.0
    }
    counts = samples(run, "guardrails_guard_duration_seconds_count")
    assert counts == {(p, g): float(sum(v.values())) for (g, p), v in EVALUATIONS.items()}
    registered = samples(run, "guardrails_guard_registered")
    assert set(registered) == {
        ("tool_call", g) for g in ("allow_listed", "needs_config", "boom_guard", "never")
    }
    assert samples(run, "guardrails_telemetry_failures_total") == {
        ("opentelemetry",): 0.0,
        ("prometheus",): 0.0,
        ("recorders",): 0.0,
    }


def test_the_exposition_passes_promtool_check_metrics(
    run: str, promtool: Callable[[str], None]
) -> None:
    promtool(run)


def test_spans_have_the_exact_counts(run: str, exporter: InMemorySpanExporter) -> None:
    spans = exporter.get_finished_spans()
    names = Counter(s.name for s in spans)
    assert names == {
        "execute_tool lookup": 800,
        "execute_tool _unknown": 100,
        "execute_tool explode": 100,
        "guardrails pre_turn": 10,
        "guardrails post_run": 5,
        "guardrails backstop": 3,
    }
    tool_spans = [s for s in spans if s.name.startswith("execute_tool ")]
    errors = Counter((s.attributes or {}).get("error.type") for s in tool_spans)
    assert errors == {None: 700, "invalid_args": 100, "unavailable": 100, "RuntimeError": 100}
    verdicts: Counter[tuple[str, str, str]] = Counter()
    escapes: Counter[tuple[str, str, str]] = Counter()
    for span in spans:
        for event in span.events:
            a = event.attributes or {}
            point = str(a["guardrails.choke_point"])
            if event.name == "gen_ai.evaluation.result":
                key = (str(a["gen_ai.evaluation.name"]), point)
                verdicts[(*key, str(a["gen_ai.evaluation.score.label"]))] += 1
            elif event.name == "guardrails.escape":
                escapes[(str(a["guardrails.guard"]), point, str(a["guardrails.reason"]))] += 1
    expected = Counter(
        {(g, p, v): n for (g, p), by in EVALUATIONS.items() for v, n in by.items() if n}
    )
    assert verdicts == expected
    assert escapes == Counter(ESCAPES)


def test_coverage_json_has_the_exact_counts(
    run: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "metrics.txt"
    path.write_text(run)
    assert cli(["coverage", str(path), "--format", "json"]) == 0
    report = json.loads(capsys.readouterr().out)
    got = {
        (g["guard"], g["choke_point"]): {v: g[v] for v in ("pass", "reject", "not_evaluated")}
        for g in report["guards"]
    }
    assert got == EVALUATIONS
    by_guard = {(g["guard"], g["choke_point"]): g for g in report["guards"]}
    assert by_guard[("needs_config", "tool_call")]["not_evaluated_share"] == 0.125
    assert by_guard[("needs_config", "tool_call")]["escapes"] == {"not_configured": 100}
    assert by_guard[("boom_guard", "tool_call")]["escapes"] == {"raised": 100}
    assert by_guard[("topic_filter", "pre_turn")]["escapes"] == {"timeout": 2}
    never_ran = [(g["guard"], g["registered"]) for g in report["guards"] if g["never_ran"]]
    assert never_ran == [("never", True)]
    tools = {t["tool"]: t["calls"] for t in report["tools"]}
    assert tools == {"_unknown": 100, "explode": 100, "lookup": 800, "notify_human": 0}
    assert report["backstop"] == [
        {"rule": "promised_escalation", "tool": "notify_human", "actions": 3}
    ]
    assert report["violations"] == []


def test_coverage_gates_fail_on_a_never_run_guard_and_a_high_not_evaluated_share(
    run: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "metrics.txt"
    path.write_text(run)
    assert cli(["coverage", str(path), "--fail-never-ran"]) == 1
    assert "FAIL: guard 'never' at tool_call: registered but never ran" in capsys.readouterr().out
    assert cli(["coverage", str(path), "--max-not-evaluated", "20%"]) == 1
    out = capsys.readouterr().out
    assert "guard 'boom_guard' at tool_call: not_evaluated share 100.00%" in out
    assert "'needs_config'" not in out.split("FAIL", 1)[1]  # 12.5% is under 20%
    assert cli(["coverage", str(path), "--max-not-evaluated", "1.0"]) == 0
