"""One behavioural suite, run against the memory, SQLite and PostgreSQL stores."""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable
from typing import Any

import pytest

from guardrails.store import (
    AuditRow,
    Claim,
    MemoryStore,
    Store,
    StoreError,
    StoreUnavailable,
    WithDeadline,
    from_micros,
    to_micros,
)
from guardrails.store._base import check_times
from tests import _hostile


def _row(n: int, **fields: object) -> AuditRow:
    return AuditRow("tool_call", at=1000.0 + n, tool=f"t{n % 2}", session="s1", **fields)  # type: ignore[arg-type]


def test_appended_rows_come_back_in_order_with_increasing_ids(store: Store) -> None:
    ids = [store.append(_row(n, outcome="ok")) for n in range(5)]
    rows = store.audit_rows()
    assert [r.id for r in rows] == ids == sorted(ids)
    assert [r.at for r in rows] == [1000.0 + n for n in range(5)]
    assert all(r.outcome == "ok" and r.session == "s1" for r in rows)


def test_audit_rows_filter_by_column_and_page_after_an_id(store: Store) -> None:
    for n in range(6):
        store.append(_row(n))
    t1 = store.audit_rows(tool="t1")
    assert [r.at for r in t1] == [1001.0, 1003.0, 1005.0]
    first_page = store.audit_rows(limit=4)
    second_page = store.audit_rows(after_id=first_page[-1].id or 0, limit=4)
    assert len(first_page) == 4 and len(second_page) == 2


def test_append_many_writes_every_row(store: Store) -> None:
    store.append_many([_row(n) for n in range(10)])
    assert len(store.audit_rows()) == 10


def test_every_column_round_trips(store: Store) -> None:
    row = AuditRow(
        "paid_call", 5.5, "c1", "acme", "s", "agent-7", "wf-1", "tool", "limit", "reject",
        "ceiling", '[{"guard": "g"}]', '[{"guard": "e"}]', 12, 100, 200, 0.25, "KeyError",
        "text", '{"a": 1}',
    )  # fmt: skip
    store.append(row)
    (back,) = store.audit_rows()
    assert back.values() == row.values()


def test_unknown_audit_filter_is_a_store_error(store: Store) -> None:
    with pytest.raises(StoreError, match="unknown audit filter"):
        store.audit_rows(arguments="x")


def test_incr_counts_from_one_per_key(store: Store) -> None:
    assert [store.incr("a") for _ in range(3)] == [1, 2, 3]
    assert store.incr("b") == 1
    assert store.incr("a", 5) == 8


def test_reserve_admits_until_the_cap_and_settle_moves_reserved_to_spent(store: Store) -> None:
    cap = to_micros(1.0)
    assert store.reserve("k", to_micros(0.4), cap)
    assert store.reserve("k", to_micros(0.4), cap)
    assert not store.reserve("k", to_micros(0.4), cap)
    assert store.budget("k") == (0, to_micros(0.8))
    assert store.settle("k", to_micros(0.4), to_micros(0.3)) == to_micros(0.3)
    assert store.reserve("k", to_micros(0.3), cap)
    assert store.budget("k") == (to_micros(0.3), to_micros(0.7))


def test_reserve_of_nothing_is_refused_once_the_cap_is_spent(store: Store) -> None:
    cap = to_micros(0.5)
    assert store.reserve("k", 0, cap)
    store.settle("k", 0, cap)
    assert not store.reserve("k", 0, cap)
    assert from_micros(store.budget("k")[0]) == 0.5


def test_a_reservation_larger_than_the_cap_is_never_admitted(store: Store) -> None:
    assert not store.reserve("k", 11, 10)
    assert store.budget("k") == (0, 0)


def test_compare_and_set_changes_only_from_the_expected_value(store: Store) -> None:
    assert store.get("phase") is None
    assert store.compare_and_set("phase", None, "one")
    assert not store.compare_and_set("phase", None, "other")
    assert not store.compare_and_set("phase", "two", "three")
    assert store.compare_and_set("phase", "one", "two")
    assert store.get("phase") == "two"


def test_claim_is_new_then_pending_then_done_with_the_first_result(store: Store) -> None:
    assert store.claim("k", "a", 10.0, 20.0) == Claim("new")
    assert store.claim("k", "b", 11.0, 21.0) == Claim("pending")
    assert not store.complete("k", "b", '"other"', 100.0)
    assert store.complete("k", "a", '"first"', 100.0)
    assert store.claim("k", "b", 12.0, 22.0) == Claim("done", '"first"')


