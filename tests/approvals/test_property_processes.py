"""The interleaving property across two processes on one SQLite file or PostgreSQL database:
the calls of each schedule alternate between two worker processes with their own store
connections, and the people decide from this one."""

from __future__ import annotations

import contextlib
import multiprocessing
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings

from guardrails import Guardrails, tool
from guardrails.approvals import ApprovalError, ApprovalGate, Approvals
from guardrails.store import PostgresStore, SQLiteStore, Store
from tests._examples import examples

from .test_property import ARGUMENTS, SCOPES, STEPS, check

_ctx = multiprocessing.get_context("fork")  # the worker is a function of this module
pytestmark = pytest.mark.slow


def _open(url: str) -> Store:
    # Bounds far above any wait on a loaded machine: a wait that ran out would be
    # store_unavailable, which says nothing about the property under test.
    if url.endswith(".db"):
        return SQLiteStore(url, busy_timeout=120.0)
    return PostgresStore(url, max_size=2, timeout=120.0, connect_timeout=60)


def _worker(conn: Any) -> None:
    """Calls as the pipe says; ``("open", url)`` starts on a new store."""
    store, now = None, [0.0]

    @tool(approval="amount > 500", effect=True)
    def pay(amount: int, to: str) -> str:
        return "paid"

    while (job := conn.recv()) is not None:
        if job[0] == "open":
            if store is not None:
                store.close()
            store = _open(job[1])
            engine = Guardrails([pay], hooks=[ApprovalGate(store, ttl=20, clock=lambda: now[0])])
            conn.send("opened")
            continue
        tenant, session, arguments, now[0] = job
        result = engine.turn(tenant=tenant, session=session).call("pay", arguments)
        conn.send((result.outcome.value, result.reason, repr(result.exception)))
    if store is not None:
        store.close()


def _play(store: Store, steps: list[Any], pipes: list[Any]) -> None:
    clock = [0.0]
    people = Approvals(store, clock=lambda: clock[0])
    runs: list[Any] = []
    calls: list[Any] = []
    decided: dict[str, int] = {}
    last = (0, 0)
    for step, (kind, a, b) in enumerate(steps):
        if kind == "retry":
            kind, a, b = "call", *last
        if kind == "call":
            last = (a, b)
            (tenant, session), arguments = SCOPES[a], ARGUMENTS[b]
            pipe = pipes[step % 2]  # alternate the processes
            pipe.send((tenant, session, arguments, clock[0]))
            outcome, reason, exception = pipe.recv()
            calls.append((tenant, session, arguments, clock[0], step))
            if outcome == "ok":
                runs.append((tenant, session, arguments, clock[0]))
            else:
                assert reason in ("approval_pending", "approval_denied", "approval_expired"), (
                    reason,
                    exception,
                )
        elif kind == "wait":
            clock[0] += a
        else:
            listed = people.list("pending") + people.list(None, limit=1000)
            if a < len(listed):
                try:
                    getattr(people, kind)(listed[a].id, by="p")
                    decided[listed[a].id] = step
                except ApprovalError:
                    pass
    check(people.list(None, limit=1000), runs, calls, decided)


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def places(request: pytest.FixtureRequest, tmp_path: Any) -> Iterator[Callable[[], Any]]:
    """A new, empty store location per schedule."""
    if request.param == "sqlite":
        count = iter(range(10**6))
        yield lambda: contextlib.nullcontext(f"{tmp_path}/{next(count)}.db")
        return
    from guardrails.store.testing import postgres_dsn, temporary_schema

    request.getfixturevalue("pg_dsn")  # skips (or fails) without a server
    dsn = postgres_dsn()
    yield lambda: temporary_schema(dsn)


def test_two_processes_run_each_approved_request_exactly_once(places: Any) -> None:
    ends = [_ctx.Pipe() for _ in range(2)]
    workers = [_ctx.Process(target=_worker, args=(child,)) for _, child in ends]
    for w in workers:
        w.start()
    pipes = [parent for parent, _ in ends]

    @settings(max_examples=examples(20), deadline=None, suppress_health_check=list(HealthCheck))
    @given(steps=STEPS)
    def each(steps: list[Any]) -> None:
        with places() as url:
            store = _open(url)
            try:
                store.approvals(None, 0.0, 1)  # type: ignore[attr-defined]  # migrated once
                for pipe in pipes:
                    pipe.send(("open", url))
                    assert pipe.recv() == "opened"
                _play(store, steps, pipes)
            finally:
                store.close()

    try:
        each()
    finally:
        for pipe in pipes:
            pipe.send(None)
        for w in workers:
            w.join(timeout=60)
    assert all(w.exitcode == 0 for w in workers)
