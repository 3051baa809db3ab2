"""``Guardrails.revision``: a content hash of the guards, tools and policy, on rows and spans."""

from __future__ import annotations

import json
import subprocess
import sys
from typing import Any

from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from prometheus_client import CollectorRegistry, generate_latest

from guardrails import Guardrails, Verdict, guard, tool
from guardrails.audit import AuditLog
from guardrails.observe.metrics import PrometheusRecorder
from guardrails.observe.telemetry import OpenTelemetryRecorder
from guardrails.policy import Param, Policy
from guardrails.store import MemoryStore


@tool
def pay(iban: str, amount: int) -> str:
    """Pay."""
    return "paid"


@guard
def small(call: Any) -> Verdict:
    return Verdict.PASS


def test_the_same_rules_give_the_same_revision_and_any_change_another() -> None:
    base = Guardrails([pay], [small]).revision
    assert len(base) == 16 and int(base, 16) >= 0
    assert Guardrails([pay], [small]).revision == base
    assert Guardrails([pay]).revision != base  # a guard fewer
    assert Guardrails([pay], [guard(small.fn, name="other")]).revision != base
    assert Guardrails([pay], [guard(small.fn, fail_closed=True)]).revision != base
    rails = Guardrails([pay], [small])
    before = rails.revision
    rails.load_policy(Policy(params=(Param("pay", "amount", max=100),)))
    with_policy = rails.revision
    assert with_policy != before
    other = Guardrails([pay], [small])
    other.load_policy(Policy(params=(Param("pay", "amount", max=101),)))
    assert other.revision not in (before, with_policy)  # a near miss: one bound moved by 1


def test_the_revision_is_the_same_in_another_process() -> None:
    code = (
        "from tests.test_revision import pay, small\n"
        "from guardrails import Guardrails\n"
        "print(Guardrails([pay], [small]).revision)\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=True
    )
    assert done.stdout.strip() == Guardrails([pay], [small]).revision


def test_audit_rows_and_spans_carry_the_revision() -> None:
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    audit = AuditLog(MemoryStore())
    rails = Guardrails(
        [pay], [small], hooks=[audit], recorder=[audit, OpenTelemetryRecorder(provider)]
    )
    turn = rails.turn()
    turn.call("pay", {"iban": "x", "amount": 1})
    turn.call("pay", {"amount": "not a number"})  # refused before the hooks: a recorder row
    turn.post_run("done")
    rows = list(audit.rows())
    assert {json.loads(r.detail or "{}").get("revision") for r in rows} == {rails.revision}
    assert {
        (s.attributes or {}).get("guardrails.revision") for s in exporter.get_finished_spans()
    } == {rails.revision}


def test_the_info_metric_names_the_revision_in_force() -> None:
    registry = CollectorRegistry()
    rails = Guardrails([pay], [small], recorder=PrometheusRecorder(registry))
    text = generate_latest(registry).decode()
    assert f'guardrails_policy_revision_info{{revision="{rails.revision}"}} 1.0' in text
