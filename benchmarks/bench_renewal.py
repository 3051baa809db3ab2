"""The lease renewer's pass: every held lease of a store renewed, one holder at a time
against all at once (``renew_leases_of``), in the same run.

Each holder holds two leases, as a ``PaidCall`` with a daily and an instance
cap does: a daily key they share and an instance key of their own. A round
renews every holder once each way, alternately; the rows give the median
pass and the ratio of the one-by-one pass to the pass all at once.

Run: ``python benchmarks/run.py --only renewal [--quick]``, or
``python benchmarks/bench_renewal.py`` (PostgreSQL too with
``GUARDRAILS_POSTGRES_DSN`` set).
"""

from __future__ import annotations

import os
import shutil
import statistics
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

from _harness import row

from guardrails.store import MemoryStore, PostgresStore, SQLiteStore, Store
from guardrails.store.testing import postgres_dsn, temporary_schema

HOLDERS = 1000


@contextmanager
def _stores() -> Iterator[list[tuple[str, Callable[[], Store]]]]:
    folder = tempfile.mkdtemp(prefix="guardrails-bench-renewal-")
    made: list[tuple[str, Callable[[], Store]]] = [
        ("memory", MemoryStore),
        ("sqlite", lambda: SQLiteStore(os.path.join(folder, "r.db"))),
    ]
    try:
        dsn = postgres_dsn()
        if dsn is None:
            yield made
            return
        with temporary_schema(dsn) as scoped:
            yield [*made, ("postgres", lambda: PostgresStore(scoped))]
    finally:
        shutil.rmtree(folder, ignore_errors=True)


def _passes(store: Any, holders: list[str], rounds: int) -> tuple[list[float], list[float]]:
    """Seconds of each pass, one by one and all at once, ``rounds`` of each alternately."""
    for i, holder in enumerate(holders):
        assert store.reserve_leased("day", holder, 1, 10**12, 0.0, 60.0)
        assert store.reserve_leased(f"instance-{i}", holder, 1, 10**9, 0.0, 60.0)
    one, all_at_once = [], []
    until = 60.0
    for _ in range(rounds):
        until += 1.0
        start = time.perf_counter()
        for holder in holders:
            store.renew_leases(holder, until)
        one.append(time.perf_counter() - start)
        until += 1.0
        start = time.perf_counter()
        renewed = store.renew_leases_of(holders, until)
        all_at_once.append(time.perf_counter() - start)
        if renewed != 2 * len(holders):
            raise RuntimeError(f"renewed {renewed} leases, not {2 * len(holders)}")
    return one, all_at_once


def run(quick: bool = False) -> list[dict[str, Any]]:
    holders = [f"holder-{i}" for i in range(200 if quick else HOLDERS)]
    rounds = 3 if quick else 9
    rows = []
    with _stores() as stores:
        for name, make in stores:
            store = make()
            try:
                one, all_at_once = _passes(store, holders, rounds)
            finally:
                store.close()
            one_ms, all_ms = statistics.median(one) * 1e3, statistics.median(all_at_once) * 1e3
            group = f"renewal.{name}"
            rows.append(
                row(
                    group,
                    f"{len(holders)} holders, 2 leases each, one by one",
                    one_ms * 1e3,
                    pass_ms=round(one_ms, 2),
                )
            )
            rows.append(
                row(
                    group,
                    f"{len(holders)} holders, 2 leases each, all at once (renew_leases_of)",
                    all_ms * 1e3,
                    pass_ms=round(all_ms, 2),
                    ratio=round(one_ms / all_ms, 1),
                )
            )
    return rows


if __name__ == "__main__":
    for found in run(quick=bool(os.environ.get("QUICK"))):
        print(found)
