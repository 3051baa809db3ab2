"""The Grafana dashboard queries only what the library exports, in valid PromQL."""

from __future__ import annotations

import json
import re
import subprocess
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.parser import text_string_to_metric_families

from guardrails import ChokePoint, Escape, EscapeReason, Guardrails, Verdict, guard, tool
from guardrails.context import VerdictRecord
from guardrails.observe.metrics import (
    APPROVAL_DECISION_TIME,
    EXPORTED,
    GUARD_DURATION,
    TOOL_CALL_DURATION,
    TOOL_CALL_GUARD_TIME,
    PrometheusRecorder,
)

DASHBOARD = Path(__file__).resolve().parents[2] / "dashboards" / "guardrails-coverage.json"

# PromQL functions, aggregations and keywords the dashboard may use.
PROMQL = frozenset(
    {
        "sum",
        "count",
        "max",
        "min",
        "avg",
        "rate",
        "increase",
        "max_over_time",
        "min_over_time",
        "last_over_time",
        "label_replace",
        "offset",
        "time",
        "histogram_quantile",
        "vector",
        "by",
        "without",
        "on",
        "ignoring",
        "unless",
        "and",
        "or",
        "group_left",
        "group_right",
        "label_values",
    }
)
IDENTIFIER = re.compile(r"[A-Za-z_:][A-Za-z0-9_:]*")
GRAFANA_VARIABLES = {
    "$__rate_interval": "5m",
    "$__range_s": "3600",  # before $__range, which is its prefix
    "$__range": "1h",
    "$guard": ".*",
    "$choke_point": ".*",
}


@tool
def lookup(key: str) -> str:
    """Look a key up."""
    return key


@guard
def short_key(call: Any) -> Verdict:
    return Verdict.PASS


@dataclass(frozen=True)
class Escaped:
    verdicts: tuple[()] = ()
    escapes: tuple[Escape, ...] = (Escape("short_key", ChokePoint.TOOL_CALL, EscapeReason.RAISED),)


@dataclass(frozen=True)
class Faulted:
    """A fail-closed guard that raised: an enforced reject and its escape, a fault."""

    verdicts: tuple[VerdictRecord, ...] = (
        VerdictRecord("short_key", ChokePoint.TOOL_CALL, Verdict.REJECT),
    )
    escapes: tuple[Escape, ...] = (Escape("short_key", ChokePoint.TOOL_CALL, EscapeReason.RAISED),)


@pytest.fixture(scope="module")
def exported() -> dict[str, set[str]]:
    """Every sample name in a real exposition, with its label names."""
    registry = CollectorRegistry()
    metrics = PrometheusRecorder(registry)
    rails = Guardrails([lookup], [short_key], recorder=metrics)
    metrics.bind(rails)
    rails.turn().call("lookup", {"key": "a"})
    metrics.on_event("post_run", Escaped())
    metrics.on_event("post_run", Faulted())
    metrics.on_event("backstop", {"rule": "r", "tool": "lookup"})
    names: dict[str, set[str]] = {}
    for family in text_string_to_metric_families(generate_latest(registry).decode()):
        for s in family.samples:
            names.setdefault(s.name, set()).update(s.labels)
    return names


def walk(node: Any) -> Iterator[dict[str, Any]]:
    if isinstance(node, dict):
        yield node
        for value in node.values():
            yield from walk(value)
    elif isinstance(node, list):
        for value in node:
            yield from walk(value)


def queries() -> list[str]:
    dashboard = json.loads(DASHBOARD.read_text())
    found = [n["expr"] for n in walk(dashboard["panels"]) if isinstance(n.get("expr"), str)]
    for variable in dashboard["templating"]["list"]:
        query = variable.get("query")
        if isinstance(query, dict):
            found.append(query["query"])
    return found


def identifiers(expr: str) -> list[str]:
    text = re.sub(r'"(?:[^"\\]|\\.)*"', '""', expr)  # label values
    text = re.sub(r"\[[^\]]*\]", "", text)  # range selectors
    text = re.sub(r"\$\w+", "", text)  # Grafana variables
    return IDENTIFIER.findall(text)


