"""A pass of the SQLite store thread whose COMMIT fails: every caller is told, nothing of it remains.

The store thread runs a pass's store work in one transaction and answers
its callers once it has committed. When the commit fails (``_faulty``: as
SQLite's own does on a full disk or an I/O error, with the transaction
rolled back by SQLite, left open, or impossible to roll back), every caller
of the pass gets ``StoreUnavailable``; the database holds nothing of the
pass, and nothing in memory claims otherwise: the chain head hint, the
leases being renewed, the answers waiting for the loop. A paid call whose
settlement was in the failed pass is ``unavailable`` to the model, and its
reservation is given back (its spend counted once) by a second settlement
in a pass of its own, instead of staying held until its lease lapses.
"""

from __future__ import annotations

import asyncio
import itertools
import multiprocessing
import os
import resource
import signal
import sqlite3
import subprocess
import sys
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from guardrails import Guardrails, Outcome, Reason, tool
from guardrails.audit import AuditLog
from guardrails.effects import PaidCall, Usage
from guardrails.effects._leases import renewer
from guardrails.store import AuditRow, SQLiteStore, StoreUnavailable, offloop
from guardrails.store.offloop import off_loop
from guardrails.store.steps import aperform, arun
from guardrails.store.verify import verify
from tests.store._faulty import Plan, faulty
from tests.store._passes import counted, one_pass

SETTLEMENT = "DELETE FROM guardrails_leases WHERE key = ? AND holder = ?"
RESERVATION = "INSERT INTO guardrails_leases"
COST = 0.25


def _jobs(store: SQLiteStore, tag: str) -> list[Any]:
    return [
        *(arun(store, "reserve_leased", f"k{i}", f"h-{tag}", 1, 10, 0.0, 9e9) for i in range(4)),
        *(offloop.append(store, AuditRow("tool_call", 1.0, call_id=f"{tag}{i}")) for i in range(4)),
        *(aperform(store, counted()) for _ in range(2)),
        arun(store, "put_snapshot", "s", b"data", 1.0),
        arun(store, "compare_and_set", "phase", None, "one"),
    ]


def _nothing_but_the_first_row(path: Path) -> None:
    conn = sqlite3.connect(path)
    tables = ("guardrails_budgets", "guardrails_leases", "guardrails_counters")
    tables += ("guardrails_snapshots", "guardrails_kv")
    assert [conn.execute(f"SELECT COUNT(*) FROM {t}").fetchone()[0] for t in tables] == [0] * 5
    assert conn.execute("SELECT call_id FROM guardrails_audit").fetchall() == [("before",)]
    conn.close()


@pytest.mark.parametrize("mode", ["rolled_back", "left_open", "rollback_fails"])
async def test_every_caller_of_a_pass_whose_commit_fails_is_told_and_the_pass_leaves_nothing(
    tmp_path: Path, mode: str
) -> None:
    with faulty(Plan(mode)) as plan:
        store = SQLiteStore(tmp_path / "a.db")
        store.append(AuditRow("tool_call", 0.5, call_id="before"))
        head = store._shared_head
        runner = off_loop(store)
        assert runner is not None
        plan.fail = 1
        results = await one_pass(runner, lambda: _jobs(store, "failed"))
        assert plan.failed == 1
        # Every caller is told, the jobs that answer failures themselves too:
        # what they decided was decided on answers that were rolled back.
        assert len(results) == 12 and all(isinstance(r, StoreUnavailable) for r in results)
        _nothing_but_the_first_row(tmp_path / "a.db")
        other = sqlite3.connect(tmp_path / "a.db", timeout=0, isolation_level=None)
        other.execute("BEGIN IMMEDIATE")  # the failed pass holds no lock
        other.execute("ROLLBACK")
        other.close()
        assert store._shared_head == head  # no hint of a row that was not committed
        assert not offloop._waking(asyncio.get_running_loop()).inbox
        # The thread goes on: the next pass commits, the chain goes on from the head.
        results = await one_pass(runner, lambda: _jobs(store, "next"))
        assert results == [True] * 4 + [None] * 4 + ["counted"] * 2 + [1, True]
        rows = store.audit_rows()
        assert [(r.call_id) for r in rows] == ["before", "next0", "next1", "next2", "next3"]
        assert verify(store).ok
        store.close()


