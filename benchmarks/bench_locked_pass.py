"""One pass of the SQLite store thread against a file another process holds locked.

A second process holds ``BEGIN IMMEDIATE`` on the file. ``OPS`` operations
(leased reservations, audit rows, counters: what concurrent ``acall``s
queue) are queued while the store thread is held, so that they make one
pass; then the pass runs against the locked file. Printed per round: the
statements the store thread sent that met the lock (each waits up to
``busy_timeout``: counted with SQLite's trace callback, so the figure does
not depend on the machine's load), how many callers were answered with
``StoreUnavailable``, and the wall time until every caller was answered.

Only public names and the store's connection list are used, so the same
file measures an older tree::

    (cd "$tree/benchmarks" && PYTHONPATH="$tree" python bench_locked_pass.py)
"""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

from guardrails.store import AuditRow, SQLiteStore, StoreUnavailable, offloop
from guardrails.store.offloop import off_loop
from guardrails.store.steps import arun

OPS = int(os.environ.get("OPS", "64"))
BUSY = float(os.environ.get("BUSY", "0.05"))
ROUNDS = int(os.environ.get("ROUNDS", "3"))
_LOCKER = """
import sqlite3, sys
conn = sqlite3.connect(sys.argv[1], isolation_level=None)
conn.execute("BEGIN IMMEDIATE")
print("locked", flush=True)
sys.stdin.readline()
conn.execute("ROLLBACK")
"""


def _jobs(store: SQLiteStore, round_: int) -> list[Any]:
    jobs: list[Any] = []
    for i in range(OPS):
        kind = i % 3
        if kind == 0:
            jobs.append(arun(store, "reserve_leased", f"k{i}", f"h{round_}", 1, 10**6, 0.0, 9e9))
        elif kind == 1:
            jobs.append(offloop.append(store, AuditRow("tool_call", 1.0, call_id=f"c{i}")))
        else:
            jobs.append(arun(store, "incr", f"n{i}"))
    return jobs


async def _round(store: SQLiteStore, round_: int) -> tuple[int, int, float]:
    runner = off_loop(store)
    assert runner is not None
    started, gate = threading.Event(), threading.Event()

    def hold() -> None:
        started.set()
        gate.wait()

    held = asyncio.ensure_future(runner.run(hold))
    while not started.is_set():
        await asyncio.sleep(0.001)
    tasks = [asyncio.ensure_future(job) for job in _jobs(store, round_)]
    while len(runner._queue) < OPS:
        await asyncio.sleep(0.001)
    statements: list[str] = []
    for conn in store._connections:
        conn.set_trace_callback(statements.append)
    start = time.perf_counter()
    gate.set()
    await held
    results = await asyncio.gather(*tasks, return_exceptions=True)
    seconds = time.perf_counter() - start
    for conn in store._connections:
        conn.set_trace_callback(None)
    attempts = [s for s in statements if not s.startswith(("SELECT", "ROLLBACK"))]
    failed = sum(isinstance(r, StoreUnavailable) for r in results)
    return len(attempts), failed, seconds


def main() -> None:
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "locked.db"
        store = SQLiteStore(path, busy_timeout=BUSY)
        asyncio.run(arun(store, "get", "warm-up"))  # the store thread's connection, the tables
        with subprocess.Popen(
            [sys.executable, "-c", _LOCKER, str(path)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        ) as locker:
            assert locker.stdin is not None and locker.stdout is not None
            assert locker.stdout.readline() == "locked\n"
            for round_ in range(ROUNDS):
                attempts, failed, seconds = asyncio.run(_round(store, round_))
                print(
                    f"locked_pass ops={OPS} busy_timeout={BUSY} attempts={attempts} "
                    f"failed={failed} seconds={seconds:.3f}",
                    flush=True,
                )
            locker.stdin.write("\n")
            locker.stdin.flush()
        store.close()


if __name__ == "__main__":
    main()