def test_a_claim_expires_and_an_abandoned_lease_can_be_taken_over(store: Store) -> None:
    assert store.claim("done", "a", 0.0, 5.0).state == "new"
    store.complete("done", "a", "1", 50.0)
    assert store.claim("done", "b", 49.0, 60.0).state == "done"
    assert store.claim("done", "b", 50.0, 60.0).state == "new"
    assert store.claim("lease", "a", 0.0, 5.0).state == "new"
    assert store.claim("lease", "b", 5.0, 9.0).state == "new"
    assert not store.complete("lease", "a", "1", 50.0)


def test_release_frees_a_pending_claim_of_its_owner_only(store: Store) -> None:
    store.claim("k", "a", 0.0, 100.0)
    store.release("k", "b")
    assert store.claim("k", "b", 1.0, 100.0).state == "pending"
    store.release("k", "a")
    assert store.claim("k", "b", 2.0, 100.0).state == "new"


def test_snapshots_are_versioned_per_key(store: Store) -> None:
    assert store.snapshot("db") is None
    assert store.put_snapshot("db", b"v1", 1.0) == 1
    assert store.put_snapshot("db", b"v2", 2.0) == 2
    assert store.put_snapshot("other", b"x", 3.0) == 1
    latest = store.snapshot("db")
    assert latest is not None and (latest.version, latest.data) == (2, b"v2")
    first = store.snapshot("db", 1)
    assert first is not None and (first.data, first.at) == (b"v1", 1.0)
    assert store.snapshot("db", 9) is None


def test_the_store_has_no_update_or_delete_api_for_audit_rows(store: Store) -> None:
    names = {n for n in dir(store) if not n.startswith("_")}
    assert not {n for n in names if "delete" in n or "update" in n}


def test_money_converts_to_exact_micro_units() -> None:
    assert sum(to_micros(0.01) for _ in range(100)) == to_micros(1.0)
    assert from_micros(to_micros(2.5)) == 2.5


def test_stores_are_fast_enough_to_be_used_per_call(store: Store) -> None:
    # Not a timing assertion: a smoke run of many operations must simply finish.
    start = time.perf_counter()
    for n in range(50):
        store.append(_row(n))
        store.incr("n")
    assert store.incr("n", 0) == 50
    assert time.perf_counter() - start < 60


# -- leased reservations ------------------------------------------------------------------------


def test_a_leased_reservation_counts_against_the_cap_until_it_expires(store: Store) -> None:
    assert store.reserve_leased("k", "a", 6, 10, 0.0, 5.0)
    assert not store.reserve_leased("k", "b", 6, 10, 4.9, 9.9)
    assert store.budget("k") == (0, 6)
    assert store.reserve_leased("k", "b", 6, 10, 5.0, 10.0)  # a's lease ran out at 5.0
    assert store.budget("k") == (0, 6)


def test_renewing_keeps_every_reservation_of_the_holder(store: Store) -> None:
    assert store.reserve_leased("day", "a", 6, 10, 0.0, 5.0)
    assert store.reserve_leased("inst", "a", 6, 10, 0.0, 5.0)
    assert store.renew_leases("a", 50.0) == 2
    assert store.renew_leases("nobody", 50.0) == 0
    assert not store.reserve_leased("day", "b", 6, 10, 20.0, 30.0)
    assert not store.reserve_leased("inst", "b", 6, 10, 20.0, 30.0)


def test_the_memory_store_keeps_no_lease_once_settled_or_given_back() -> None:
    """Its leases are kept by key and by holder (a renewal and a refusal read only their
    own): both indexes agree, and nothing is left of a lease once it is gone."""
    store = MemoryStore()
    for i in range(50):
        assert store.reserve_leased("k", f"h{i}", 1, 100, 0.0, 1.0)
        assert store.reserve_leased("j", f"h{i}", 1, 100, 0.0, 1.0)
    for i in range(25):
        store.settle_leased("k", f"h{i}", 0)
        store.settle_leased("j", f"h{i}", 0)
    assert store.renew_leases("h30", 5.0) == 2
    assert store.renew_leases("h3", 5.0) == 0  # settled: nothing left to renew
    # Refused as things stand (25 + 99 > 100), admitted once the 24 expired leases on
    # "k" are given back (h30's was renewed): 1 + 99.
    assert store.reserve_leased("k", "big", 99, 100, 2.0, 9.0)
    assert store.budget("k") == (0, 100)
    assert store.renew_leases("h31", 9.0) == 1  # its lease on "j" only
    for holder in ("big", "h30"):
        store.settle_leased("k", holder, 0)
    for i in range(25, 50):
        store.settle_leased("j", f"h{i}", 0)
    assert store.budget("k") == store.budget("j") == (0, 0)
    assert store._leases == {} and store._holders == {}


