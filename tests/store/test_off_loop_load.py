"""A thousand concurrent async callers on SQLite and PostgreSQL: caps hold, kills leave a valid chain.

Under ``acall`` the store work of many callers shares passes of the store's
threads (on SQLite, one transaction per pass). A daily cap is never
overspent however the reservations are grouped, and a process killed while
passes are in flight leaves a chain that verifies, holding the row of every
call that returned.
"""

from __future__ import annotations

import asyncio
import multiprocessing
import os
import signal
import sqlite3

import pytest

from guardrails import Guardrails, Outcome, tool
from guardrails.audit import AuditLog
from guardrails.effects import PaidCall, Usage
from guardrails.store import PostgresStore, SQLiteStore, Store
from guardrails.store.verify import verify

_ctx = multiprocessing.get_context("fork")
CALLERS = 1000
COST = 0.25
ADMITTED = 137  # a cap of 137 calls' cost: no batch size divides it


def _open(url: str) -> Store:
    return SQLiteStore(url) if url.endswith(".db") else PostgresStore(url)


def _rails(store: Store) -> tuple[Guardrails, PaidCall]:
    paid = PaidCall(
        store, usage=lambda _: Usage(1, 1, COST), daily_cap=COST * ADMITTED, estimate=COST
    )

    async def reply(order_id: str) -> str:
        return order_id

    @tool
    async def lookup(order_id: str) -> str:
        return str(await paid.acall(reply, order_id))

    audit = AuditLog(store)
    return Guardrails([lookup], hooks=[audit], recorder=[audit]), paid


@pytest.mark.slow
def test_a_daily_cap_under_a_thousand_concurrent_callers_admits_exactly_its_share(
    shared_url: str,
) -> None:
    store = _open(shared_url)
    rails, paid = _rails(store)

    async def burst() -> list[object]:
        turns = [rails.turn(session=f"s-{i}") for i in range(CALLERS)]
        return await asyncio.gather(*(t.acall("lookup", {"order_id": "o"}) for t in turns))

    results = asyncio.run(burst())
    outcomes = [r.outcome for r in results]  # type: ignore[attr-defined]
    assert outcomes.count(Outcome.OK) == ADMITTED
    assert outcomes.count(Outcome.LIMIT) == CALLERS - ADMITTED
    assert paid.spent_today() == COST * ADMITTED
    rows = list(AuditLog(store).rows())
    paid_rows = [r.outcome for r in rows if r.kind == "paid_call"]
    assert sorted(set(paid_rows)) == ["limit", "ok"] and paid_rows.count("ok") == ADMITTED
    assert len([r for r in rows if r.kind == "tool_call"]) == CALLERS
    assert verify(store).ok
    store.close()


def _call_until_killed(url: str, report: int) -> None:
    store = _open(url)
    rails, _ = _rails(store)

    async def forever() -> None:
        n = 0
        while True:
            turns = [rails.turn(session=f"s-{n}-{i}") for i in range(200)]
            calls = [
                t.acall("lookup", {"order_id": "o"}, call_id=f"c-{n}-{i}")
                for i, t in enumerate(turns)
            ]
            for done in asyncio.as_completed(calls):
                result = await done
                os.write(report, f"{result.call_id}\n".encode())
            n += 1

    asyncio.run(forever())


def test_a_process_killed_while_passes_are_in_flight_leaves_a_valid_chain(
    shared_url: str,
) -> None:
    read_end, write_end = os.pipe()
    child = _ctx.Process(target=_call_until_killed, args=(shared_url, write_end))
    child.start()
    os.close(write_end)
    returned: list[str] = []
    buffer = b""
    with os.fdopen(read_end, "rb", buffering=0) as reader:
        while len(returned) < 500:
            chunk = reader.read(4096)
            assert chunk, "the caller stopped before it was killed"
            buffer += chunk
            *lines, buffer = buffer.split(b"\n")
            returned.extend(line.decode() for line in lines)
        assert child.pid is not None
        os.kill(child.pid, signal.SIGKILL)
        child.join(timeout=30)
        buffer += reader.read()
    returned.extend(line.decode() for line in buffer.split(b"\n")[:-1])
    assert child.exitcode == -signal.SIGKILL
    if shared_url.endswith(".db"):
        conn = sqlite3.connect(shared_url)
        assert conn.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
        conn.close()
    store = _open(shared_url)
    written = {r.call_id for r in AuditLog(store).rows() if r.kind == "tool_call"}
    assert set(returned) <= written
    assert verify(store).ok
    store.close()