def _commit_past_a_file_size_limit(path: Path) -> None:
    """In a child process: the pass's COMMIT cannot grow the write-ahead log."""
    store = SQLiteStore(path)
    store.append(AuditRow("tool_call", 0.5, call_id="before"))
    runner = off_loop(store)
    assert runner is not None

    def limit() -> None:
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # a write past it fails (EFBIG)
        largest = max(os.path.getsize(f) for f in path.parent.iterdir())
        resource.setrlimit(resource.RLIMIT_FSIZE, (largest, resource.RLIM_INFINITY))

    results = asyncio.run(one_pass(runner, lambda: _jobs(store, "failed"), limit))
    resource.setrlimit(resource.RLIMIT_FSIZE, (resource.RLIM_INFINITY,) * 2)
    assert len(results) == 12 and all(isinstance(r, StoreUnavailable) for r in results)
    _nothing_but_the_first_row(path)
    results = asyncio.run(one_pass(runner, lambda: _jobs(store, "next")))
    assert results == [True] * 4 + [None] * 4 + ["counted"] * 2 + [1, True]
    assert verify(store).ok
    store.close()


def test_a_commit_that_cannot_write_fails_every_caller_and_leaves_nothing(tmp_path: Path) -> None:
    """A real write failure at COMMIT: the child's file size limit stops the log growing."""
    child = multiprocessing.get_context("fork").Process(
        target=_commit_past_a_file_size_limit, args=(tmp_path / "a.db",)
    )
    child.start()
    child.join(timeout=60)
    assert child.exitcode == 0


def _rails(store: SQLiteStore, cap: float, ran: list[str]) -> tuple[Guardrails, PaidCall]:
    paid = PaidCall(store, usage=lambda _: Usage(1, 1, COST), daily_cap=cap, estimate=COST)

    async def reply(order_id: str) -> str:
        ran.append(order_id)
        await asyncio.sleep(0)
        return order_id

    @tool(effect=True)
    async def order(order_id: str) -> str:
        return str(await paid.acall(reply, order_id))

    audit = AuditLog(store)
    return Guardrails([order], hooks=[audit], recorder=[audit]), paid


async def _burst(rails: Guardrails, calls: int) -> list[Any]:
    turns = [rails.turn(session=f"s-{i}") for i in range(calls)]
    return await asyncio.gather(
        *(t.acall("order", {"order_id": f"o-{i}"}, call_id=f"c-{i}") for i, t in enumerate(turns))
    )


def _spend_matches_the_rows(store: SQLiteStore, paid: PaidCall) -> list[AuditRow]:
    """spent is the cost of the paid_call rows committed; reserved is what the leases hold."""
    rows = [r for r in store.audit_rows(limit=10**6) if r.kind == "paid_call"]
    spent, reserved = store.budget(paid._daily_key())
    assert spent == round(sum(r.cost or 0.0 for r in rows) * 1e6)
    held = store._execute("SELECT COALESCE(SUM(amount), 0) FROM guardrails_leases").fetchone()[0]
    assert reserved == held
    return rows


