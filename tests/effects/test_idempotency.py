"""Idempotency: a deterministic key per effect; a replay returns the first result."""

from __future__ import annotations

from typing import Any

import pytest

from guardrails import Guardrails, Invocation, Outcome, tool
from guardrails.audit import AuditLog
from guardrails.effects import Idempotency, idempotency_key
from guardrails.store import MemoryStore, Store
from guardrails.testing import FakeClock

RUNS: list[str] = []


@tool(effect=True, options={"idempotency_key": "publish-{brief_id}"})
def publish(brief_id: str, note: str = "") -> dict[str, Any]:
    RUNS.append(brief_id)
    return {"published": brief_id, "n": len(RUNS)}


@tool(effect=True, options={"idempotency_key": "charge-{order_id}"})
def charge(order_id: str) -> str:
    RUNS.append(order_id)
    raise ConnectionError("gateway down")


@tool
def read(brief_id: str) -> str:
    RUNS.append(brief_id)
    return brief_id


def _rails(store: Store, **options: Any) -> Guardrails:
    RUNS.clear()
    return Guardrails([publish, charge, read], hooks=[Idempotency(store, **options)])


def test_a_replay_returns_the_first_result_without_running_the_tool(store: Store) -> None:
    rails = _rails(store)
    first = rails.call("publish", {"brief_id": "b-1"})
    replay = rails.call("publish", {"brief_id": "b-1", "note": "again"})
    other = rails.call("publish", {"brief_id": "b-2"})
    assert RUNS == ["b-1", "b-2"]
    assert replay.outcome is Outcome.OK and replay.reason == "replayed"
    assert replay.content == first.content and replay.value == first.value
    assert other.content != first.content


def test_a_failed_effect_releases_its_key_so_a_retry_runs(store: Store) -> None:
    rails = _rails(store)
    assert rails.call("charge", {"order_id": "o-1"}).outcome is Outcome.ERROR
    assert rails.call("charge", {"order_id": "o-1"}).outcome is Outcome.ERROR
    assert RUNS == ["o-1", "o-1"]


def test_keys_expire_after_the_ttl() -> None:
    clock = FakeClock()
    rails = _rails(MemoryStore(), ttl=60.0, clock=clock)
    rails.call("publish", {"brief_id": "b-1"})
    clock.advance(59)
    rails.call("publish", {"brief_id": "b-1"})
    clock.advance(2)
    rails.call("publish", {"brief_id": "b-1"})
    assert RUNS == ["b-1", "b-1"]


def test_keys_are_scoped_by_tenant() -> None:
    rails = _rails(MemoryStore())
    rails.turn(tenant="a").call("publish", {"brief_id": "b-1"})
    rails.turn(tenant="b").call("publish", {"brief_id": "b-1"})
    assert RUNS == ["b-1", "b-1"]


def test_tools_without_a_key_are_not_deduplicated() -> None:
    rails = _rails(MemoryStore())
    rails.call("read", {"brief_id": "x"})
    rails.call("read", {"brief_id": "x"})
    assert RUNS == ["x", "x"]


def test_a_claim_still_pending_after_the_wait_is_unavailable_and_not_run() -> None:
    store = MemoryStore()
    store.claim(":publish:publish-b-1", "someone-else", 0.0, 1e12)
    rails = _rails(store, wait=0.0)
    result = rails.call("publish", {"brief_id": "b-1"})
    assert (result.outcome, result.reason) == (Outcome.UNAVAILABLE, "in_progress")
    assert RUNS == []


@pytest.mark.parametrize(
    ("spec", "expected"),
    [
        ("publish-{brief_id}", ":publish:publish-b-1"),
        (lambda args: f"x{args['brief_id']}", ":publish:xb-1"),
    ],
)
def test_the_key_comes_from_a_format_string_or_a_function(spec: Any, expected: str) -> None:
    t = tool(lambda brief_id: brief_id, name="publish", options={"idempotency_key": spec})
    inv = Invocation("publish", {"brief_id": "b-1"}, {"brief_id": "b-1"}, _ctx(), "c1", t)
    assert idempotency_key(inv) == expected


def test_a_key_from_argument_names_ignores_the_other_arguments() -> None:
    t = tool(publish.fn, name="p", options={"idempotency_key": ("brief_id",)})
    one = Invocation("p", {"brief_id": "b", "note": "1"}, {}, _ctx(), "c1", t)
    two = Invocation("p", {"brief_id": "b", "note": "2"}, {}, _ctx(), "c2", t)
    assert idempotency_key(one) == idempotency_key(two)


def test_the_audit_row_of_a_replay_names_the_key() -> None:
    store = MemoryStore()
    audit = AuditLog(store)
    RUNS.clear()
    rails = Guardrails([publish], hooks=[audit, Idempotency(store)], recorder=[audit])
    rails.call("publish", {"brief_id": "b-9"})
    replay = rails.call("publish", {"brief_id": "b-9"})
    (row,) = audit.rows(call_id=replay.call_id, kind="tool_call")
    assert row.reason == "replayed"
    assert row.detail is not None and "publish-b-9" in row.detail


def _ctx() -> Any:
    from guardrails import TurnContext

    return TurnContext()