@pytest.mark.parametrize("deadline", [False, True], ids=["bare", "with_deadline"])
def test_renewing_many_holders_at_once_renews_each_of_their_leases(
    store: Store, deadline: bool
) -> None:
    """``renew_leases_of``: what ``renew_leases`` of each holder does, in one operation
    (through ``WithDeadline`` as well); a holder with no lease adds nothing."""
    target: Any = WithDeadline(store, 30.0) if deadline else store
    for holder in ("a", "b", "gone"):
        assert store.reserve_leased("day", holder, 2, 10, 0.0, 1.0)
    assert store.reserve_leased("inst", "a", 6, 10, 0.0, 1.0)
    assert target.renew_leases_of(["a", "b", "nobody"], 50.0) == 3
    assert target.renew_leases_of([], 50.0) == 0
    # At 2.0 only "gone" has lapsed: a reservation the cap refuses takes back its 2 alone.
    assert not store.reserve_leased("day", "c", 7, 10, 2.0, 9.0)
    assert store.budget("day") == (0, 4)
    assert store.reserve_leased("day", "c", 6, 10, 2.0, 9.0)
    assert not store.reserve_leased("inst", "c", 5, 10, 2.0, 9.0)  # a's 6 renewed there too
    assert store.budget("inst") == (0, 6)


def test_settling_gives_back_the_reservation_once_and_adds_the_spend(store: Store) -> None:
    assert store.reserve_leased("k", "a", 6, 10, 0.0, 5.0)
    assert store.settle_leased("k", "a", 4) == 4
    assert store.budget("k") == (4, 0)
    assert store.settle_leased("k", "a", 0) == 4  # settled twice: nothing more is given back
    assert store.budget("k") == (4, 0)


def test_a_reservation_reclaimed_after_expiry_is_not_given_back_twice(store: Store) -> None:
    assert store.reserve_leased("k", "late", 6, 10, 0.0, 1.0)
    assert store.reserve_leased("k", "next", 6, 10, 2.0, 9.0)  # reclaims late's 6
    assert store.settle_leased("k", "late", 3) == 3  # late still pays what it spent
    assert store.budget("k") == (3, 6)


def test_the_same_holder_reserving_twice_holds_the_sum(store: Store) -> None:
    assert store.reserve_leased("k", "a", 3, 10, 0.0, 5.0)
    assert store.reserve_leased("k", "a", 4, 10, 0.0, 6.0)
    assert store.reserve_leased("k", "b", 4, 10, 6.0, 9.0)  # both of a's expired together
    assert store.budget("k") == (0, 4)


def test_expired_leases_are_given_back_when_a_reservation_needs_their_room(store: Store) -> None:
    assert store.reserve_leased("k", "gone", 6, 10, 0.0, 1.0)
    assert store.reserve_leased("k", "b", 3, 10, 2.0, 9.0)  # fits beside gone's 6: left as is
    assert store.budget("k") == (0, 9)
    assert store.reserve_leased("k", "c", 3, 10, 2.0, 9.0)  # needs gone's room: given back
    assert store.budget("k") == (0, 6)
    assert store.settle_leased("k", "gone", 2) == 2  # the late holder pays what it spent
    assert store.budget("k") == (2, 6)


def test_a_reservation_refused_after_the_give_back_keeps_the_give_back(store: Store) -> None:
    assert store.reserve_leased("k", "gone", 6, 10, 0.0, 1.0)
    assert store.reserve_leased("k", "live", 4, 10, 0.0, 9.0)
    assert not store.reserve_leased("k", "c", 5, 10, 0.5, 9.0)  # gone's lease still runs
    assert store.budget("k") == (0, 10)
    assert not store.reserve_leased("k", "c", 7, 10, 2.0, 9.0)  # refused even without gone's 6
    assert store.budget("k") == (0, 4)
    assert store.reserve_leased("k", "c", 6, 10, 2.0, 9.0)


