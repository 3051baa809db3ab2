"""Idempotency: a deterministic key per effect; a replay returns the first result."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from guardrails import Guardrails, Invocation, Outcome, tool
from guardrails.audit import AuditLog
from guardrails.effects import Idempotency, idempotency_key
from guardrails.effects.idempotency import scoped_key
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
    store.claim(scoped_key(None, "publish", "publish-b-1"), "someone-else", 0.0, 1e12)
    rails = _rails(store, wait=0.0)
    result = rails.call("publish", {"brief_id": "b-1"})
    assert (result.outcome, result.reason) == (Outcome.UNAVAILABLE, "in_progress")
    assert RUNS == []


@pytest.mark.parametrize(
    ("spec", "expected"),
    [
        ("publish-{brief_id}", '[null,"publish","publish-b-1"]'),
        (lambda args: f"x{args['brief_id']}", '[null,"publish","xb-1"]'),
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


# -- keys are scoped unambiguously by tenant and tool ---------------------------------------

_PARTS = st.text(st.characters(codec=None, categories=None), max_size=8) | st.sampled_from(
    [":", "::", "a:b", '"', "\\", '","', "[", "]", "null"]
)
_TRIPLES = st.tuples(st.none() | _PARTS, _PARTS, _PARTS)


@given(_TRIPLES, _TRIPLES)
def test_no_two_distinct_triples_share_a_key(one: Any, two: Any) -> None:
    assert (scoped_key(*one) == scoped_key(*two)) == (one == two)


@given(st.lists(_TRIPLES, min_size=2, max_size=30, unique=True))
def test_a_batch_of_distinct_triples_gives_distinct_keys(triples: list[Any]) -> None:
    assert len({scoped_key(*t) for t in triples}) == len(triples)


def test_separators_inside_tenant_or_key_do_not_collide() -> None:
    # The reported collision: tenant "acme:publish" + "doc-1" vs tenant "acme" + "publish:doc-1".
    assert scoped_key("acme:publish", "publish", "doc-1") != scoped_key(
        "acme", "publish", "publish:doc-1"
    )
    assert scoped_key(None, "t", "k") != scoped_key("", "t", "k")


def test_a_tenant_never_gets_another_tenants_result() -> None:
    store = MemoryStore()
    RUNS.clear()
    keyed = tool(
        publish.fn,
        name="publish",
        effect=True,
        options={"idempotency_key": lambda a: a["brief_id"]},
    )
    rails = Guardrails([keyed], hooks=[Idempotency(store)])
    first = rails.turn(tenant="acme:publish").call("publish", {"brief_id": "doc-1"})
    second = rails.turn(tenant="acme").call("publish", {"brief_id": "publish:doc-1"})
    third = rails.turn(tenant="").call("publish", {"brief_id": "x"})
    fourth = rails.turn(tenant=None).call("publish", {"brief_id": "x"})
    assert [r.reason for r in (first, second, third, fourth)] == [None] * 4
    assert RUNS == ["doc-1", "publish:doc-1", "x", "x"]


def test_a_key_with_lone_surrogates_is_stored_and_replayed(tmp_path: Any) -> None:
    # The model cannot send a lone surrogate (admission refuses it), but a tenant
    # from the application can; NUL reaches the key from the model's arguments.
    from guardrails.store import SQLiteStore

    with SQLiteStore(tmp_path / "k.db") as store:
        RUNS.clear()
        rails = Guardrails([publish], hooks=[Idempotency(store)])
        first = rails.turn(tenant="t\udc80\ud800").call("publish", {"brief_id": "b\x00"})
        again = rails.turn(tenant="t\udc80\ud800").call("publish", {"brief_id": "b\x00"})
    assert first.outcome is Outcome.OK and again.reason == "replayed"
    assert len(RUNS) == 1


def _ctx() -> Any:
    from guardrails import TurnContext

    return TurnContext()
