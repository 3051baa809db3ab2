"""A paid call's settlement that was not written is written once more, and never counted twice.

The caller is told of the failure (``StoreUnavailable``: ``unavailable`` to
the model) either way; the second settlement gives the reservation back
instead of leaving it held until its lease lapses, but only while every
lease of the call is still held, so that a first settlement the store did
write (and then failed to confirm) is not counted again.
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest

from guardrails.audit import AuditLog
from guardrails.effects import PaidCall, Usage
from guardrails.effects._leases import renewer
from guardrails.store import SQLiteStore, StoreUnavailable
from tests.store._faulty import Plan, faulty

SETTLEMENT = "DELETE FROM guardrails_leases WHERE key = ? AND holder = ?"


class FailingSettlement:
    """A store whose first ``settle_leased`` fails: before writing, or after (unconfirmed)."""

    def __init__(self, inner: SQLiteStore, *, written: bool) -> None:
        self.inner = inner
        self.written = written
        self.failures = 0

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)

    def settle_leased(self, *args: Any) -> int:
        if self.failures == 0:
            self.failures += 1
            if self.written:
                self.inner.settle_leased(*args)
            raise StoreUnavailable("the settlement was not confirmed")
        return int(self.inner.settle_leased(*args))


def _paid(store: Any) -> PaidCall:
    return PaidCall(store, usage=lambda _: Usage(1, 1, 0.5), daily_cap=10.0, instance_cap=5.0)


@pytest.mark.parametrize("written", [False, True], ids=["not-written", "written-unconfirmed"])
def test_a_failed_settlement_is_written_again_only_if_no_part_of_it_was(
    tmp_path: Path, written: bool
) -> None:
    store = FailingSettlement(SQLiteStore(tmp_path / "a.db"), written=written)
    paid = _paid(store)
    paid.estimate = 1.0
    with pytest.raises(StoreUnavailable):
        paid(lambda: "response", instance="i-1")
    daily, instance = paid._daily_key(), paid._instance_key("i-1")
    if written:  # one key settled before the failure: nothing is written twice
        assert store.budget(daily) == (500_000, 0)
        assert store.budget(instance) == (0, 1_000_000)  # left to its lease
        assert [r.kind for r in AuditLog(store.inner).rows()] == []
    else:  # nothing was written: the second settlement writes all of it
        assert store.budget(daily) == store.budget(instance) == (500_000, 0)
        assert [(r.kind, r.cost) for r in AuditLog(store.inner).rows()] == [("paid_call", 0.5)]
    assert not renewer._held
    store.inner.close()


async def test_a_call_cancelled_while_it_runs_gives_back_even_when_its_settlement_pass_fails(
    tmp_path: Path,
) -> None:
    with faulty(Plan("rolled_back", marked_by=SETTLEMENT, fail=1)) as plan:
        store = SQLiteStore(tmp_path / "a.db")
        paid = _paid(store)
        paid.estimate = 1.0
        running = asyncio.Event()

        async def slow() -> str:
            running.set()
            await asyncio.sleep(3600)
            return "never"

        task = asyncio.ensure_future(paid.acall(slow, instance="i-1"))
        await running.wait()
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        assert plan.failed == 1
    assert store.budget(paid._daily_key()) == store.budget(paid._instance_key("i-1")) == (0, 0)
    rows = [(r.kind, r.outcome, r.exception) for r in AuditLog(store).rows()]
    assert rows == [("paid_call", "error", "CancelledError")]
    assert not renewer._held
    store.close()
