"""Audit append per call: SQLite and PostgreSQL, against a bare INSERT in the same run.

Groups:

- ``audit.sqlite``: one process, WAL, commit per row. The floor is a bare
  ``INSERT`` of the same row through ``sqlite3``, with the store's pragmas,
  into a table declared as the store's (same columns and types, a 64-character
  hash included, no triggers); the same ``INSERT`` with the row's NULL columns
  written in the statement as the store's append writes them (not the floor:
  Python's ``sqlite3`` binds a ``None`` parameter through its adapter lookup,
  which the floor pays and the store no longer does); then
  ``SQLiteStore.append``, alone and with a
  second store on the same file taking turns (every append finds the chain
  head moved); then a whole guarded call of a read-only tool without
  ``AuditLog``, with it over a store that keeps nothing (the hooks and the row
  alone: the floor of an audited call, less its append), and with it over
  ``SQLiteStore``.
- ``audit.postgres``: the same in one process against PostgreSQL (commit per
  row), when ``GUARDRAILS_POSTGRES_DSN`` is set.
- ``audit.postgres.statement``: what the server spends on each statement
  (``EXPLAIN ANALYZE``, so neither the round trip nor the commit): a bare
  ``INSERT`` against the append statement when the store's hint of the chain
  head holds (the client's hash goes in, nothing comes back), the statement
  a store whose hint fell behind uses (the previous release's single-row
  append) with the hint holding and with the head moved (the server hashes
  in SQL), and the function of many rows with the client's hashes, per row.
- ``audit.postgres.workers``: rows per second in total with 8 workers: bare
  ``INSERT`` per row, ``PostgresStore.append`` per row (8 processes), and
  grouped commits (``group_commit=True``: 8 processes of 8 threads each, one
  writer per process committing the rows its threads queued), and
  ``append_many`` of 100 rows per commit (8 processes).
- ``audit.postgres.threads``: calls per second in total from 40 threads of
  one process on one store of ``max_size=4`` (a server's thread pool larger
  than its store's pool): ``incr`` of each thread's own counter, and
  ``append``; then 36 threads while 4 more, which made one call each
  first, sit idle (request threads between requests); with the fewest calls
  any busy thread got through and the calls that failed (a pool timeout is
  ``StoreUnavailable``).
- ``audit.chain``: ``guardrails audit verify`` over a SQLite file, per row;
  a hostile row (surrogate, NUL, object reason) through ``SQLiteStore.append``;
  ``WithDeadline`` around ``SQLiteStore.append`` (the thread hand-off); and
  the Python pieces of every append: the storable check, the chain's content
  text and the hash, and the three at once as appends run them (``sealed``:
  one pass of the compiled core for a row that is storable already).

Every store append makes the row storable and extends the hash chain inside
its write transaction.

Run: ``python benchmarks/run.py --only audit [--quick]``.
"""

from __future__ import annotations

import itertools
import multiprocessing
import os
import shutil
import sqlite3
import statistics
import tempfile
import threading
import time
from typing import Any

from _harness import compare, row

from guardrails import Guardrails, tool
from guardrails.audit import AuditLog
from guardrails.store import (
    AUDIT_COLUMNS,
    AuditRow,
    PostgresStore,
    SQLiteStore,
    Store,
    StoreUnavailable,
    WithDeadline,
)
from guardrails.store import _chain as _chain_module
from guardrails.store._chain import content, link
from guardrails.store._storable import storable
from guardrails.store.testing import postgres_dsn, temporary_schema
from guardrails.store.verify import verify

WORKERS = 8
_ROW = AuditRow(
    "tool_call", 1.0, "gr_0001", "acme", "session-1", "agent", "wf-1", "lookup", "ok", "pass",
    None, '[{"guard":"g","verdict":"pass"}]', None, 42,
)  # fmt: skip
_VALUES = _ROW.values()


@tool
def lookup(order_id: str) -> str:
    return order_id


class _Discard:
    """A store whose append keeps nothing: what the hooks and the row cost alone."""

    def append(self, row: AuditRow, /) -> int:
        return 0


