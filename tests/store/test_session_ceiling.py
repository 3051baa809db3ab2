"""The session-wide tool-call ceiling counts in the store, so it holds across processes."""

from __future__ import annotations

import multiprocessing
from typing import Any

import pytest

from guardrails import Guardrails, Outcome, tool
from guardrails.rules.session_ceiling import Counter, SessionCeiling
from guardrails.store import MemoryStore, PostgresStore, SQLiteStore, Store

_ctx = multiprocessing.get_context("fork")


@tool
def ping() -> str:
    return "pong"


def _open(url: str) -> Store:
    return SQLiteStore(url) if url.endswith(".db") else PostgresStore(url, max_size=2)


def _calls(url: str, barrier: Any, queue: Any) -> None:
    store = _open(url)
    rails = Guardrails([ping], hooks=[SessionCeiling(20, counter=store)])
    barrier.wait()
    outcomes = [rails.turn(session="shared").call("ping", {}).outcome for _ in range(5)]
    queue.put(sum(o is Outcome.OK for o in outcomes))
    store.close()


def test_every_store_is_a_counter() -> None:
    assert isinstance(MemoryStore(), Counter)


@pytest.mark.slow
def test_a_session_ceiling_in_the_store_holds_across_eight_processes(shared_url: str) -> None:
    _open(shared_url).close()
    barrier, queue = _ctx.Barrier(8), _ctx.Queue()
    procs = [_ctx.Process(target=_calls, args=(shared_url, barrier, queue)) for _ in range(8)]
    for p in procs:
        p.start()
    allowed = [queue.get(timeout=120) for _ in procs]
    for p in procs:
        p.join(timeout=60)
    assert sum(allowed) == 20
