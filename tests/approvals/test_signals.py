"""The approval metrics: what the gate reports, what a scrape shows, and the pending gauge."""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from prometheus_client import CollectorRegistry, generate_latest

from guardrails import Guardrails, tool
from guardrails.approvals import ApprovalGate, Approvals
from guardrails.audit import AuditLog
from guardrails.observe._approval_event import APPROVAL, ApprovalEvent
from guardrails.observe.metrics import PrometheusRecorder
from guardrails.store import MemoryStore, Store, StoreUnavailable
from guardrails.verdicts import Outcome

BIG = {"amount": 900, "to": "bob"}
EVENTS = "guardrails_approval_events_total"
DECISIONS = "guardrails_approval_decision_seconds"
PENDING = "guardrails_approval_oldest_pending_seconds"


class Clock:
    def __init__(self) -> None:
        self.now = 1_000.0

    def __call__(self) -> float:
        return self.now


class Bench:
    """An engine with one gated tool and one plain one, its metrics and the people's side."""

    def __init__(self, store: Any, *, ttl: float = 600.0, audit: Any = None) -> None:
        self.clock = Clock()
        self.registry = CollectorRegistry()
        self.metrics = PrometheusRecorder(self.registry, multiprocess=False, clock=self.clock)

        @tool(approval="amount > 500", effect=True)
        def transfer(amount: int, to: str) -> str:
            return "sent"

        @tool
        def lookup(key: str) -> str:
            return key

        recorders = [self.metrics] if audit is None else [self.metrics, audit]
        gate = ApprovalGate(store, ttl=ttl, clock=self.clock)
        self.engine = Guardrails([transfer, lookup], hooks=[gate], recorder=recorders)
        self.metrics.bind(self.engine)
        self.people = Approvals(store, clock=self.clock)

    def call(self, arguments: Any = BIG) -> Any:
        return self.engine.turn(tenant="acme", session="s1").call("transfer", arguments)

    def value(self, name: str, **labels: str) -> float | None:
        return self.registry.get_sample_value(name, labels)

    def events(self, tool: str = "transfer") -> dict[str, float | None]:
        names = ("requested", "granted", "denied", "expired")
        return {e: self.value(EVENTS, tool=tool, event=e) for e in names}

    def decide(self, approve: bool) -> None:
        [request] = self.people.list("pending")
        decide = self.people.approve if approve else self.people.deny
        decide(request.id, by="alice")


def test_every_registered_tool_has_its_series_from_zero(store: Store) -> None:
    bench = Bench(store)
    for name in ("transfer", "lookup", "_unknown"):
        assert bench.events(name) == dict.fromkeys(bench.events(name), 0.0)
        assert bench.value(f"{DECISIONS}_count", tool=name) == 0.0
        assert bench.value(PENDING, tool=name) == 0.0


def test_a_request_its_wait_and_its_approval(store: Store) -> None:
    bench = Bench(store)
    assert bench.call().outcome is Outcome.UNAVAILABLE
    bench.clock.now += 30
    assert bench.call().outcome is Outcome.UNAVAILABLE  # a retry while it waits counts nothing
    assert bench.events() == {"requested": 1.0, "granted": 0.0, "denied": 0.0, "expired": 0.0}
    assert bench.value(PENDING, tool="transfer") == 30.0
    bench.clock.now += 10
    bench.decide(approve=True)  # 40 s after the request
    assert bench.value(PENDING, tool="transfer") == 0.0
    bench.clock.now += 500  # the retry comes later: the decision's time is what counts
    assert bench.call().outcome is Outcome.OK
    assert bench.events() == {"requested": 1.0, "granted": 1.0, "denied": 0.0, "expired": 0.0}
    assert bench.value(f"{DECISIONS}_sum", tool="transfer") == 40.0
    assert bench.value(f"{DECISIONS}_bucket", tool="transfer", le="30.0") == 0.0
    assert bench.value(f"{DECISIONS}_bucket", tool="transfer", le="60.0") == 1.0
    assert bench.call().outcome is Outcome.UNAVAILABLE  # used once: a new request
    assert bench.events()["requested"] == 2.0
    assert bench.events()["granted"] == 1.0


def test_a_denial_counts_each_call_it_stops_and_observes_no_decision_time(store: Store) -> None:
    bench = Bench(store)
    bench.call()
    bench.decide(approve=False)
    bench.call()
    bench.call()
    assert bench.events() == {"requested": 1.0, "granted": 0.0, "denied": 2.0, "expired": 0.0}
    assert bench.value(f"{DECISIONS}_count", tool="transfer") == 0.0
    assert bench.value(PENDING, tool="transfer") == 0.0


def test_an_expired_request_counts_once_and_its_replacement_is_requested(store: Store) -> None:
    bench = Bench(store, ttl=60.0)
    bench.call()
    bench.clock.now += 59.0
    assert bench.value(PENDING, tool="transfer") == 59.0
    bench.clock.now += 1.0  # at expires_at: no longer pending
    assert bench.value(PENDING, tool="transfer") == 0.0
    bench.call()
    assert bench.events() == {"requested": 2.0, "granted": 0.0, "denied": 0.0, "expired": 1.0}
    assert bench.value(PENDING, tool="transfer") == 0.0  # the new one, just asked
    bench.clock.now += 5.0
    assert bench.value(PENDING, tool="transfer") == 5.0