def _calls(store: Store | _Discard | None) -> Any:
    if store is None:
        rails = Guardrails([lookup])
    else:
        audit = AuditLog(store)  # type: ignore[arg-type]
        rails = Guardrails([lookup], hooks=[audit], recorder=[audit])
    turn = rails.turn(tenant="acme", session="s-1")
    args = {"order_id": "o-1"}

    def call() -> Any:
        turn.results.clear()
        return turn.call("lookup", args)

    return call


# What a bare INSERT writes: the store's row and a hash of the same width.
_HASH = "0" * 64
_TEXT = content(_ROW)


def _bare_sqlite(path: str, like: SQLiteStore) -> tuple[sqlite3.Connection, str]:
    """A connection with the store's pragmas and a table declared as the store's
    audit table (same columns and types, the hash column included), without its
    triggers, and the plain INSERT of one row into it."""
    like.audit_rows(limit=1)  # the store's schema exists
    with sqlite3.connect(like.path) as source:
        (ddl,) = source.execute(
            "SELECT sql FROM sqlite_master WHERE type = 'table' AND name = 'guardrails_audit'"
        ).fetchone()
    source.close()
    bare = sqlite3.connect(path, isolation_level=None)
    bare.execute("PRAGMA journal_mode = WAL")
    bare.execute(f"PRAGMA synchronous = {like.synchronous}")
    bare.execute(f"PRAGMA busy_timeout = {int(like.busy_timeout * 1000)}")
    bare.execute(ddl.replace("guardrails_audit", "bare_audit", 1))
    columns = (*AUDIT_COLUMNS, "hash")
    insert = (
        f"INSERT INTO bare_audit ({', '.join(columns)}) VALUES ({', '.join('?' * len(columns))})"
    )
    return bare, insert


def _nulls_in_statement(insert: str, values: tuple[Any, ...]) -> tuple[str, tuple[Any, ...]]:
    """``insert`` with ``NULL`` written where ``values`` has None, and the other values."""
    head, marks = insert.rsplit("VALUES (", 1)
    written = ", ".join("NULL" if v is None else "?" for v in values)
    assert marks.count("?") == len(values)
    return f"{head}VALUES ({written})", tuple(v for v in values if v is not None)


def _sqlite(quick: bool) -> list[dict[str, Any]]:
    folder = tempfile.mkdtemp(prefix="guardrails-bench-")
    try:
        store = SQLiteStore(os.path.join(folder, "store.db"))
        bare, insert = _bare_sqlite(os.path.join(folder, "bare.db"), store)
        call_store = SQLiteStore(os.path.join(folder, "calls.db"))
        # Two stores on one file, taking turns: every append finds the head moved.
        shared = os.path.join(folder, "shared.db")
        turns = itertools.cycle([SQLiteStore(shared), SQLiteStore(shared)])
        bare_values = (*_VALUES, _HASH)
        nulls_in_sql, kept_values = _nulls_in_statement(insert, bare_values)
        cases = {
            "bare INSERT (WAL, commit per row)": lambda: bare.execute(insert, bare_values),
            "bare INSERT, NULL columns in the statement": lambda: bare.execute(
                nulls_in_sql, kept_values
            ),
            "SQLiteStore.append": lambda: store.append(_ROW),
            "SQLiteStore.append, head moved by another writer": lambda: next(turns).append(_ROW),
            "guarded call, no audit": _calls(None),
            "guarded call + AuditLog, a store that keeps nothing": _calls(_Discard()),
            "guarded call + AuditLog (audited call)": _calls(call_store),
        }
        rows = compare(
            "audit.sqlite", cases, floor="bare INSERT (WAL, commit per row)", quick=quick
        )
        bare.close()
        for s in (store, call_store, next(turns), next(turns)):
            s.close()
        return rows
    finally:
        shutil.rmtree(folder, ignore_errors=True)


# The floor's table on PostgreSQL: the store's columns, types and primary key,
# ids from an identity column, no triggers.
_BARE_TABLE = (
    "CREATE TABLE bare_audit (LIKE guardrails_audit INCLUDING ALL); "
    "ALTER TABLE bare_audit ALTER COLUMN id ADD GENERATED ALWAYS AS IDENTITY"
)


