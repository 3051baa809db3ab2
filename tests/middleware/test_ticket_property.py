"""Property: a call split into ``admit`` and ``complete``/``fail`` is the call.

For any sequence of calls and body answers, an engine fed through tickets (the
body never runs in it) and one fed through ``turn.call`` (the body answers the
same, or raises the same) end with the same results, audit rows, metric
counters and provenance labels.
"""

from __future__ import annotations

import asyncio
from collections import Counter
from typing import Any

import pytest
from hypothesis import event, given
from hypothesis import strategies as st
from prometheus_client import CollectorRegistry

from guardrails import Guardrails, Invocation, Tool, ToolResult, Verdict, guard
from guardrails.audit import AuditLog
from guardrails.effects import Idempotency
from guardrails.errors import LimitExceeded, StopRun
from guardrails.observe.metrics import PrometheusRecorder
from guardrails.policy import loads
from guardrails.policy.attach import installed
from guardrails.store import MemoryStore
from guardrails.testing import FakeClock

POLICY = """
[tools.send.params.to]
kind = "email"
grounded_in = ["user", "lookup"]
"""

_LOOKUP = {"type": "object", "properties": {"q": {"type": "string"}}, "required": ["q"]}
_PUBLISH = {"type": "object", "properties": {"doc": {"type": "string"}}, "required": ["doc"]}
_SEND = {"type": "object", "properties": {"to": {"type": "string"}}, "required": ["to"]}
REACHED: Counter[str] = Counter()


@guard(outcome="limit")
def not_blocked(call: Invocation) -> Verdict:
    return Verdict.REJECT if call.arguments.get("q") == "blocked" else Verdict.PASS


@guard(outcome="unavailable")
def no_forbidden(subject: tuple[Invocation, ToolResult]) -> Verdict:
    return Verdict.REJECT if "forbidden" in subject[1].content else Verdict.PASS


class Engine:
    """One engine with audit, idempotency, a turn ceiling, a policy and metrics."""

    def __init__(self, body: Any) -> None:
        self.store = MemoryStore()
        audit = AuditLog(self.store, clock=FakeClock(), exception_text=True)
        self.registry = CollectorRegistry()
        metrics = PrometheusRecorder(self.registry)
        tools = [
            Tool("lookup", body, _LOOKUP, output_guards=[no_forbidden]),
            Tool("publish", body, _PUBLISH, effect=True, options={"idempotency_key": "{doc}"}),
            Tool("send", body, _SEND),
        ]
        self.rails = Guardrails(
            tools,
            [not_blocked],
            hooks=[audit, Idempotency(self.store, wait=0)],
            recorder=[audit, metrics],
            max_calls_per_turn=8,
            max_result_chars=64,
            policy=loads(POLICY, origin="inline.toml"),
        )
        metrics.bind(self.rails)
        self.turn = self.rails.turn(session="s-1", tenant="t-1")
        self.admitted = 0

    def seen(self) -> Any:
        """What every observer kept: results, audit rows, counters, labels."""
        results = [_timeless(r) for r in self.turn.results]
        rows = [r._replace(id=None, at=0.0, duration_us=None) for r in self.store.audit_rows()]
        counters = sorted(
            (s.name, tuple(sorted(s.labels.items())), s.value)
            for family in self.registry.collect()
            if family.type == "counter"
            for s in family.samples
        )
        policy = installed(self.rails)
        assert policy is not None
        labels = dict(policy.ledgers.ledger(self.turn, self.turn.context).entries)
        return results, rows, counters, labels


def _timeless(r: ToolResult) -> ToolResult:
    verdicts = tuple(v._replace(duration_ns=0) for v in r.verdicts)
    escapes = tuple(e._replace(exception=type(e.exception)) for e in r.escapes)
    return r._replace(
        duration_ns=0, verdicts=verdicts, escapes=escapes, exception=type(r.exception)
    )


ERRORS = [ValueError, TimeoutError, LimitExceeded, StopRun]
outputs = st.one_of(
    st.sampled_from(
        [
            "ana@example.com wrote",
            "forbidden",
            "x" * 100,
            {"to": "bob@example.org"},
            ["carol@example.net", 3],
            {1, 2},
            None,
            12.5,
        ]
    ),
    st.text(max_size=20),
)
answers = st.one_of(
    st.tuples(st.just("ok"), outputs),
    st.tuples(st.just("raise"), st.sampled_from(ERRORS)),
)
calls = st.one_of(
    st.tuples(
        st.just("lookup"), st.sampled_from([{"q": "a"}, {"q": "b"}, {"q": "blocked"}, {}, {"q": 1}])
    ),
    st.tuples(st.just("publish"), st.sampled_from([{"doc": "d1"}, {"doc": "d2"}])),
    st.tuples(st.just("send"), st.just({"to": "ana@example.com"})),
    st.tuples(st.just("nope"), st.just({})),
)
steps = st.lists(st.tuples(calls, answers), max_size=10)


def _by_call(script: list[Any]) -> Engine:
    answer: list[Any] = [None]

    def body(**_: Any) -> Any:
        kind, value = answer[0]
        if kind == "raise":
            raise value("from the body")
        return value

    engine = Engine(body)
    for i, ((name, args), step) in enumerate(script):
        answer[0] = step
        engine.turn.call(name, args, f"c{i}")
    return engine


def _never(**_: Any) -> Any:
    raise AssertionError("a ticket's body never runs in the engine")


def _by_ticket(script: list[Any]) -> Engine:
    engine = Engine(_never)
    for i, ((name, args), (kind, value)) in enumerate(script):
        ticket = engine.turn.admit(name, args, f"c{i}")
        engine.admitted += ticket.admitted
        if not ticket.admitted:
            REACHED["refused"] += 1
        elif kind == "raise":
            REACHED["failed"] += 1
            ticket.fail(value("from the body"))
        else:
            REACHED["completed"] += 1
            ticket.complete(value)
    return engine


async def _by_aticket(script: list[Any]) -> Engine:
    engine = Engine(_never)
    for i, ((name, args), (kind, value)) in enumerate(script):
        ticket = await engine.turn.aadmit(name, args, f"c{i}")
        engine.admitted += ticket.admitted
        if ticket.admitted:
            if kind == "raise":
                await ticket.afail(value("from the body"))
            else:
                await ticket.acomplete(value)
    return engine


@given(steps, st.booleans())
def test_tickets_leave_what_turn_call_leaves(script: list[Any], use_async: bool) -> None:
    expected = _by_call(script).seen()
    split = asyncio.run(_by_aticket(script)) if use_async else _by_ticket(script)
    got = split.seen()
    event(f"tickets admitted: {min(split.admitted, 3)}{'+' if split.admitted >= 3 else ''}")
    event("labels written" if got[3] else "no label")
    assert got[0] == expected[0]
    assert got[1] == expected[1]
    assert got[2] == expected[2]
    assert got[3] == expected[3]


@pytest.mark.slow
def test_the_property_reaches_every_branch() -> None:
    """How much of the generated input the property above exercised (printed with -s)."""
    REACHED.clear()
    test_tickets_leave_what_turn_call_leaves()
    total = sum(REACHED.values())
    print({k: f"{v / total:.0%}" for k, v in REACHED.items()})
    assert REACHED["completed"] and REACHED["failed"] and REACHED["refused"]
