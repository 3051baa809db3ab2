"""Crash-safe budgets: a reservation is leased, renewed while its call runs, given back after its holder died."""

from __future__ import annotations

import multiprocessing
import os
import signal
import threading
import time
from collections.abc import Sequence
from typing import Any

import pytest

from guardrails.effects import CapExceeded, PaidCall, Usage
from guardrails.effects._leases import renewer
from guardrails.errors import ConfigurationError
from guardrails.store import (
    MemoryStore,
    PostgresStore,
    SQLiteStore,
    Store,
    StoreUnavailable,
    to_micros,
)
from guardrails.testing import FakeClock
from tests.store._gated import GENEROUS

_ctx = multiprocessing.get_context("fork")


# -- PaidCall renews while the call runs --------------------------------------------------------


def test_a_wrapper_whose_lease_or_clock_changed_renews_with_the_new_ones(store: Store) -> None:
    """The renewal of a call follows the wrapper's lease, store and clock as they are
    when the call is made (one renewal entry is kept per wrapper, made again on a change)."""
    paid = PaidCall(store, usage=lambda _: Usage(), daily_cap=1.0, lease=60.0)
    renewing: list[Any] = []

    def body() -> None:
        renewing.extend(renewer._held.values())

    paid(body)
    paid.lease, paid.clock = 5.0, FakeClock(2_000.0)
    paid(body)
    first, second = renewing
    assert (first.store, first.lease) == (store, 60.0)
    assert (second.store, second.lease, second.clock) == (store, 5.0, paid.clock)


def test_a_call_longer_than_its_lease_keeps_its_reservation(store: Store) -> None:
    clock = FakeClock(1_000.0)
    paid = PaidCall(store, usage=lambda _: Usage(cost=0.0), instance_cap=1.0, estimate=0.6,
                    lease=10.0, clock=clock)  # fmt: skip
    other = PaidCall(store, usage=lambda _: Usage(), instance_cap=1.0, estimate=0.6, clock=clock)
    seen: list[str] = []

    def long_call() -> None:
        for _ in range(5):
            clock.advance(8.0)  # each step is within a lease of the last renewal
            renewer.tick()
            try:
                other(lambda: None, instance="wf")
                seen.append("admitted")
            except CapExceeded:
                seen.append("refused")

    paid(long_call, instance="wf")
    assert seen == ["refused"] * 5
    assert store.budget(paid._instance_key("wf")) == (0, 0)
    other(lambda: None, instance="wf")


