"""The shipped alerting and recording rules, and the dashboard's panels, under ``promtool test rules``.

The dashboard's queries are read from its JSON with Grafana's variables set
and evaluated on synthetic series: a single escape after many clean scrapes is
seen on the escape panel, and "never ran" counts guards, not instances.
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

import pytest

DASHBOARDS = Path(__file__).resolve().parents[2] / "dashboards"
DASHBOARD = DASHBOARDS / "guardrails-coverage.json"

# Grafana's variables as the panels would see them over the last hour.
VARIABLES = {
    "$__rate_interval": "2m",
    "$__range_s": "3600",  # before $__range, which is its prefix
    "$__range": "1h",
    "$guard": ".*",
    "$choke_point": ".*",
}

# Two instances scraped once a minute for 90 minutes. ``region_rules`` passes
# on both and escapes once on instance a at 60m; ``idle`` is registered on both
# and never runs; ``strict`` is fail-closed and raises on every call on a.
# ``born`` is a process first scraped at 80m that escaped twice before (at
# 79m50s); ``late`` a target first scraped at 80m whose escape was at 5m.
SERIES = {
    'guardrails_guard_evaluations_total{guard="region_rules",choke_point="tool_call",verdict="pass",mode="enforce",instance="a"}': "0+10x90",
    'guardrails_guard_evaluations_total{guard="region_rules",choke_point="tool_call",verdict="pass",mode="enforce",instance="b"}': "0+10x90",
    'guardrails_guard_evaluations_total{guard="region_rules",choke_point="tool_call",verdict="not_evaluated",mode="enforce",instance="a"}': "0x90",
    'guardrails_fail_open_escapes_total{guard="region_rules",choke_point="tool_call",reason="raised",instance="a"}': "0x59 1x30",
    'guardrails_fail_open_escape_last_timestamp_seconds{guard="region_rules",choke_point="tool_call",reason="raised",instance="a"}': "_x60 3600x29",
    'guardrails_fail_open_escapes_total{guard="region_rules",choke_point="tool_call",reason="raised",instance="b"}': "0x90",
    'guardrails_fail_open_escapes_total{guard="born",choke_point="tool_call",reason="timeout",instance="c"}': "_x80 2x10",
    'guardrails_fail_open_escape_last_timestamp_seconds{guard="born",choke_point="tool_call",reason="timeout",instance="c"}': "_x80 4790x10",
    'guardrails_fail_open_escapes_total{guard="late",choke_point="tool_call",reason="raised",instance="d"}': "_x80 3x10",
    'guardrails_fail_open_escape_last_timestamp_seconds{guard="late",choke_point="tool_call",reason="raised",instance="d"}': "_x80 300x10",
    # An observe-mode guard: its deliberate escapes stay out of the headline stat.
    'guardrails_fail_open_escapes_total{guard="shadow",choke_point="tool_call",reason="observe_only",instance="a"}': "0+1x90",
    'guardrails_guard_evaluations_total{guard="strict",choke_point="tool_call",verdict="reject",mode="enforce",instance="a"}': "0+1x90",
    'guardrails_fail_closed_faults_total{guard="strict",choke_point="tool_call",reason="raised",instance="a"}': "0+1x90",
    'guardrails_guard_evaluations_total{guard="idle",choke_point="tool_call",verdict="pass",mode="enforce",instance="a"}': "0x90",
    'guardrails_guard_evaluations_total{guard="idle",choke_point="tool_call",verdict="pass",mode="enforce",instance="b"}': "0x90",
    **{
        f'guardrails_guard_registered{{guard="{g}",choke_point="tool_call",instance="{i}"}}': "1x90"
        for g, i in (("idle", "a"), ("idle", "b"), ("region_rules", "a"), ("region_rules", "b"))
    },
    'guardrails_guard_registered{guard="strict",choke_point="tool_call",instance="a"}': "1x90",
}

# Panel title -> the samples it shows at 90m (labels as promtool prints them).
# In the hour before 90m: region_rules made 2 x 600 passes, strict 60 rejects
# that were all faults, one escape happened, and ``born`` escaped twice.
EXPECTED: dict[str, list[dict[str, Any]]] = {
    "Fail-open escapes, observe mode aside (range)": [{"labels": "{}", "value": 3}],
    "Fail-open escapes by guard and reason (range)": [
        {"labels": '{guard="born",choke_point="tool_call",reason="timeout"}', "value": 2},
        {"labels": '{guard="region_rules",choke_point="tool_call",reason="raised"}', "value": 1},
        {"labels": '{guard="shadow",choke_point="tool_call",reason="observe_only"}', "value": 60},
    ],
    "Registered guards that never ran (range)": [],  # two panels, checked below
    "Not evaluated, faults included (share, range)": [{"labels": "{}", "value": 60 / 1260}],
}
NEVER_RAN_STAT = [{"labels": "{}", "value": 1}]
NEVER_RAN_TABLE = [{"labels": '{guard="idle",choke_point="tool_call"}', "value": 1}]


def panels() -> list[dict[str, Any]]:
    return list(json.loads(DASHBOARD.read_text())["panels"])


def expr_of(panel: dict[str, Any]) -> str:
    expr: str = panel["targets"][0]["expr"]
    for variable, value in VARIABLES.items():
        expr = expr.replace(variable, value)
    return expr


def run(promtool: str, path: Path) -> None:
    done = subprocess.run(
        [promtool, "test", "rules", str(path)], capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stdout + done.stderr


@pytest.mark.slow
def test_the_shipped_rules_pass_their_promtool_tests(promtool_path: str) -> None:
    done = subprocess.run(
        [promtool_path, "check", "rules", str(DASHBOARDS / "guardrails-rules.yml")],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    run(promtool_path, DASHBOARDS / "tests" / "rules_test.yml")


def test_the_dashboard_panels_show_a_single_escape_and_count_guards(
    promtool_path: str, tmp_path: Path
) -> None:
    tests = []
    for panel in panels():
        title = panel["title"]
        if title not in EXPECTED:
            continue
        expected = EXPECTED[title]
        if title.startswith("Registered guards that never ran"):
            expected = NEVER_RAN_STAT if panel["type"] == "stat" else NEVER_RAN_TABLE
        tests.append({"expr": expr_of(panel), "eval_time": "90m", "exp_samples": expected})
    assert len(tests) == 5, "a panel named in EXPECTED is missing from the dashboard"
    spec = {
        "rule_files": [],
        "evaluation_interval": "1m",
        "tests": [
            {
                "interval": "1m",
                "input_series": [{"series": s, "values": v} for s, v in SERIES.items()],
                "promql_expr_test": tests,
            }
        ],
    }
    path = tmp_path / "dashboard_test.json"  # YAML is a superset of JSON
    path.write_text(json.dumps(spec))
    run(promtool_path, path)
