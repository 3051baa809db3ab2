"""PostgreSQL store work of 1,000 concurrent tasks: store threads against the async pool.

Each task does what one audited, budgeted call asks of the store: a leased
reservation on a shared daily budget, its settlement, and one audit row on
the hash chain. Two ways of running it from one event loop:

- ``threads``: the sync ``PostgresStore`` methods on the store's own
  threads (``offloop.run`` / ``offloop.append``: rows queued together share
  one commit);
- ``async pool``: the same statements on async psycopg connections from a
  ``psycopg_pool.AsyncConnectionPool``, awaited on the loop, with the rows
  of tasks that arrive together committed by one ``append_many``.

Beside them a ticker task asks to wake every millisecond; **worst lag** is
how late it woke. Run: ``python benchmarks/run.py --only pg_async [--quick]``
(needs ``GUARDRAILS_POSTGRES_DSN``).
"""

from __future__ import annotations

import asyncio
import os
import statistics
import time
import uuid
from collections.abc import Awaitable, Callable
from typing import Any

from _harness import row

from guardrails.store import AuditRow, PostgresStore, offloop
from guardrails.store.testing import postgres_dsn, temporary_schema

CALLS = 1000
TICK = 0.001
CAP = 10**15
KEY = "spend:bench:day"

Work = Callable[[int], Awaitable[None]]
Row = dict[str, Any]


def _row(i: int) -> AuditRow:
    return AuditRow("paid_call", time.time(), call_id=f"c-{i}", tool="lookup", outcome="ok")


def _threads(store: PostgresStore) -> Work:
    async def one(i: int) -> None:
        holder = uuid.uuid4().hex
        now = time.time()
        admitted = await offloop.run(
            store, store.reserve_leased, KEY, holder, 1, CAP, now, now + 60
        )
        assert admitted
        await offloop.run(store, store.settle_leased, KEY, holder, 1)
        await offloop.append(store, _row(i))

    return one


def _async_pool(store: PostgresStore) -> Work:
    path = store.async_path()
    assert path is not None

    async def one(i: int) -> None:
        holder = uuid.uuid4().hex
        now = time.time()
        admitted = await path.call("reserve_leased", KEY, holder, 1, CAP, now, now + 60)
        assert admitted
        await path.call("settle_leased", KEY, holder, 1)
        await path.append(_row(i))

    return one


async def _burst(work: Work, calls: int) -> tuple[float, float]:
    """Seconds for ``calls`` concurrent tasks and the ticker's worst lateness (s)."""
    worst = 0.0
    done = False

    async def ticker() -> None:
        nonlocal worst
        while not done:
            before = time.perf_counter()
            await asyncio.sleep(TICK)
            worst = max(worst, time.perf_counter() - before - TICK)

    ticking = asyncio.create_task(ticker())
    await asyncio.sleep(TICK)
    start = time.perf_counter()
    await asyncio.gather(*(work(i) for i in range(calls)))
    elapsed = time.perf_counter() - start
    done = True
    await ticking
    return elapsed, worst


async def _rounds(work: Work, calls: int, rounds: int) -> tuple[list[float], list[float]]:
    await _burst(work, 50)  # warm up: threads, connections, prepared plans
    spans, lags = [], []
    for _ in range(rounds):
        elapsed, worst = await _burst(work, calls)
        spans.append(elapsed)
        lags.append(worst)
    return spans, lags


def _measure(dsn: str, name: str, make: Callable[[PostgresStore], Work], quick: bool) -> Row:
    calls = 200 if quick else CALLS
    rounds = 1 if quick else 3
    store = PostgresStore(dsn, async_pool=name == "async pool")
    try:

        async def session() -> tuple[list[float], list[float]]:
            try:
                return await _rounds(make(store), calls, rounds)
            finally:
                await store.aclose()

        spans, lags = asyncio.run(session())
        spent, _ = store.budget(KEY)
        rows = len(store.audit_rows(limit=10 * calls))
    finally:
        store.close()
    expected = 50 + calls * rounds
    if spent != expected or rows != expected:
        raise RuntimeError(f"{name}: spent {spent}, rows {rows}, expected {expected}")
    span = statistics.median(spans)
    return row(
        "pg_async",
        f"{calls} concurrent tasks, {name}",
        span / calls * 1e6,
        calls_per_s=round(calls / span),
        worst_loop_lag_ms=round(max(lags) * 1e3, 2),
        median_worst_loop_lag_ms=round(statistics.median(lags) * 1e3, 2),
    )


def run(quick: bool = False) -> list[Row]:
    dsn = postgres_dsn()
    if dsn is None:
        return []
    rows = []
    # Two passes, the paths alternately, so that a burst of load hits both.
    for _ in range(1 if quick else 2):
        for name, make in (("threads", _threads), ("async pool", _async_pool)):
            with temporary_schema(dsn) as scoped:
                rows.append(_measure(scoped, name, make, quick))
    return rows


if __name__ == "__main__":
    for found in run(quick=bool(os.environ.get("QUICK"))):
        print(found)
