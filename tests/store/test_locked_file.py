"""A file another process holds locked: a pass of the store thread waits for it once.

A second process (a real one, holding ``BEGIN IMMEDIATE``) keeps the write
lock while the store thread takes a pass of queued operations. The pass
waits ``busy_timeout`` once; every operation left in it then fails at once
with ``StoreUnavailable``. Nothing here is timed: SQLite's trace callback
counts the statements the store thread sent while the file was locked, each
of which would have waited ``busy_timeout`` for the lock.
"""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

from guardrails.store import AuditRow, SQLiteStore, StoreUnavailable, offloop
from guardrails.store.offloop import OffLoop, off_loop
from guardrails.store.steps import aperform, arun
from tests.store._passes import counted, one_pass

_LOCKER = """
import sqlite3, sys
conn = sqlite3.connect(sys.argv[1], isolation_level=None)
conn.execute("BEGIN IMMEDIATE")
print("locked", flush=True)
sys.stdin.readline()
conn.execute("ROLLBACK")
"""


@contextmanager
def locked_by_another_process(path: Path) -> Iterator[None]:
    """``path``'s write lock held by a second Python process until the block ends."""
    with subprocess.Popen(
        [sys.executable, "-c", _LOCKER, str(path)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    ) as locker:
        assert locker.stdin is not None and locker.stdout is not None
        try:
            assert locker.stdout.readline() == "locked\n"
            yield
        finally:
            locker.stdin.write("\n")
            locker.stdin.flush()
            assert locker.wait(timeout=30) == 0


class Traced:
    """The statements the store's connections sent to SQLite, from when it is made."""

    def __init__(self, store: SQLiteStore) -> None:
        self.statements: list[str] = []
        for conn in store._connections:
            conn.set_trace_callback(self.statements.append)

    def lock_attempts(self) -> list[str]:
        """Statements that need the write lock: each waits ``busy_timeout`` for it."""
        return [s for s in self.statements if not s.startswith(("SELECT", "ROLLBACK"))]


def _jobs(store: SQLiteStore, runner: OffLoop, guard_first: bool) -> list[Any]:
    def guard_writing_the_store() -> int:  # runs outside the pass's transaction
        return store.incr("guard")

    # Built in the order they are to be queued: ``offloop.append``,
    # ``aperform`` and ``runner.run`` queue their job when called.
    reservations = [
        arun(store, "reserve_leased", f"k{i}", f"h{i}", 1, 10, 0.0, 9e9) for i in range(8)
    ]
    if guard_first:
        guard = runner.run(guard_writing_the_store)
    rows = [
        offloop.append(store, AuditRow("tool_call", float(i), call_id=f"c{i}")) for i in range(2)
    ]
    if not guard_first:
        guard = runner.run(guard_writing_the_store)
    rows += [
        offloop.append(store, AuditRow("tool_call", float(i), call_id=f"c{i}")) for i in range(2, 8)
    ]
    counts = [aperform(store, counted()) for _ in range(4)]
    store_work = [*reservations, *rows, *counts]
    return [guard, *store_work] if guard_first else [*store_work[:10], guard, *store_work[10:]]


@pytest.mark.parametrize("guard_first", [False, True], ids=["transaction-first", "guard-first"])
async def test_a_pass_on_a_file_another_process_locks_waits_once_then_fails_every_operation(
    tmp_path: Path, guard_first: bool
) -> None:
    store = SQLiteStore(tmp_path / "a.db", busy_timeout=0.2)
    runner = off_loop(store)
    assert runner is not None
    await arun(store, "get", "warm-up")  # the store thread's connection and the tables
    assert len(store._connections) == 1
    traced = Traced(store)
    with locked_by_another_process(tmp_path / "a.db"):
        results = await one_pass(runner, lambda: _jobs(store, runner, guard_first))
        attempts = traced.lock_attempts()
    # One statement met the lock (the pass's BEGIN IMMEDIATE, or the guard's
    # write before it); every other operation of the pass failed without waiting.
    assert len(attempts) == 1, attempts
    assert attempts[0].startswith("INSERT" if guard_first else "BEGIN IMMEDIATE")
    assert results.count("escape") == 4  # the jobs that answer a failure themselves did
    failed = [r for r in results if r != "escape"]
    assert len(failed) == 17 and all(isinstance(r, StoreUnavailable) for r in failed)
    # The next pass, once the lock is free, works: the refusal ended with the pass.
    results = await one_pass(runner, lambda: _jobs(store, runner, guard_first))
    assert results.count("counted") == 4 and [r is True for r in results].count(True) == 8
    assert store.incr("counted", 0) == 4 and store.incr("guard", 0) == 1
    assert [store.budget(f"k{i}") for i in range(8)] == [(0, 1)] * 8
    assert len(store.audit_rows()) == 8
    store.close()


def test_a_grouped_block_on_a_locked_file_waits_once_and_its_thread_works_after_it(
    tmp_path: Path,
) -> None:
    store = SQLiteStore(tmp_path / "a.db", busy_timeout=0.2)
    store.get("warm-up")
    traced = Traced(store)
    with locked_by_another_process(tmp_path / "a.db"):
        with store.grouped():
            for i in range(20):
                with pytest.raises(StoreUnavailable):
                    store.reserve_leased(f"k{i}", "h", 1, 10, 0.0, 9e9)
            with pytest.raises(StoreUnavailable):
                store.append(AuditRow("tool_call", 1.0, call_id="c"))
        assert traced.lock_attempts() == ["BEGIN IMMEDIATE"]
    assert store.reserve_leased("k0", "h", 1, 10, 0.0, 9e9)  # the same thread, after the block
    assert store.budget("k0") == (0, 1) and store.audit_rows() == []
    store.close()


def test_outside_a_pass_each_operation_meets_the_lock_itself(tmp_path: Path) -> None:
    """A sync caller's operations are not a pass: none fails for another's wait."""
    store = SQLiteStore(tmp_path / "a.db", busy_timeout=0.1)
    store.get("warm-up")
    traced = Traced(store)
    with locked_by_another_process(tmp_path / "a.db"):
        for i in range(3):
            with pytest.raises(StoreUnavailable):
                store.incr(f"k{i}")
    assert len(traced.lock_attempts()) == 3
    assert store.incr("k0") == 1
    store.close()
