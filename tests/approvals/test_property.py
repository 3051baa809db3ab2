"""For any interleaving of requests, decisions, expiries and retries: each approved request runs
exactly once with exactly its arguments, and nothing else that needed approval ever runs."""

from __future__ import annotations

import json
import tempfile
from collections import Counter
from typing import Any

from hypothesis import event, given, settings
from hypothesis import strategies as st

from guardrails import Guardrails, tool
from guardrails.approvals import ApprovalError, ApprovalGate, Approvals
from guardrails.store import MemoryStore, SQLiteStore
from guardrails.verdicts import Outcome
from tests._examples import examples

SCOPES = [("t1", "s1"), ("t1", "s2"), ("t2", "s1")]
ARGUMENTS = [{"amount": 600, "to": "a"}, {"amount": 600, "to": "b"}, {"amount": 700, "to": "a"}]

# Mostly one scope and one set of arguments, so that retries and approvals meet.
_index = st.sampled_from([0, 0, 0, 1, 2])
_call = st.tuples(st.just("call"), _index, _index)
_decide = st.tuples(st.sampled_from(["approve", "approve", "deny"]), st.integers(0, 3), st.just(0))
_wait = st.tuples(st.just("wait"), st.sampled_from([1, 5, 15, 25]), st.just(0))
_retry = st.tuples(st.just("retry"), st.just(0), st.just(0))  # the last call again
STEPS = st.lists(st.one_of(_call, _decide, _retry, _decide, _wait), min_size=8, max_size=40)


class Clock:
    now = 0.0

    def __call__(self) -> float:
        return self.now


def play(store: Any, steps: list[tuple[str, int, int]]) -> None:
    clock = Clock()
    runs: list[tuple[str, str, dict[str, Any], float]] = []
    calls: list[tuple[str, str, dict[str, Any], float, int]] = []
    decided: dict[str, int] = {}  # request id -> the step that decided it

    @tool(approval="amount > 500", effect=True)
    def pay(amount: int, to: str) -> str:
        return "paid"

    engine = Guardrails([pay], hooks=[ApprovalGate(store, ttl=20, clock=clock)])
    people = Approvals(store, clock=clock)
    last = (0, 0)
    for step, (kind, a, b) in enumerate(steps):
        if kind == "retry":
            kind, a, b = "call", *last
        if kind == "call":
            last = (a, b)
            (tenant, session), arguments = SCOPES[a], ARGUMENTS[b]
            result = engine.turn(tenant=tenant, session=session).call("pay", arguments)
            calls.append((tenant, session, arguments, clock.now, step))
            if result.outcome is Outcome.OK:
                runs.append((tenant, session, arguments, clock.now))
            else:
                assert result.reason in ("approval_pending", "approval_denied", "approval_expired")
        elif kind == "wait":
            clock.now += a
        else:
            # mostly the pending requests; past them, any request (refused when decided)
            listed = people.list("pending") + people.list(None, limit=1000)
            if a < len(listed):
                try:
                    getattr(people, kind)(listed[a].id, by="p")
                    decided[listed[a].id] = step
                except ApprovalError:
                    pass  # not pending any more: refused, nothing changes
    check(people.list(None, limit=1000), runs, calls, decided)


def check(requests: list[Any], runs: list[Any], calls: list[Any], decided: dict[str, int]) -> None:
    used = [r for r in requests if r.status == "used"]
    event(f"runs: {min(len(runs), 3)}")

    # every run is one used approval of exactly its scope and arguments, decided before it
    def key(tenant: str, session: str, arguments: dict[str, Any], at: float) -> Any:
        return tenant, session, tuple(sorted(arguments.items())), at

    assert Counter(key(*x) for x in runs) == Counter(
        key(r.tenant, r.session, json.loads(r.arguments), r.used_at) for r in used
    )
    for r in used:
        assert r.decided_by == "p" and r.decided_at <= r.used_at < r.expires_at
    # every approval whose own call came back in time ran (exactly once, above)
    for r in requests:
        if r.decided_by is None or r.status == "denied":
            continue
        came_back = any(
            (c[0], c[1]) == (r.tenant, r.session) and c[2] == json.loads(r.arguments)
            and decided[r.id] < c[4] and c[3] < r.expires_at
            for c in calls
        )  # fmt: skip
        assert came_back == (r.status == "used")


@settings(max_examples=examples(200), deadline=None)
@given(steps=STEPS)
def test_memory_store_runs_each_approved_request_exactly_once(steps: list[Any]) -> None:
    play(MemoryStore(), steps)


@settings(max_examples=examples(40), deadline=None)
@given(steps=STEPS)
def test_sqlite_store_runs_each_approved_request_exactly_once(steps: list[Any]) -> None:
    with tempfile.TemporaryDirectory() as folder:
        store = SQLiteStore(f"{folder}/a.db")
        try:
            play(store, steps)
        finally:
            store.close()
