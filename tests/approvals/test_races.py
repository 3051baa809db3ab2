"""Retries of one approved call race: in threads and in processes, it runs exactly once."""

from __future__ import annotations

import multiprocessing
import threading
from typing import Any

import pytest

from guardrails import Guardrails, tool
from guardrails.approvals import ApprovalGate, Approvals
from guardrails.store import PostgresStore, SQLiteStore, Store
from guardrails.verdicts import Outcome

WORKERS = 8
_ctx = multiprocessing.get_context("fork")  # the workers are functions of this module


def _engine(store: Any, ran: list[Any]) -> Guardrails:
    @tool(approval="always", effect=True)
    def wipe(disk: str) -> str:
        ran.append(disk)
        return "wiped"

    return Guardrails([wipe], hooks=[ApprovalGate(store)])


def _approve_one(store: Any, engine: Guardrails) -> None:
    engine.turn(tenant="t", session="s").call("wipe", {"disk": "sda"})
    [request] = Approvals(store).list("pending")
    Approvals(store).approve(request.id, by="alice")


def test_threads_retrying_one_approved_call_run_it_once(store: Store) -> None:
    ran: list[Any] = []
    engine = _engine(store, ran)
    _approve_one(store, engine)
    barrier = threading.Barrier(WORKERS)
    outcomes: list[Any] = []

    def retry() -> None:
        barrier.wait()
        outcomes.append(engine.turn(tenant="t", session="s").call("wipe", {"disk": "sda"}))

    threads = [threading.Thread(target=retry) for _ in range(WORKERS)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert ran == ["sda"]
    assert sorted(r.outcome for r in outcomes) == [Outcome.OK] + [Outcome.UNAVAILABLE] * (
        WORKERS - 1
    )
    assert {r.reason for r in outcomes if r.outcome is Outcome.UNAVAILABLE} == {"approval_pending"}


def _open(url: str) -> Store:
    # Bounds far above any wait on a loaded machine: a wait that ran out would be
    # store_unavailable, which says nothing about the property under test.
    if url.endswith(".db"):
        return SQLiteStore(url, busy_timeout=120.0)
    return PostgresStore(url, max_size=2, timeout=120.0, connect_timeout=60)


def _retry_in_a_process(url: str, barrier: Any, queue: Any) -> None:
    store = _open(url)
    ran: list[Any] = []
    engine = _engine(store, ran)
    barrier.wait()
    result = engine.turn(tenant="t", session="s").call("wipe", {"disk": "sda"})
    store.close()
    queue.put((len(ran), result.outcome.value, result.reason))


@pytest.mark.slow
def test_processes_retrying_one_approved_call_run_it_once(shared_url: str) -> None:
    store = _open(shared_url)
    _approve_one(store, _engine(store, []))
    barrier, queue = _ctx.Barrier(WORKERS), _ctx.Queue()
    procs = [
        _ctx.Process(target=_retry_in_a_process, args=(shared_url, barrier, queue))
        for _ in range(WORKERS)
    ]
    for p in procs:
        p.start()
    results = [queue.get(timeout=120) for _ in procs]
    for p in procs:
        p.join(timeout=60)
        assert p.exitcode == 0
    assert sum(n for n, _, _ in results) == 1
    assert sorted(o for _, o, _ in results) == ["ok"] + ["unavailable"] * (WORKERS - 1)
    assert [r.status for r in Approvals(store).list(None)] == ["pending", "used"]
    store.close()