def test_a_renewer_whose_thread_ended_by_a_failure_starts_another(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The renewing thread ends when nothing is held, or by a failure (a stop raised in
    it): either way it gives up its place, and the next ``hold`` starts another."""
    from guardrails.effects._leases import Held, Renewer

    class Stopped(BaseException):
        pass

    renewed: list[str] = []

    class Once(MemoryStore):
        def renew_leases_of(self, holders: Sequence[str], until: float, /) -> int:
            renewed.extend(holders)
            raise Stopped  # not an Exception: it ends the renewing thread

    ended: list[type[BaseException] | None] = []
    monkeypatch.setattr(threading, "excepthook", lambda args: ended.append(args.exc_type))
    mine = Renewer()
    mine.hold("first", Held(Once(), 0.003, time.monotonic))
    first = mine._thread
    assert first is not None
    first.join(GENEROUS)
    assert not first.is_alive() and mine._thread is None and renewed == ["first"]
    mine.drop("first")
    mine.hold("second", Held(Once(), 0.003, time.monotonic))
    second = mine._thread
    assert second is not None and second is not first
    second.join(GENEROUS)
    assert renewed == ["first", "second"] and ended == [Stopped, Stopped]


class _Counting(MemoryStore):
    """Counts its renewal calls; ``fails``: its renewal of many at once raises."""

    def __init__(self, fails: bool = False) -> None:
        super().__init__()
        self.fails = fails
        self.calls: list[tuple[str, int]] = []

    def renew_leases_of(self, holders: Sequence[str], until: float, /) -> int:
        self.calls.append(("many", len(holders)))
        if self.fails:
            raise StoreUnavailable("away")
        return super().renew_leases_of(holders, until)

    def renew_leases(self, holder: str, until: float, /) -> int:
        self.calls.append(("one", 1))
        return super().renew_leases(holder, until)


class _OneByOne:
    """A store with ``renew_leases`` alone (the optional ``renew_leases_of`` missing)."""

    def __init__(self) -> None:
        self.renewed: list[str] = []

    def renew_leases(self, holder: str, until: float, /) -> int:
        self.renewed.append(holder)
        return 1

    def close(self) -> None:
        pass


def test_the_renewer_renews_the_holders_of_one_store_lease_and_clock_in_one_call(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """A store with ``renew_leases_of`` gets one call per store, lease and clock for all
    their holders; one without it, one ``renew_leases`` per holder. A batch that fails
    leaves its holders unrenewed (logged once), the others renewed."""
    from guardrails.effects._leases import Held, Renewer

    batched, away, one_by_one = _Counting(), _Counting(fails=True), _OneByOne()
    clock = FakeClock(100.0)
    for i in range(5):
        assert batched.reserve_leased("k", f"b{i}", 1, 100, 100.0, 101.0)
    mine = Renewer()
    groups = {
        Held(batched, 60.0, clock): [f"b{i}" for i in range(5)],  # type: ignore[arg-type]
        Held(batched, 30.0, clock): ["l0", "l1"],  # type: ignore[arg-type]
        Held(away, 60.0, clock): ["a0", "a1", "a2"],  # type: ignore[arg-type]
        Held(one_by_one, 60.0, clock): ["o0", "o1"],  # type: ignore[arg-type]
    }
    try:
        for held, holders in groups.items():
            for holder in holders:
                mine.hold(holder, held)
        with caplog.at_level("WARNING", logger="guardrails"):
            assert mine.tick() == 5 + 2 + 2  # all but the three whose batch failed
        assert sorted(batched.calls) == [("many", 2), ("many", 5)]
        assert away.calls == [("many", 3)]
        assert one_by_one.renewed == ["o0", "o1"]
        assert [r.getMessage() for r in caplog.records] == ["leases of 3 holders not renewed"]
        # The five leases now run until 100 + 60: at 150 none has lapsed.
        assert not batched.reserve_leased("k", "new", 96, 100, 150.0, 160.0)
        assert batched.budget("k") == (0, 5)
    finally:
        for holders in groups.values():
            for holder in holders:
                mine.drop(holder)
        mine._wake.set()  # the thread ends: nothing is held


def test_a_deadline_over_a_store_without_renew_leases_of_renews_each_holder() -> None:
    from guardrails.store import WithDeadline

    inner = _OneByOne()
    with WithDeadline(inner, 30.0) as store:  # type: ignore[arg-type]
        assert store.renew_leases_of(["x", "y", "z"], 10.0) == 3
    assert inner.renewed == ["x", "y", "z"]


def test_a_lease_must_be_positive(store: Store) -> None:
    with pytest.raises(ConfigurationError, match="lease"):
        PaidCall(store, usage=lambda _: Usage(), daily_cap=1.0, lease=0)


# -- 8 processes killed mid-call ------------------------------------------------------------------

# Long enough that no live holder's lease lapses while the others start: a lease
# lapses when its renewer thread is starved for a lease, and a loaded machine
# starved 0.5 s leases (one dead-looking holder was reclaimed by the next
# reservation, leaving 0.7 held instead of 0.8). The give-back is read at a
# clock past the lease instead of waited for: expiry is judged by the caller's
# ``now`` (``Store.reserve_leased``).
LEASE = 60.0


def _open(url: str) -> Store:
    return SQLiteStore(url) if url.endswith(".db") else PostgresStore(url, max_size=2)


def _hang(url: str, started: Any) -> None:
    store = _open(url)
    paid = PaidCall(store, usage=lambda _: Usage(cost=0.1), instance_cap=1.0, estimate=0.1,
                    lease=LEASE)  # fmt: skip

    def forever() -> None:
        started.put(os.getpid())
        while True:
            time.sleep(60)

    paid(forever, instance="wf")


@pytest.mark.slow
def test_reservations_of_killed_processes_are_given_back_after_the_lease(shared_url: str) -> None:
    with _open(shared_url) as store:
        store.incr("migrated", 0)
    started = _ctx.Queue()
    procs = [_ctx.Process(target=_hang, args=(shared_url, started)) for _ in range(8)]
    before = time.time()  # every lease runs to at least before + LEASE
    for p in procs:
        p.start()
    assert len({started.get(timeout=60) for _ in procs}) == 8  # all 8 are inside the call
    for p in procs:
        os.kill(p.pid or 0, signal.SIGKILL)
    for p in procs:
        p.join(timeout=30)
        assert p.exitcode == -signal.SIGKILL
    after = time.time()  # no lease was renewed after this
    store = _open(shared_url)

    def checker(now: float) -> PaidCall:
        clock = FakeClock(now)
        return PaidCall(store, usage=lambda _: Usage(cost=0.0), instance_cap=1.0, estimate=1.0,
                        clock=clock)  # fmt: skip

    key = checker(after)._instance_key("wf")
    assert store.budget(key) == (0, to_micros(0.8))  # held by the dead
    with pytest.raises(CapExceeded):  # not given back before the lease ran out
        checker(before + LEASE - 1.0)(lambda: None, instance="wf")
    assert store.budget(key) == (0, to_micros(0.8))
    checker(after + LEASE)(lambda: None, instance="wf")  # every lease has lapsed
    assert store.budget(key) == (0, 0)
    tenth = PaidCall(store, usage=lambda _: Usage(cost=0.1), instance_cap=1.0, estimate=0.1)
    admitted = 0
    for _ in range(11):
        try:
            tenth(lambda: None, instance="wf")
            admitted += 1
        except CapExceeded:
            pass
    assert admitted == 10
    store.close()