def test_a_lease_renewed_before_its_room_was_needed_is_held_again(store: Store) -> None:
    """Its holder is alive (it renews): a lease that expired while nothing needed its
    room runs again from the renewal, and its amount stays reserved."""
    assert store.reserve_leased("k", "slow", 6, 10, 0.0, 1.0)
    assert store.renew_leases("slow", 20.0) == 1
    assert not store.reserve_leased("k", "c", 5, 10, 2.0, 9.0)
    assert store.budget("k") == (0, 6)
    assert store.settle_leased("k", "slow", 6) == 6
    assert store.budget("k") == (6, 0)


BAD_TIMES = [
    pytest.param(float("nan"), id="nan"),
    pytest.param(_hostile.LoudFloat("nan"), id="nan-subclass"),
    pytest.param("1.0", id="str"),
    pytest.param(None, id="none"),
    pytest.param(True, id="bool"),
    pytest.param(_hostile.Masked(), id="masked-class"),  # isinstance() would run its __class__
]


@pytest.mark.parametrize("bad", BAD_TIMES)
def test_a_time_that_is_not_seconds_is_refused_and_changes_nothing(
    store: Store, bad: object
) -> None:
    """NaN sorted after every number on PostgreSQL (a live claim looked expired and was
    taken over), was stored as NULL on SQLite, and compared with nothing in memory."""
    assert store.reserve_leased("k", "a", 5, 10, 0.0, 100.0)
    assert store.claim("i", "o1", 0.0, 100.0) == Claim("new")
    version = store.put_snapshot("s", b"x", 1.0)
    _hostile.CALLS.clear()
    calls: list[tuple[Callable[..., object], tuple[object, ...]]] = [
        (store.reserve_leased, ("k", "b", 5, 10, bad, 100.0)),
        (store.reserve_leased, ("k", "b", 5, 10, 0.0, bad)),
        (store.renew_leases, ("a", bad)),
        (store.renew_leases_of, (["a"], bad)),  # type: ignore[attr-defined]
        (store.claim, ("i", "o2", bad, 100.0)),
        (store.claim, ("i", "o2", 0.0, bad)),
        (store.complete, ("i", "o1", "r", bad)),
        (store.put_snapshot, ("s", b"y", bad)),
    ]
    for method, args in calls:
        with pytest.raises(StoreError, match="time given to the store"):
            method(*args)
    assert not _hostile.CALLS  # the subclass's conversions never ran
    assert store.budget("k") == (0, 5)
    assert store.claim("i", "o2", 50.0, 100.0) == Claim("pending")  # o1's claim still runs
    found = store.snapshot("s")
    assert found is not None and found.version == version and found.data == b"x"


def test_a_lease_until_infinity_never_expires(store: Store) -> None:
    assert store.reserve_leased("k", "forever", 6, 10, 0.0, float("inf"))
    assert not store.reserve_leased("k", "b", 5, 10, 1e300, 2e300)
    assert store.budget("k") == (0, 6)


def test_the_time_check_reads_only_the_value() -> None:
    _hostile.CALLS.clear()
    check_times(_hostile.LoudInt(5), _hostile.LoudFloat(1.5), float("inf"), -3, 0.0)
    assert not _hostile.CALLS


def test_audit_chain_returns_each_row_with_its_hash(store: Store) -> None:
    store.append(_row(0))
    ((row, digest),) = store.audit_chain()
    assert row.id == 1 and isinstance(digest, str) and len(digest) == 64
    assert store.audit_chain(after_id=1) == []


@pytest.mark.parametrize("key", ["k\udc80", "\ud800"])
def test_a_key_the_backend_cannot_hold_is_kept_or_store_unavailable(store: Store, key: str) -> None:
    for method, args in [
        (store.incr, (key,)),
        (store.reserve_leased, (key, "h", 1, 5, 0.0, 1.0)),
        (store.claim, (key, "o", 0.0, 1.0)),
        (store.compare_and_set, (key, None, "v")),
    ]:
        with contextlib.suppress(StoreUnavailable):
            method(*args)  # type: ignore[operator]
    store.append(_row(0))  # the store still works
    assert len(store.audit_rows()) == 1