def _postgres(dsn: str, quick: bool) -> list[dict[str, Any]]:
    import psycopg

    store = PostgresStore(dsn, max_size=2)
    store.audit_rows(limit=1)  # the store's schema, whose audit table the floor copies
    bare = psycopg.connect(dsn, autocommit=True)
    bare.execute(_BARE_TABLE)
    columns = (*AUDIT_COLUMNS, "hash")
    insert = (
        f"INSERT INTO bare_audit ({', '.join(columns)}) VALUES ({', '.join(['%s'] * len(columns))})"
    )
    bare_values = (*_VALUES, _HASH)
    cases = {
        "bare INSERT (commit per row)": lambda: bare.execute(insert, bare_values),
        "PostgresStore.append (commit per row)": lambda: store.append(_ROW),
        "guarded call + AuditLog (audited call)": _calls(store),
    }
    rows = compare("audit.postgres", cases, floor="bare INSERT (commit per row)", quick=quick)
    bare.close()
    store.close()
    return rows


def _statements(dsn: str, quick: bool) -> list[dict[str, Any]]:
    """Server time of each statement (``EXPLAIN ANALYZE``: no round trip, no commit)."""
    import psycopg

    from guardrails.store import _pg_sql

    with PostgresStore(dsn, max_size=1) as store:
        store.audit_rows(limit=1)
    conn = psycopg.connect(dsn, autocommit=True)
    conn.execute(_BARE_TABLE.replace("bare_audit", "bare_statement"))
    columns = (*AUDIT_COLUMNS, "hash")
    insert = f"INSERT INTO bare_statement ({', '.join(columns)}) VALUES ({', '.join(['%s'] * len(columns))})"
    head = list(conn.execute("SELECT id, hash FROM guardrails_audit_head").fetchone())

    def first(steps: Any) -> tuple[str, tuple[Any, ...]]:
        statement = next(steps)  # the first statement the store would send
        return statement.text, statement.params

    hint = lambda: _pg_sql.Head(*head)  # noqa: E731
    cases = {
        "bare INSERT": (lambda: (insert, (*_VALUES, _HASH)), 1),
        "append, head as last seen (the client's hash)": (
            lambda: first(_pg_sql.append(_ROW, hint())),
            1,
        ),
        "the same row through the statement for a moved hint, head as last seen "
        "(the previous single-row append)": (
            lambda: first(_pg_sql.append(_ROW, hint()._replace(moved=True))),
            1,
        ),
        "append, head moved (hashed in SQL after the locked head)": (
            lambda: first(_pg_sql.append(_ROW, _pg_sql.Head(-1, "", True))),
            1,
        ),
        "append_many of 8 rows, head as last seen (the client's hashes), per row": (
            lambda: first(_pg_sql.append_many([_ROW] * 8, hint())),
            8,
        ),
    }
    samples: dict[str, list[float]] = {name: [] for name in cases}
    for _ in range(30 if quick else 300):
        for name, (make, rows) in cases.items():
            sql, params = make()
            plan = "\n".join(r[0] for r in conn.execute(f"EXPLAIN ANALYZE {sql}", params))
            took = float(plan.rsplit("Execution Time: ", 1)[1].split()[0]) * 1000
            samples[name].append(took / rows)
            head[:] = conn.execute("SELECT id, hash FROM guardrails_audit_head").fetchone()
    conn.close()
    floor = statistics.median(samples["bare INSERT"])
    return [
        row(
            "audit.postgres.statement",
            name,
            statistics.median(values),
            best_us=min(values),
            ratio=round(statistics.median(values) / floor, 2),
            floor="bare INSERT",
            note="server execution time of the statement alone, per row",
        )
        for name, values in samples.items()
    ]


# -- many workers ---------------------------------------------------------------


