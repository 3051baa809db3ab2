"""A pass of the SQLite store thread is one transaction, answered only once it has committed.

The store thread takes every job queued (``offloop``) and runs the store work
of all of them in one ``SQLiteStore.grouped()`` block: one ``BEGIN
IMMEDIATE``, a savepoint per operation that needs a transaction, one
``COMMIT``. The tests hold the thread in a first pass (a gated method) so that
the jobs queued meanwhile make the next pass, deterministically.
"""

from __future__ import annotations

import asyncio
import contextlib
import sqlite3
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from guardrails.audit import AuditLog
from guardrails.effects import PaidCall, Usage
from guardrails.store import AuditRow, SQLiteStore, StoreUnavailable
from guardrails.store.offloop import off_loop
from guardrails.store.steps import Steps, aperform, arun, call
from guardrails.store.verify import verify
from tests.store._gated import GENEROUS, Gated

CAP = 10**9


class Grouping(Gated):
    """A gated SQLite store that counts its passes' transactions, and can fail their commits."""

    def __init__(self, inner: SQLiteStore, method: str) -> None:
        super().__init__(inner, method)
        self.groups = 0
        self.fail_commit = False

    @contextlib.contextmanager
    def grouped(self) -> Iterator[None]:
        self.groups += 1
        with self.inner.grouped():
            yield
            if self.fail_commit:  # as a commit SQLite refused: the block is rolled back
                raise StoreUnavailable("commit refused")


async def _until_queued(store: Any, count: int) -> None:
    runner = off_loop(store)
    assert runner is not None
    while len(runner._queue) < count:
        await asyncio.sleep(0.001)


async def _held_then(store: Grouping, many: list[Any]) -> list[Any]:
    """A first gated job holds the thread; ``many`` queue meanwhile; then the gate opens."""
    first = asyncio.ensure_future(arun(store, store.method, "first", "h0", 1, CAP, 0.0, 9e9))
    while not store.started.is_set():
        await asyncio.sleep(0.001)
    tasks = [asyncio.ensure_future(c) for c in many]
    await _until_queued(store, len(many))
    store.gate.set()
    return await asyncio.gather(first, *tasks, return_exceptions=True)


def _fresh(path: Path) -> SQLiteStore:
    return SQLiteStore(path)  # another connection: sees only what was committed


async def test_the_jobs_queued_during_a_pass_make_one_transaction_committed_before_any_answer(
    tmp_path: Path,
) -> None:
    store = Grouping(SQLiteStore(tmp_path / "a.db"), "reserve_leased")
    other = _fresh(tmp_path / "a.db")

    async def reserve_then_look(i: int) -> tuple[bool, int]:
        granted = await arun(store, "reserve_leased", f"k{i}", f"h{i}", 5, CAP, 0.0, 9e9)
        return granted, other.budget(f"k{i}")[1]  # read at once from another connection

    results = await _held_then(store, [reserve_then_look(i) for i in range(40)])
    assert results[0] is True
    assert results[1:] == [(True, 5)] * 40  # each answer came after its commit
    assert store.groups == 2  # the first job's pass, then one for the forty
    other.close()
    store.inner.close()


async def test_a_failed_operation_in_a_pass_fails_its_caller_only(tmp_path: Path) -> None:
    store = Grouping(SQLiteStore(tmp_path / "a.db"), "reserve_leased")
    # A lone surrogate cannot be encoded: that operation fails, in its savepoint.
    keys = ["k0", "k1", "bad\udc80", "k3", "k4"]
    calls = [arun(store, "reserve_leased", k, "h", 5, CAP, 0.0, 9e9) for k in keys]
    calls.append(arun(store, "append", AuditRow("tool_call", 1.0, call_id="c-after")))
    results = await _held_then(store, calls)
    assert results[1:3] == [True, True] and results[4:6] == [True, True]
    assert isinstance(results[3], StoreUnavailable)
    assert isinstance(results[6], int)
    assert [store.inner.budget(k) for k in ("k0", "k1", "k3", "k4")] == [(0, 5)] * 4
    assert [r.call_id for r in AuditLog(store.inner).rows()] == ["c-after"]
    assert store.groups == 2
    store.inner.close()


async def test_a_commit_that_fails_fails_every_caller_of_the_pass_and_writes_nothing(
    tmp_path: Path,
) -> None:
    store = Grouping(SQLiteStore(tmp_path / "a.db"), "reserve_leased")
    store.inner.append(AuditRow("tool_call", 0.5, call_id="c-before"))
    audit = AuditLog(store)  # type: ignore[arg-type]

    def row(i: int) -> AuditRow:
        return AuditRow("tool_call", float(i), call_id=f"c-{i}")

    first = asyncio.ensure_future(arun(store, "reserve_leased", "first", "h", 1, CAP, 0.0, 9e9))
    while not store.started.is_set():
        await asyncio.sleep(0.001)
    store.fail_commit = True  # the next pass's commit fails (the first pass's too: it is held)
    tasks = [
        asyncio.ensure_future(arun(store, "reserve_leased", "k", f"h{i}", 1, CAP, 0.0, 9e9))
        for i in range(10)
    ]
    tasks += [asyncio.ensure_future(arun(store, "append", row(i))) for i in range(10)]
    await _until_queued(store, 20)
    store.gate.set()
    results = await asyncio.gather(first, *tasks, return_exceptions=True)
    assert all(isinstance(r, StoreUnavailable) for r in results)
    assert store.inner.budget("k") == (0, 0) and store.inner.budget("first") == (0, 0)
    assert [r.call_id for r in audit.rows()] == ["c-before"]
    # The head hint of the rolled-back rows was never published: the chain goes on.
    store.fail_commit = False
    await arun(store, "append", row(99))
    store.inner.append(row(100))
    assert [r.call_id for r in audit.rows()] == ["c-before", "c-99", "c-100"]
    assert verify(store.inner).ok
    store.inner.close()


