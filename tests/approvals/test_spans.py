"""The approval events on the call's span, with the real OpenTelemetry SDK."""

from __future__ import annotations

import asyncio
import re
from pathlib import Path
from typing import Any

import pytest
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from guardrails import Guardrails, tool
from guardrails.approvals import ApprovalGate, Approvals
from guardrails.observe import telemetry
from guardrails.observe.telemetry import OpenTelemetryRecorder
from guardrails.store import MemoryStore

BIG = {"amount": 900, "to": "bob"}
PAGE = (Path(__file__).resolve().parents[2] / "docs" / "approvals.md").read_text()


class Bench:
    """An engine with a gated tool, its spans in memory, a clock, and the people's side."""

    def __init__(self, *, hook: bool) -> None:
        self.now = 1_000.0
        self.exporter = InMemorySpanExporter()
        provider = TracerProvider()
        provider.add_span_processor(SimpleSpanProcessor(self.exporter))
        spans = OpenTelemetryRecorder(provider, log_events=False)
        store = MemoryStore()

        @tool(approval="amount > 500", effect=True)
        def transfer(amount: int, to: str) -> str:
            return "sent"

        gate = ApprovalGate(store, ttl=600, clock=lambda: self.now)
        hooks = [spans.hook(), gate] if hook else [gate]
        self.engine = Guardrails([transfer], hooks=hooks, recorder=[spans])
        self.people = Approvals(store, clock=lambda: self.now)

    def call(self, arguments: dict[str, Any] = BIG, *, asynchronous: bool = False) -> Any:
        turn = self.engine.turn(tenant="t", session="s")
        if asynchronous:
            return asyncio.run(turn.acall("transfer", arguments))
        return turn.call("transfer", arguments)

    def events(self) -> list[tuple[str, dict[str, Any]]]:
        """The approval events of the last span, with their attributes."""
        span = self.exporter.get_finished_spans()[-1]
        assert span.name == "execute_tool transfer"
        return [
            (e.name, dict(e.attributes or {}))
            for e in span.events
            if e.name.startswith("guardrails.approval.")
        ]


@pytest.mark.parametrize("hook", [True, False], ids=["hook", "after_the_fact"])
@pytest.mark.parametrize("asynchronous", [False, True], ids=["call", "acall"])
def test_each_approval_event_is_on_its_call_s_span(hook: bool, asynchronous: bool) -> None:
    bench = Bench(hook=hook)
    assert bench.call(asynchronous=asynchronous).reason == "approval_pending"
    [request] = bench.people.list()
    attribute = telemetry.ATTR_APPROVAL_REQUEST
    assert bench.events() == [(telemetry.EVENT_APPROVAL_REQUESTED, {attribute: request.id})]
    bench.call(asynchronous=asynchronous)  # waiting: no event
    assert bench.events() == []
    bench.now += 30
    bench.people.approve(request.id, by="alice")
    assert bench.call(asynchronous=asynchronous).ok
    waited = telemetry.ATTR_APPROVAL_WAITED
    assert bench.events() == [
        (telemetry.EVENT_APPROVAL_GRANTED, {attribute: request.id, waited: 30.0})
    ]
    bench.call(asynchronous=asynchronous)
    [again] = bench.people.list()
    bench.people.deny(again.id, by="bo")
    bench.call(asynchronous=asynchronous)
    assert bench.events() == [(telemetry.EVENT_APPROVAL_DENIED, {attribute: again.id})]
    bench.call({"amount": 901, "to": "bob"}, asynchronous=asynchronous)
    bench.now += 600
    bench.call({"amount": 901, "to": "bob"}, asynchronous=asynchronous)
    names = [name for name, _ in bench.events()]
    assert names == [telemetry.EVENT_APPROVAL_EXPIRED, telemetry.EVENT_APPROVAL_REQUESTED]


def test_a_call_that_needs_no_approval_has_no_approval_event() -> None:
    bench = Bench(hook=True)
    assert bench.call({"amount": 5, "to": "bob"}).ok
    assert bench.events() == []


def test_the_span_event_names_are_the_documented_ones() -> None:
    section = PAGE.split("## Signals", 1)[1].split("\n## ", 1)[0]
    rows = re.findall(r"^\| `(guardrails\.approval\.\w+)` \|", section, re.M)
    assert rows == [
        telemetry.EVENT_APPROVAL_REQUESTED,
        telemetry.EVENT_APPROVAL_GRANTED,
        telemetry.EVENT_APPROVAL_DENIED,
        telemetry.EVENT_APPROVAL_EXPIRED,
    ]
    assert f"`{telemetry.ATTR_APPROVAL_REQUEST}`" in section
    assert f"`{telemetry.ATTR_APPROVAL_WAITED}`" in section