def _worker(kind: str, dsn: str, seconds: float, barrier: Any, queue: Any) -> None:
    if kind == "bare":
        import psycopg

        conn = psycopg.connect(dsn, autocommit=True)
        columns = (*AUDIT_COLUMNS, "hash")
        sql = f"INSERT INTO bare_audit ({', '.join(columns)}) VALUES ({', '.join(['%s'] * len(columns))})"

        def append() -> None:
            conn.execute(sql, (*_VALUES, _HASH))

        threads = 1
    elif kind == "many":
        store = PostgresStore(dsn, max_size=2)
        store.audit_rows(limit=1)
        batch = [_ROW] * 100

        def append() -> None:
            store.append_many(batch)

        threads = 1
    else:
        grouped = kind == "grouped"
        store = PostgresStore(dsn, max_size=2, group_commit=grouped)
        store.audit_rows(limit=1)  # connect before the clock starts
        append = lambda: store.append(_ROW)  # noqa: E731
        threads = 8 if grouped else 1
    counts = [0] * threads
    barrier.wait()
    deadline = time.perf_counter() + seconds

    def loop(slot: int) -> None:
        n = 0
        while time.perf_counter() < deadline:
            append()
            n += 1
        counts[slot] = n

    pool = [threading.Thread(target=loop, args=(i,)) for i in range(threads)]
    for t in pool:
        t.start()
    for t in pool:
        t.join()
    queue.put(sum(counts) * (100 if kind == "many" else 1))


def _rows_per_second(kind: str, dsn: str, seconds: float) -> float:
    ctx = multiprocessing.get_context("fork")
    barrier, queue = ctx.Barrier(WORKERS), ctx.Queue()
    procs = [
        ctx.Process(target=_worker, args=(kind, dsn, seconds, barrier, queue))
        for _ in range(WORKERS)
    ]
    for p in procs:
        p.start()
    total = sum(queue.get(timeout=seconds + 60) for _ in procs)
    for p in procs:
        p.join(timeout=30)
    return total / seconds


def _workers(dsn: str, quick: bool) -> list[dict[str, Any]]:
    with PostgresStore(dsn) as store:
        store.audit_rows(limit=1)  # the schema, before the workers start
    import psycopg

    with psycopg.connect(dsn, autocommit=True) as conn:  # the floor's own table, same columns
        conn.execute(_BARE_TABLE)
    seconds, repeats = (0.5, 1) if quick else (2.0, 3)
    names = {
        "bare": "bare INSERT, commit per row (8 processes)",
        "per_row": "PostgresStore.append, commit per row (8 processes)",
        "grouped": "PostgresStore group_commit (8 processes x 8 threads)",
        "many": "PostgresStore.append_many, 100 rows per commit (8 processes)",
    }
    rates = {
        k: statistics.median(_rows_per_second(k, dsn, seconds) for _ in range(repeats))
        for k in names
    }
    floor = rates["bare"]
    return [
        row(
            "audit.postgres.workers",
            names[k],
            1e6 / rate,
            ops_per_s=round(rate),
            ratio=round(floor / rate, 2),
            floor=names["bare"],
            note="median_us is wall time per row across all workers",
        )
        for k, rate in rates.items()
    ]


THREADS, THREADS_POOL = 40, 4


def _thread_calls(dsn: str, kind: str, idle: int, seconds: float) -> tuple[float, int, int]:
    """Calls per second of ``THREADS - idle`` threads on one store while ``idle`` threads
    that used it first do nothing, the fewest calls of one busy thread, and the calls
    that failed."""
    store = PostgresStore(dsn, max_size=THREADS_POOL)
    store.audit_rows(limit=1)  # connect and migrate before the clock starts
    busy = THREADS - idle
    counts, failed = [0] * busy, [0] * busy
    used, start, stop = threading.Barrier(idle + 1), threading.Barrier(busy + 1), threading.Event()

    def sit(slot: int) -> None:
        store.incr(f"idle{slot}")
        used.wait()
        stop.wait()

    def loop(slot: int) -> None:
        call = (lambda: store.incr(f"t{slot}")) if kind == "incr" else (lambda: store.append(_ROW))
        start.wait()
        while time.perf_counter() < deadline:
            try:
                call()
                counts[slot] += 1
            except StoreUnavailable:
                failed[slot] += 1

    sitting = [threading.Thread(target=sit, args=(i,)) for i in range(idle)]
    for t in sitting:
        t.start()
    used.wait()
    threads = [threading.Thread(target=loop, args=(i,)) for i in range(busy)]
    for t in threads:
        t.start()
    deadline = time.perf_counter() + seconds + 0.05
    start.wait()
    for t in threads:
        t.join()
    stop.set()
    for t in sitting:
        t.join()
    store.close()
    return sum(counts) / seconds, min(counts), sum(failed)


