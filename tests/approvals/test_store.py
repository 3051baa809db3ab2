"""The approval tables behave the same in the memory, SQLite and PostgreSQL stores."""

from __future__ import annotations

import pytest

from guardrails.store import Store, StoreError
from guardrails.store._approval_rows import ApprovalRecord


def request(n: int, now: float = 100.0, *, tenant: str | None = "t", session: str | None = "s",
            digest: str = "d", ttl: float = 10.0) -> ApprovalRecord:  # fmt: skip
    return ApprovalRecord(
        f"id{n}", tenant, session, "pay", digest, '{"amount":1}', "agent", now, now + ttl, "pending"
    )


def test_a_request_is_opened_then_reported_pending_without_a_second_row(store: Store) -> None:
    assert store.approval_admit(request(1), 100.0).state == "requested"  # type: ignore[attr-defined]
    again = store.approval_admit(request(2), 101.0)  # type: ignore[attr-defined]
    assert (again.state, again.record.id) == ("pending", "id1")
    assert [r.id for r in store.approvals(None, 101.0, 10)] == ["id1"]  # type: ignore[attr-defined]


def test_an_approval_is_consumed_once(store: Store) -> None:
    store.approval_admit(request(1), 100.0)  # type: ignore[attr-defined]
    decided = store.approval_decide("id1", "approved", "alice", "fine", 101.0)  # type: ignore[attr-defined]
    assert (decided.status, decided.decided_by, decided.reason, decided.decided_at) == (
        "approved", "alice", "fine", 101.0,
    )  # fmt: skip
    ran = store.approval_admit(request(2), 102.0)  # type: ignore[attr-defined]
    assert (ran.state, ran.record.id, ran.record.used_at) == ("run", "id1", 102.0)
    assert store.approval("id1").status == "used"  # type: ignore[attr-defined]
    after = store.approval_admit(request(3), 103.0)  # type: ignore[attr-defined]
    assert (after.state, after.record.id) == ("requested", "id3")


def test_an_approval_is_used_until_one_tick_before_its_expiry_and_never_at_it(store: Store) -> None:
    for n, at, state in ((1, 109.999, "run"), (3, 110.0, "expired")):
        base = 100.0 + 100 * (n // 3)
        store.approval_admit(request(n, base, digest=f"d{n}"), base)  # type: ignore[attr-defined]
        store.approval_decide(f"id{n}", "approved", "a", None, base)  # type: ignore[attr-defined]
        found = store.approval_admit(
            request(n + 1, at + base - 100, digest=f"d{n}"), at + base - 100
        )  # type: ignore[attr-defined]
        assert found.state == state


def test_a_request_cannot_be_decided_at_or_after_its_expiry_nor_twice(store: Store) -> None:
    store.approval_admit(request(1), 100.0)  # type: ignore[attr-defined]
    assert store.approval_decide("id1", "approved", "a", None, 110.0).status == "pending"  # type: ignore[attr-defined]
    store.approval_admit(request(2, digest="e"), 100.0)  # type: ignore[attr-defined]
    assert store.approval_decide("id2", "denied", "a", None, 109.9).status == "denied"  # type: ignore[attr-defined]
    assert store.approval_decide("id2", "approved", "b", None, 109.9).status == "denied"  # type: ignore[attr-defined]
    assert store.approval_decide("nope", "approved", "b", None, 109.9) is None  # type: ignore[attr-defined]


def test_a_denied_request_answers_denied_until_it_expires_then_a_new_one_opens(
    store: Store,
) -> None:
    store.approval_admit(request(1), 100.0)  # type: ignore[attr-defined]
    store.approval_decide("id1", "denied", "a", None, 101.0)  # type: ignore[attr-defined]
    assert store.approval_admit(request(2), 109.0).state == "denied"  # type: ignore[attr-defined]
    assert store.approval_admit(request(3, 110.0), 110.0).state == "requested"  # type: ignore[attr-defined]


@pytest.mark.parametrize(
    "other",
    [
        {"tenant": "t2"},
        {"tenant": None},
        {"tenant": ""},
        {"session": "s2"},
        {"session": None},
        {"digest": "d2"},
    ],
)
def test_an_approval_answers_only_its_own_scope(store: Store, other: dict[str, object]) -> None:
    store.approval_admit(request(1), 100.0)  # type: ignore[attr-defined]
    store.approval_decide("id1", "approved", "a", None, 101.0)  # type: ignore[attr-defined]
    found = store.approval_admit(request(2, 102.0, **other), 102.0)  # type: ignore[arg-type, attr-defined]
    assert (found.state, found.record.id) == ("requested", "id2")
    assert store.approval("id1").status == "approved"  # type: ignore[attr-defined]


def test_listing_by_status_shows_expired_ones_as_expired(store: Store) -> None:
    store.approval_admit(request(1, ttl=5), 100.0)  # type: ignore[attr-defined]
    store.approval_admit(request(2, digest="x"), 100.0)  # type: ignore[attr-defined]
    assert [r.id for r in store.approvals("expired", 105.0, 10)] == ["id1"]  # type: ignore[attr-defined]
    assert [r.id for r in store.approvals("pending", 105.0, 10)] == ["id2"]  # type: ignore[attr-defined]
    assert len(store.approvals(None, 105.0, 1)) == 1  # type: ignore[attr-defined]


def test_bad_statuses_and_times_are_store_errors(store: Store) -> None:
    with pytest.raises(StoreError):
        store.approval_decide("id1", "used", "a", None, 1.0)  # type: ignore[attr-defined]
    with pytest.raises(StoreError):
        store.approvals("maybe", 1.0, 10)  # type: ignore[attr-defined]
    with pytest.raises(StoreError):
        store.approval_admit(request(1), float("nan"))  # type: ignore[attr-defined]


def test_every_column_round_trips_including_text_a_model_wrote(store: Store) -> None:
    odd = request(1)._replace(
        arguments='{"note":"\\u0000 \'; DROP TABLE x; --"}', asked_by="a\u00e9"
    )
    store.approval_admit(odd, 100.0)  # type: ignore[attr-defined]
    assert store.approval("id1") == odd  # type: ignore[attr-defined]


def test_a_listing_of_one_tenant_holds_its_requests_only(store: Store) -> None:
    for n, tenant in enumerate(("a", "b", "a", None)):
        store.approval_admit(request(n, 100.0 + n, tenant=tenant, digest=f"d{n}"), 100.0 + n)  # type: ignore[attr-defined]
    mine = store.approvals("pending", 105.0, 10, "a")  # type: ignore[attr-defined]
    assert [r.id for r in mine] == ["id2", "id0"]
    assert [r.id for r in store.approvals(None, 105.0, 1, "b")] == ["id1"]  # type: ignore[attr-defined]
    assert len(store.approvals(None, 105.0, 10)) == 4  # type: ignore[attr-defined]