def test_the_async_entry_points_count_the_same(store: Store) -> None:
    bench = Bench(store)

    async def call() -> Any:
        return await bench.engine.turn(tenant="acme", session="s1").acall("transfer", BIG)

    asyncio.run(call())
    bench.clock.now += 7
    bench.decide(approve=True)
    assert asyncio.run(call()).outcome is Outcome.OK
    assert bench.events() == {"requested": 1.0, "granted": 1.0, "denied": 0.0, "expired": 0.0}
    assert bench.value(f"{DECISIONS}_sum", tool="transfer") == 7.0


def test_the_audit_log_writes_no_row_for_the_approval_event() -> None:
    store = MemoryStore()
    audit = AuditLog(store)
    bench = Bench(store, audit=audit)
    bench.call()
    kinds = [row.kind for row in audit.rows()]
    assert kinds  # the held call's own row
    assert APPROVAL not in kinds
    assert bench.events()["requested"] == 1.0


@pytest.mark.parametrize(
    "event",
    [
        ApprovalEvent("transfer", True, ("requested", "approved")),  # one value outside the set
        ApprovalEvent("transfer", True, ("granted",), float("nan")),
        ApprovalEvent("transfer", True, ("granted",), -1.0),
        ApprovalEvent("transfer", True, ("granted",), 1),  # type: ignore[arg-type]
    ],
)
def test_an_event_outside_the_closed_sets_is_a_failure_and_counts_nothing(
    event: ApprovalEvent,
) -> None:
    bench = Bench(MemoryStore())
    before = approval_lines(bench)
    bench.metrics.on_event(APPROVAL, event)
    assert bench.metrics.failures == 1
    assert approval_lines(bench) == before


def approval_lines(bench: Bench) -> list[str]:
    text = generate_latest(bench.registry).decode()
    return [line for line in text.splitlines() if line.startswith("guardrails_approval_")]


def test_an_unregistered_or_invented_tool_is_counted_as_unknown() -> None:
    bench = Bench(MemoryStore())
    bench.metrics.on_event(APPROVAL, ApprovalEvent("rm -rf", False, ("requested",)))
    bench.metrics.on_event(APPROVAL, ApprovalEvent("not_registered", True, ("denied",)))
    assert bench.events("_unknown")["requested"] == 1.0
    assert bench.events("_unknown")["denied"] == 1.0
    assert "rm -rf" not in generate_latest(bench.registry).decode()


def test_a_pending_request_of_a_tool_not_registered_counts_under_unknown() -> None:
    store = MemoryStore()
    bench = Bench(store)
    bench.call()
    record = store.approvals("pending", bench.clock.now, 10)[0]
    store.approval_admit(record._replace(id="other", tool="gone", digest="0" * 64), 1_000.0)
    bench.clock.now += 3
    assert bench.value(PENDING, tool="_unknown") == 3.0
    assert bench.value(PENDING, tool="gone") is None


class Down(MemoryStore):
    def approvals(self, status: str | None, now: float, limit: int, /) -> list[Any]:
        raise StoreUnavailable("down")


def test_a_store_that_cannot_answer_leaves_the_gauge_out_and_counts_a_failure() -> None:
    bench = Bench(Down())
    assert bench.value(PENDING, tool="transfer") is None
    assert bench.metrics.failures >= 1
    assert bench.value(EVENTS, tool="transfer", event="requested") == 0.0  # the rest is served


EXPLICIT = """
from prometheus_client import CollectorRegistry, generate_latest
from guardrails import Guardrails, tool
from guardrails.approvals import ApprovalGate, Approvals
from guardrails.observe.metrics import PrometheusRecorder
from guardrails.store import MemoryStore

now = [1000.0]
clock = lambda: now[0]
store = MemoryStore()
registry = CollectorRegistry()
metrics = PrometheusRecorder(registry, clock=clock)

@tool(approval="always")
def transfer(amount: int) -> str:
    return "sent"

engine = Guardrails([transfer], hooks=[ApprovalGate(store, clock=clock)], recorder=[metrics])
metrics.bind(engine)
engine.turn().call("transfer", {"amount": 1})
now[0] += 20
[request] = Approvals(store, clock=clock).list("pending")
Approvals(store, clock=clock).approve(request.id, by="alice")
engine.turn().call("transfer", {"amount": 1})
engine.turn().call("transfer", {"amount": 1})
now[0] += 4
print(generate_latest(registry).decode())
"""


def test_multiprocess_mode_writes_the_counts_and_reads_the_pending_gauge(tmp_path: Path) -> None:
    env = {**os.environ, "PROMETHEUS_MULTIPROC_DIR": str(tmp_path)}
    done = subprocess.run(
        [sys.executable, "-c", EXPLICIT], env=env, capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert f'{EVENTS}{{event="requested",tool="transfer"}} 2.0' in lines
    assert f'{EVENTS}{{event="granted",tool="transfer"}} 1.0' in lines
    assert f'{EVENTS}{{event="denied",tool="transfer"}} 0.0' in lines
    assert f'{DECISIONS}_sum{{tool="transfer"}} 20.0' in lines
    assert f'{PENDING}{{tool="transfer"}} 4.0' in lines
    assert lines.count(f"# TYPE {PENDING} gauge") == 1