def _threads(dsn: str, quick: bool) -> list[dict[str, Any]]:
    seconds, repeats = (0.5, 1) if quick else (2.0, 3)
    rows = []
    for idle in (0, THREADS_POOL):
        for kind in ("incr", "append"):
            what = "incr of its own counter" if kind == "incr" else "append"
            name = f"{what}, {THREADS - idle} threads, max_size={THREADS_POOL}"
            if idle:
                name += f", {idle} more threads idle after one call each"
            runs = sorted(_thread_calls(dsn, kind, idle, seconds) for _ in range(repeats))
            rate, fewest, failed = runs[len(runs) // 2]  # the median run by calls per second
            rows.append(
                row(
                    "audit.postgres.threads",
                    name,
                    1e6 / rate,
                    ops_per_s=round(rate),
                    fewest_calls_of_a_thread=fewest,
                    failed_calls=failed,
                    note="median_us is wall time per call across all busy threads",
                )
            )
    return rows


_HOSTILE = AuditRow(
    "tool_call", 1.0, "gr_\udc80\x00", "acme", "s-1", "agent", "wf-1", "lookup", "ok", "pass",
    object(),  # type: ignore[arg-type]
)  # fmt: skip


def _chain(quick: bool) -> list[dict[str, Any]]:
    folder = tempfile.mkdtemp(prefix="guardrails-bench-")
    try:
        store = SQLiteStore(os.path.join(folder, "chain.db"))
        bounded = WithDeadline(SQLiteStore(os.path.join(folder, "bounded.db")), 5.0)
        hostile = SQLiteStore(os.path.join(folder, "hostile.db"))
        store.append_many([_ROW] * 1000)
        cases = {
            "SQLiteStore.append": lambda: store.append(_ROW),
            "SQLiteStore.append, hostile row (escaped, named)": lambda: hostile.append(_HOSTILE),
            "WithDeadline(SQLiteStore).append": lambda: bounded.append(_ROW),
            "verify, per 1,000 rows": lambda: verify(store, page=1000) and None,
            "piece: storable (an ordinary row)": lambda: storable(_ROW),
            "piece: content (the chain's text of the row)": lambda: content(_ROW),
            "piece: link (sha256 after the previous hash)": lambda: link(_HASH, 1000, _TEXT),
        }
        sealed = getattr(_chain_module, "sealed", None)  # absent before the one-pass chain
        if sealed is not None:
            cases["piece: sealed (the three at once; one C pass where built)"] = lambda: sealed(
                _ROW, _HASH, 1000
            )
        rows = compare("audit.chain", cases, floor="SQLiteStore.append", quick=quick)
        for s in (store, bounded, hostile):
            s.close()
        return rows
    finally:
        shutil.rmtree(folder, ignore_errors=True)


def run(quick: bool = False) -> list[dict[str, Any]]:
    rows = _sqlite(quick)
    rows.extend(_chain(quick))
    dsn = postgres_dsn()
    if dsn is None:
        rows.append(row("audit.postgres", "skipped: GUARDRAILS_POSTGRES_DSN is not set", 0.0))
        return rows
    with temporary_schema(dsn) as scoped:
        rows.extend(_postgres(scoped, quick))
    with temporary_schema(dsn) as scoped:
        rows.extend(_statements(scoped, quick))
    with temporary_schema(dsn) as scoped:
        rows.extend(_workers(scoped, quick))
    with temporary_schema(dsn) as scoped:
        rows.extend(_threads(scoped, quick))
    return rows


if __name__ == "__main__":
    for r in run(quick=True):
        print(r)
