"""Metric names, labels, HELP texts, span and event names, alert names: as docs/observability.md writes them."""

from __future__ import annotations

import re
from pathlib import Path

from prometheus_client import CollectorRegistry, generate_latest

from guardrails.observe import telemetry
from guardrails.observe.metrics import EXPORTED, HELP, PrometheusRecorder

ROOT = Path(__file__).resolve().parents[2]
DOC = (ROOT / "docs" / "observability.md").read_text()
RULES = (ROOT / "dashboards" / "guardrails-rules.yml").read_text()


def table(header: str) -> list[list[str]]:
    """The rows of the markdown table whose header row starts with ``header``."""
    lines = DOC.splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith(header))
    rows = []
    for line in lines[start + 2 :]:
        if not line.startswith("|"):
            break
        rows.append([c.strip() for c in line.strip("|").split(" | ")])
    return rows


def code(cell: str) -> list[str]:
    return re.findall(r"`([^`]+)`", cell)


def test_the_metrics_table_has_every_name_and_its_labels() -> None:
    rows = table("| metric | type | labels | counts |")
    assert {code(r[0])[0]: tuple(code(r[2])) for r in rows} == dict(EXPORTED)


def test_the_help_texts_are_the_documented_sentences() -> None:
    rows = table("| metric | HELP |")
    assert {code(r[0])[0]: r[1] for r in rows} == dict(HELP)
    scraped = generate_latest(_recorder_registry()).decode()
    for name, text in HELP.items():
        family = name.removesuffix("_total")
        assert f"# HELP {name} {text}\n" in scraped or f"# HELP {family} {text}\n" in scraped


def _recorder_registry() -> CollectorRegistry:
    registry = CollectorRegistry()
    PrometheusRecorder(registry)
    return registry


def test_the_span_and_event_names_are_the_documented_ones() -> None:
    spans = {code(r[0])[0] for r in table("| span | when | attributes |")}
    assert spans == {
        f"{telemetry.EXECUTE_TOOL} {{tool}}",
        telemetry.SPAN_PRE_TURN,
        telemetry.SPAN_POST_RUN,
        telemetry.SPAN_BACKSTOP,
    }
    events = {code(r[0])[0] for r in table("| event | when | attributes |")}
    assert events == {
        telemetry.EVENT_VERDICT,
        telemetry.EVENT_ESCAPE,
        telemetry.EVENT_FAULT,
        telemetry.EVENT_APPROVAL_REQUESTED,
        telemetry.EVENT_APPROVAL_GRANTED,
        telemetry.EVENT_APPROVAL_DENIED,
        telemetry.EVENT_APPROVAL_EXPIRED,
    }
    assert telemetry.EVENT_VERDICT == "gen_ai.evaluation.result"
    attributes = " ".join(" ".join(r) for r in table("| span | when | attributes |"))
    attributes += " ".join(" ".join(r) for r in table("| event | when | attributes |"))
    for name in (
        telemetry.GEN_AI_OPERATION_NAME,
        telemetry.GEN_AI_TOOL_NAME,
        telemetry.GEN_AI_TOOL_CALL_ID,
        telemetry.GEN_AI_TOOL_TYPE,
        telemetry.GEN_AI_TOOL_DESCRIPTION,
        telemetry.GEN_AI_EVALUATION_NAME,
        telemetry.GEN_AI_EVALUATION_SCORE_LABEL,
        telemetry.ERROR_TYPE,
        telemetry.ATTR_OUTCOME,
        telemetry.ATTR_VERDICT,
        telemetry.ATTR_REASON,
        telemetry.ATTR_CHOKE_POINT,
        telemetry.ATTR_ENFORCED,
        telemetry.ATTR_GUARD,
        telemetry.ATTR_RULE,
        telemetry.ATTR_REFUSED,
        telemetry.ATTR_TRUNCATED,
        telemetry.ATTR_EXCEPTION_TYPE,
        telemetry.ATTR_APPROVAL_REQUEST,
        telemetry.ATTR_APPROVAL_WAITED,
    ):
        assert f"`{name}" in attributes, name


def test_the_alert_and_recording_rules_are_the_documented_ones() -> None:
    alerts = {code(r[0])[0] for r in table("| alert | fires when |")}
    records = {code(r[0])[0] for r in table("| recording rule | value |")}
    assert alerts == set(re.findall(r"- alert: (\S+)", RULES))
    assert records == set(re.findall(r"- record: (\S+)", RULES))