def test_the_dashboard_has_queries_for_every_family() -> None:
    used = {i for q in queries() for i in identifiers(q) if i.startswith("guardrails_")}
    # The histogram is queried through its buckets.
    histograms = {GUARD_DURATION, TOOL_CALL_DURATION, TOOL_CALL_GUARD_TIME, APPROVAL_DECISION_TIME}
    families = {f"{n}_bucket" if n in histograms else n for n in EXPORTED}
    assert families <= used


def problems(expr: str, exported: dict[str, set[str]]) -> list[str]:
    """Metric names the library does not export, and labels those metrics do not carry."""
    words = identifiers(expr)
    metrics = [w for w in words if w.startswith("guardrails_")]
    if not metrics:
        return ["no guardrails metric"]
    found = [f"metric {m} is not exported" for m in metrics if m not in exported]
    labels = set().union(*(exported.get(m, set()) for m in metrics))
    others = {w for w in words if not w.startswith("guardrails_") and w not in PROMQL}
    found += [
        f"label {w} is not exported by {sorted(set(metrics))}" for w in sorted(others - labels)
    ]
    return found


@pytest.mark.parametrize("expr", queries())
def test_every_query_uses_only_exported_metrics_and_their_labels(
    expr: str, exported: dict[str, set[str]]
) -> None:
    assert problems(expr, exported) == []


def test_every_query_is_valid_promql(tmp_path: Path, promtool_path: str) -> None:
    rules = []
    for i, expr in enumerate(q for q in queries() if not q.startswith("label_values(")):
        for variable, value in GRAFANA_VARIABLES.items():
            expr = expr.replace(variable, value)
        rules.append({"record": f"guardrails:dashboard_query_{i}", "expr": expr})
    path = tmp_path / "rules.json"  # YAML is a superset of JSON
    path.write_text(json.dumps({"groups": [{"name": "dashboard", "rules": rules}]}))
    done = subprocess.run(
        [promtool_path, "check", "rules", str(path)], capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 0, done.stdout + done.stderr


def test_the_checker_catches_a_wrong_metric_or_label(exported: dict[str, set[str]]) -> None:
    assert problems("sum(rate(guardrails_guard_runs_total[5m]))", exported) == [
        "metric guardrails_guard_runs_total is not exported"
    ]
    assert problems("sum by (tenant) (rate(guardrails_tool_outcomes_total[5m]))", exported) == [
        "label tenant is not exported by ['guardrails_tool_outcomes_total']"
    ]
    assert problems('sum(rate(guardrails_tool_outcomes_total{le="1"}[5m]))', exported) == [
        "label le is not exported by ['guardrails_tool_outcomes_total']"
    ]
    assert problems("vector(1)", exported) == ["no guardrails metric"]


def test_the_import_dialog_asks_for_the_data_source_and_every_panel_uses_it() -> None:
    dashboard = json.loads(DASHBOARD.read_text())
    (source,) = dashboard["__inputs"]
    assert (source["type"], source["pluginId"]) == ("datasource", "prometheus")
    variables = {v["name"]: v for v in dashboard["templating"]["list"]}
    assert variables["datasource"]["current"]["value"] == "${" + source["name"] + "}"
    for panel in walk(dashboard["panels"]):
        if "datasource" in panel:
            assert panel["datasource"]["uid"] == "${datasource}", panel


def test_guard_panels_follow_the_variables_and_count_guards_not_instances() -> None:
    for expr in queries():
        if "label_values(" in expr:
            continue
        if "guard" in expr and "guardrails_tool_outcomes" not in expr:
            if any(
                k in expr
                for k in ("backstop", "telemetry_failures", "tool_call_", "revision", "approval")
            ):
                continue  # by rule, recorder, tool or revision: no guard label
            assert 'guard=~"$guard"' in expr and 'choke_point=~"$choke_point"' in expr, expr
        if "guardrails_guard_registered" in expr:
            assert "max by (guard, choke_point)" in expr, expr
        assert "increase(" not in expr or "[$__range]" in expr, expr  # no zoom-dependent sums