@pytest.mark.parametrize("mode", ["rolled_back", "left_open", "rollback_fails"])
async def test_a_paid_call_whose_settlement_pass_fails_is_unavailable_and_gives_its_reservation_back(
    tmp_path: Path, mode: str
) -> None:
    with faulty(Plan(mode, marked_by=SETTLEMENT, fail=1)) as plan:
        store = SQLiteStore(tmp_path / "a.db")
        ran: list[str] = []
        rails, paid = _rails(store, 100.0, ran)
        results = await _burst(rails, 40)
        assert plan.failed == 1
        unavailable = [r for r in results if r.outcome is not Outcome.OK]
        assert {(r.outcome, r.reason) for r in unavailable} == {
            (Outcome.UNAVAILABLE, Reason.RAISED)
        }
        ran_ids = {f"c-{o[2:]}" for o in ran}
        # (share) the failed pass carried settlements: calls that ran, answered unavailable
        assert {r.call_id for r in unavailable} & ran_ids
        # Given back at once, with the spend of each call that ran counted once.
        assert store.budget(paid._daily_key()) == (round(len(ran) * COST * 1e6), 0)
        rows = _spend_matches_the_rows(store, paid)
        assert sorted(r.call_id for r in rows) == sorted(ran_ids)
        tool_rows = {r.call_id: r.outcome for r in store.audit_rows(kind="tool_call")}
        assert tool_rows == {r.call_id: r.outcome for r in results}
        assert not renewer._held
        assert verify(store).ok
        store.close()


async def test_a_paid_call_whose_reservation_pass_fails_does_not_run_and_holds_nothing(
    tmp_path: Path,
) -> None:
    with faulty(Plan("rolled_back", marked_by=RESERVATION, fail=1)) as plan:
        store = SQLiteStore(tmp_path / "a.db")
        ran: list[str] = []
        rails, paid = _rails(store, 100.0, ran)
        results = await _burst(rails, 40)
        assert plan.failed == 1
        refused = {r.call_id for r in results if r.outcome is not Outcome.OK}
        assert refused  # the failed pass carried reservations (share)
        assert {r.outcome for r in results if r.call_id in refused} == {Outcome.UNAVAILABLE}
        assert not refused & {f"c-{o[2:]}" for o in ran}  # none of them ran
        rows = _spend_matches_the_rows(store, paid)
        assert store.budget(paid._daily_key()) == (round(len(ran) * COST * 1e6), 0)
        assert {r.call_id for r in rows} == {f"c-{o[2:]}" for o in ran}
        assert not renewer._held
        store.close()


async def test_capped_calls_under_failing_commits_never_overspend_and_hold_nothing_after(
    tmp_path: Path,
) -> None:
    admitted = 37
    with faulty(Plan("left_open", every=5)) as plan:
        store = SQLiteStore(tmp_path / "a.db")
        ran: list[str] = []
        rails, paid = _rails(store, COST * admitted, ran)
        results = [r for _ in range(12) for r in await _burst(rails, 30)]
        assert plan.failed >= 5  # (share)
    outcomes = Counter(r.outcome for r in results)
    assert outcomes[Outcome.UNAVAILABLE] and outcomes[Outcome.LIMIT]  # (share)
    assert set(outcomes) <= {Outcome.OK, Outcome.LIMIT, Outcome.UNAVAILABLE}
    assert len(ran) <= admitted  # no overspend: each run was admitted under the cap
    rows = _spend_matches_the_rows(store, paid)
    # Never a pass without its spend: an ok call's settlement and row were committed.
    ok_rows = {r.call_id for r in rows if r.outcome == "ok"}
    assert {r.call_id for r in results if r.outcome is Outcome.OK} <= ok_rows
    assert not renewer._held
    _lapsed_leases_are_given_back(store, paid)
    assert verify(store).ok
    store.close()


def _lapsed_leases_are_given_back(store: SQLiteStore, paid: PaidCall) -> None:
    later = paid.clock() + paid.lease + 1
    key = paid._daily_key()
    spent, _ = store.budget(key)  # (lapsed leases are held until a reservation needs the room)
    assert store.reserve_leased(key, "after", 1, spent + 1, later, later + 1)  # all the room
    assert store.budget(key) == (spent, 1)
    leases = store._execute("SELECT holder FROM guardrails_leases").fetchall()
    assert leases == [("after",)]  # only the reservation just made


