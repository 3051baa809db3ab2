"""Caps and idempotency hold with 8 processes racing on one SQLite file or PostgreSQL database."""

from __future__ import annotations

import multiprocessing
import time
from typing import Any

import pytest

from guardrails import Guardrails, tool
from guardrails.effects import CapExceeded, Idempotency, PaidCall, Usage
from guardrails.store import PostgresStore, SQLiteStore, Store, to_micros

WORKERS = 8
pytestmark = pytest.mark.slow

# fork: the workers are functions of this module, which a spawned child could not import.
_ctx = multiprocessing.get_context("fork")


def _open(url: str) -> Store:
    return SQLiteStore(url) if url.endswith(".db") else PostgresStore(url, max_size=2)


def _run_workers(target: Any, url: str, *extra: Any) -> list[Any]:
    with _open(url) as store:  # migrate once, so the race is about the effect, not the schema
        store.incr("opened", 0)
    barrier = _ctx.Barrier(WORKERS)
    queue = _ctx.Queue()
    procs = [
        _ctx.Process(target=target, args=(url, barrier, queue, *extra)) for _ in range(WORKERS)
    ]
    for p in procs:
        p.start()
    results = [queue.get(timeout=120) for _ in procs]
    for p in procs:
        p.join(timeout=60)
        assert p.exitcode == 0
    return results


def _spend(url: str, barrier: Any, queue: Any, attempts: int, estimate: float) -> None:
    store = _open(url)
    paid = PaidCall(store, usage=lambda _: Usage(cost=0.01), daily_cap=1.0, estimate=estimate)
    admitted = 0
    barrier.wait()
    for _ in range(attempts):
        try:
            paid(lambda: None, instance="wf")
            admitted += 1
        except CapExceeded:
            pass
    store.close()
    queue.put(admitted)


def test_reserved_spend_never_exceeds_the_daily_cap(shared_url: str) -> None:
    admitted = _run_workers(_spend, shared_url, 30, 0.01)
    store = _open(shared_url)
    paid = PaidCall(store, usage=lambda _: Usage(), daily_cap=1.0)
    rows = store.audit_rows(kind="paid_call", outcome="ok", limit=10_000)
    store_spent = store.budget(paid._daily_key())
    store.close()
    assert sum(admitted) == 100
    assert store_spent == (to_micros(1.0), 0)
    assert len(rows) == 100
    assert sum(to_micros(r.cost or 0) for r in rows) == to_micros(1.0)


def test_without_an_estimate_the_overshoot_is_bounded_by_the_calls_in_flight(
    shared_url: str,
) -> None:
    admitted = _run_workers(_spend, shared_url, 30, 0.0)
    # Each admission saw spent < cap; at most the other workers' calls were in flight.
    assert 100 <= sum(admitted) <= 100 + WORKERS - 1


def _publish_once(url: str, barrier: Any, queue: Any) -> None:
    store = _open(url)

    @tool(effect=True, options={"idempotency_key": "publish-{brief_id}"})
    def publish(brief_id: str) -> dict[str, Any]:
        runs = store.incr(f"runs:{brief_id}")
        time.sleep(0.2)  # widen the window in which replays arrive
        return {"published": brief_id, "run": runs}

    rails = Guardrails([publish], hooks=[Idempotency(store, poll=0.01)])
    barrier.wait()
    result = rails.call("publish", {"brief_id": "b-1"})
    queue.put((str(result.outcome), result.reason, result.content))
    store.close()


def test_concurrent_replays_run_the_effect_exactly_once(shared_url: str) -> None:
    results = _run_workers(_publish_once, shared_url)
    store = _open(shared_url)
    runs = store.incr("runs:b-1", 0)
    store.close()
    assert runs == 1
    assert {outcome for outcome, *_ in results} == {"ok"}, results
    assert len({content for _, _, content, *_ in results}) == 1
    assert sorted(str(reason) for _, reason, *_ in results).count("replayed") == WORKERS - 1