def test_a_transaction_sqlite_rolled_back_by_itself_refuses_what_follows(tmp_path: Path) -> None:
    store = SQLiteStore(tmp_path / "a.db")
    store.append(AuditRow("tool_call", 0.5, call_id="c-0"))
    with pytest.raises(StoreUnavailable), store.grouped():
        store.append(AuditRow("tool_call", 1.0, call_id="c-1"))
        store._conn().execute("ROLLBACK")  # as SQLite does on a full disk or an I/O error
        with pytest.raises(StoreUnavailable):  # it would commit on its own: refused
            store.append(AuditRow("tool_call", 2.0, call_id="c-2"))
        with pytest.raises(StoreUnavailable):
            store.reserve("k", 1, CAP)
    assert store.budget("k") == (0, 0)
    store.append(AuditRow("tool_call", 3.0, call_id="c-3"))
    assert [r.call_id for r in AuditLog(store).rows()] == ["c-0", "c-3"]
    assert verify(store).ok
    store.close()


def test_an_operation_that_fails_inside_a_group_is_undone_alone(tmp_path: Path) -> None:
    store = SQLiteStore(tmp_path / "a.db")
    with store.grouped():
        assert store.reserve_leased("k", "h1", 3, 10, 0.0, 9e9)
        with pytest.raises(StoreUnavailable):
            store.reserve_leased("k", "h\udc80", 3, 10, 0.0, 9e9)
        assert store.settle_leased("k", "h1", 2) == 2
    assert store.budget("k") == (2, 0)
    store.close()


async def test_a_paid_call_cancelled_while_its_reservation_is_in_a_pass_gives_it_back(
    tmp_path: Path,
) -> None:
    store = Grouping(SQLiteStore(tmp_path / "a.db"), "reserve_leased")
    paid = PaidCall(store, usage=lambda _: Usage(cost=0.5), daily_cap=10.0, estimate=1.0)  # type: ignore[arg-type]

    async def reply() -> str:
        return "ok"

    task = asyncio.ensure_future(paid.acall(reply))
    while not store.started.is_set():
        await asyncio.sleep(0.001)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    store.gate.set()
    runner = off_loop(store)
    assert runner is not None
    while True:  # the give-back is queued once the reservation is answered
        assert runner.drain(GENEROUS)
        await asyncio.sleep(0.01)
        if not runner._queue and not runner._busy:
            break
    assert store.inner.budget(paid._daily_key()) == (0, 0)
    rows = [(r.kind, r.outcome, r.exception) for r in AuditLog(store.inner).rows()]
    assert rows == [("paid_call", "error", "CancelledError")]
    store.inner.close()


async def test_a_job_that_is_not_store_work_alone_runs_outside_the_transaction(
    tmp_path: Path,
) -> None:
    store = Grouping(SQLiteStore(tmp_path / "a.db"), "reserve_leased")
    runner = off_loop(store)
    assert runner is not None
    seen: list[bool] = []

    def guard_reading_the_store() -> None:  # what a guard with reads_store= runs
        seen.append(getattr(store.inner._local, "pending", None) is None)
        store.inner.get("k")

    async def guard() -> None:  # queued in its turn (``runner.run`` queues when called)
        await runner.run(guard_reading_the_store)

    calls = [
        arun(store, "reserve_leased", "k1", "h", 1, CAP, 0.0, 9e9),
        guard(),
        arun(store, "reserve_leased", "k2", "h", 1, CAP, 0.0, 9e9),
    ]
    results = await _held_then(store, calls)
    assert results == [True, True, None, True]
    assert seen == [True]
    assert store.groups == 3  # the held pass; then the store work before and after the guard
    store.inner.close()


async def test_a_pass_whose_transaction_cannot_begin_lets_each_job_meet_the_failure(
    tmp_path: Path,
) -> None:
    store = SQLiteStore(tmp_path / "a.db", busy_timeout=0.05)
    store.get("warm-up")  # the file and its tables
    holder = sqlite3.connect(tmp_path / "a.db", isolation_level=None)
    holder.execute("BEGIN EXCLUSIVE")  # another writer holds the file

    def counted() -> Steps[str]:
        try:
            yield call("incr", "k")
        except StoreUnavailable:
            return "escape"  # the job's own answer to a failure, as on the sync path
        return "counted"

    assert await asyncio.gather(*(aperform(store, counted()) for _ in range(5))) == ["escape"] * 5
    holder.execute("ROLLBACK")
    holder.close()
    assert await asyncio.gather(*(aperform(store, counted()) for _ in range(5))) == ["counted"] * 5
    assert store.incr("k", 0) == 5
    store.close()