async def test_a_settlement_whose_second_try_fails_too_holds_its_reservation_until_the_lease_lapses(
    tmp_path: Path,
) -> None:
    with faulty(Plan("rolled_back", marked_by=SETTLEMENT, fail=10**6)) as plan:
        store = SQLiteStore(tmp_path / "a.db")
        ran: list[str] = []
        rails, paid = _rails(store, 100.0, ran)
        results = await _burst(rails, 40)
        assert plan.failed >= 2  # each settlement and its second try
    assert {r.outcome for r in results} == {Outcome.UNAVAILABLE}
    # Held: neither settlement was written; the calls that ran still hold theirs.
    assert ran and store.budget(paid._daily_key()) == (0, round(len(ran) * COST * 1e6))
    _spend_matches_the_rows(store, paid)
    assert not renewer._held  # not renewed: it lapses
    _lapsed_leases_are_given_back(store, paid)
    assert verify(store).ok
    store.close()


def _pay_until_killed(path: str, report: int) -> None:
    """Bursts of paid calls; from the fourth burst, the first pass that
    settles stops before its COMMIT and says so, to be killed there."""
    plan = Plan("hang", marked_by=SETTLEMENT, on_hang=lambda: os.write(report, b"in-pass\n"))
    with faulty(plan):
        store = SQLiteStore(path)
        rails, _ = _rails(store, 10**6, [])

        async def forever() -> None:
            for burst in itertools.count():
                plan.fail = int(burst == 3)
                for result in await _burst_named(rails, 50, burst):
                    os.write(report, f"{result.call_id}\n".encode())

        asyncio.run(forever())


async def _burst_named(rails: Guardrails, calls: int, burst: int) -> list[Any]:
    turns = [rails.turn(session=f"s-{burst}-{i}") for i in range(calls)]
    return await asyncio.gather(
        *(
            t.acall("order", {"order_id": f"o-{burst}-{i}"}, call_id=f"c-{burst}-{i}")
            for i, t in enumerate(turns)
        )
    )


def test_a_process_killed_in_the_middle_of_a_pass_leaves_the_spend_its_rows_say(
    tmp_path: Path,
) -> None:
    path = str(tmp_path / "a.db")
    read_end, write_end = os.pipe()
    child = multiprocessing.get_context("fork").Process(
        target=_pay_until_killed, args=(path, write_end)
    )
    child.start()
    os.close(write_end)
    lines: list[str] = []
    with os.fdopen(read_end, "rb", buffering=0) as reader:
        buffer = b""
        while "in-pass" not in lines:
            chunk = reader.read(4096)
            assert chunk, "the child ended before its pass stopped"
            buffer += chunk
            *done, buffer = buffer.split(b"\n")
            lines += [line.decode() for line in done]
        assert child.pid is not None
        os.kill(child.pid, signal.SIGKILL)
        child.join(timeout=30)
    assert child.exitcode == -signal.SIGKILL
    conn = sqlite3.connect(path)
    assert conn.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
    conn.close()
    checked = subprocess.run(
        [sys.executable, "-m", "guardrails.cli", "audit", "verify", path],
        capture_output=True,
        text=True,
        check=False,
    )
    assert checked.returncode == 0, checked.stdout + checked.stderr
    store = SQLiteStore(path)
    returned = {line for line in lines if line.startswith("c-")}
    assert len(returned) == 150  # three bursts answered before the stopped pass
    assert returned <= {r.call_id for r in store.audit_rows(kind="tool_call", limit=10**6)}
    paid = PaidCall(store, usage=lambda _: Usage(), daily_cap=1.0)
    _spend_matches_the_rows(store, paid)
    # The stopped pass settled reservations committed before it: they are held
    # (share), nothing of its settlements is in the file, and they lapse.
    assert store.budget(paid._daily_key())[1] > 0
    _lapsed_leases_are_given_back(store, paid)
    assert verify(store).ok
    store.close()
