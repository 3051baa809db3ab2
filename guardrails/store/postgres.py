"""The shared store: PostgreSQL through psycopg 3 and a connection pool.

For many processes or machines. Every method is one statement or one short
transaction; read-modify-write paths rely on row locks (``UPDATE ... WHERE``
re-checks its condition after waiting for the lock) or an advisory lock.
Install with ``pip install 'guardrails-kit[postgres]'``.

``group_commit=True`` sends audit appends from many threads of one process
through one writer that commits them together; each caller still waits until
its row is committed, so a returned call always has its row.
"""

from __future__ import annotations

import json
import os
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from ._base import (
    AUDIT_COLUMNS,
    AuditRow,
    Claim,
    Snapshot,
    StoreUnavailable,
    check_filters,
    row_from,
)
from ._chain import GENESIS, content, link
from ._group_commit import Batcher
from ._pg_migrate import migrate as _migrate
from ._storable import storable

__all__ = ["PostgresStore"]

_COLUMNS = ", ".join(AUDIT_COLUMNS)
# The server-side function of migration 2 locks the chain head, hashes the
# rows (sha256 of "previous|id|content", as ``_chain.link``), inserts them and
# moves the head: one statement, so the lock is held for the shortest time.
_APPEND_MANY = "SELECT guardrails_audit_append(%s, %s::jsonb)"
# One row: the same in one plain statement, cheaper than the function call.
# The UPDATE takes the head's row lock; one that waited re-reads the head its
# predecessor committed (EvalPlanQual), so the chain stays one. The client
# sends the hash it computed after the head it last saw: when that head is
# still the head, the hash goes in as sent; otherwise the server hashes after
# the head it locked (hashing in SQL costs more than the row's insert).
_APPEND = (
    "WITH head AS (UPDATE guardrails_audit_head SET id = id + 1, hash = CASE "
    "WHEN id = %s::bigint AND hash = %s THEN %s ELSE encode(sha256(convert_to("
    "hash || '|' || (id + 1)::text || '|' || %s, 'UTF8')), 'hex') END "
    "RETURNING id, hash) "
    f"INSERT INTO guardrails_audit (id, {_COLUMNS}, hash) "
    f"SELECT head.id, {', '.join('%s' for _ in AUDIT_COLUMNS)}, head.hash FROM head "
    "RETURNING id, hash"
)
_SELECT = f"SELECT id, {_COLUMNS} FROM guardrails_audit"
_SELECT_CHAIN = f"SELECT id, {_COLUMNS}, hash FROM guardrails_audit"
_CHUNK = 1000  # rows per call of the append function


def _payload(rows: list[AuditRow]) -> tuple[list[str], str]:
    """The function's two arguments: each row's canonical content, and the rows as JSON."""
    return [content(r) for r in rows], json.dumps(
        [dict(zip(AUDIT_COLUMNS, r, strict=False)) for r in rows]
    )


class PostgresStore:
    """A store in one PostgreSQL database, reached through a psycopg connection pool."""

    def __init__(
        self,
        dsn: str,
        *,
        min_size: int = 1,
        max_size: int = 8,
        timeout: float = 5.0,
        connect_timeout: int = 3,
        group_commit: bool = False,
    ) -> None:
        try:
            import psycopg
            import psycopg_pool
        except ImportError as exc:  # pragma: no cover - depends on the install
            raise ImportError(
                "PostgresStore needs psycopg 3: pip install 'guardrails-kit[postgres]'"
            ) from exc
        self.dsn = dsn
        self._psycopg = psycopg
        self._pool_cls = psycopg_pool.ConnectionPool
        # A value the driver cannot encode (a lone surrogate in a key) counts as a
        # refused write too.
        self._errors: tuple[type[BaseException], ...] = (
            psycopg.Error,
            psycopg_pool.PoolTimeout,
            UnicodeEncodeError,
        )
        self._options: dict[str, Any] = {
            "min_size": min_size,
            "max_size": max_size,
            "timeout": timeout,
            "kwargs": {"autocommit": True, "connect_timeout": connect_timeout},
        }
        self._pool: Any = None
        self._pid = 0
        self._lock = threading.Lock()
        self._migrated = False
        self._migrating = threading.Lock()
        self._batcher = Batcher(self) if group_commit else None
        # The (id, hash) of the chain head after this store's last append: a
        # hint the append statement checks against the head it locks.
        self._head: tuple[int, str] = (0, GENESIS)
        # Async callers' operations run on this many threads (``offloop``).
        self.off_loop_threads = min(4, max_size)

    # -- connections ----------------------------------------------------------

    def _get_pool(self) -> Any:
        pool = self._pool
        if pool is not None and self._migrated and self._pid == os.getpid():
            return pool
        with self._lock:
            if self._pool is None or self._pid != os.getpid():
                # After a fork the parent's pool is not ours: open a new one.
                pool = self._pool_cls(
                    self.dsn,
                    open=False,
                    name="guardrails",
                    **self._options,
                )
                pool.open(wait=False)
                self._pool, self._pid = pool, os.getpid()
            pool = self._pool
        if not self._migrated:
            with self._migrating:  # one thread migrates; the others wait for it
                if not self._migrated:
                    with pool.connection() as conn:
                        _migrate(conn)
                    self._migrated = True
        return pool

    def _unavailable(self, exc: BaseException) -> StoreUnavailable:
        if isinstance(exc, self._psycopg.OperationalError):
            # The server went away. A pool left alone backs off for ever longer
            # between reconnection attempts; a fresh pool connects at once when
            # the server is back.
            with self._lock:
                pool, self._pool = self._pool, None
            if pool is not None and self._pid == os.getpid():
                pool.close(timeout=0)
        return StoreUnavailable(f"PostgreSQL store: {type(exc).__name__}")

    def _run(self, sql: str, params: tuple[Any, ...] = (), *, fetch: bool = False) -> Any:
        # getconn/putconn rather than pool.connection(): the connections are in
        # autocommit, so the context manager's commit on exit is work for nothing.
        try:
            pool = self._get_pool()
            conn = pool.getconn()
            try:
                cursor = conn.execute(sql, params)
                return cursor.fetchall() if fetch else cursor.rowcount
            finally:
                pool.putconn(conn)
        except self._errors as exc:
            raise self._unavailable(exc) from exc

    def _one(self, sql: str, params: tuple[Any, ...]) -> Any:
        rows = self._run(sql, params, fetch=True)
        return rows[0] if rows else None

    @contextmanager
    def _transaction(self) -> Iterator[Any]:
        try:
            with self._get_pool().connection() as conn, conn.transaction():
                yield conn
        except self._errors as exc:
            raise self._unavailable(exc) from exc

    def migrate(self) -> None:
        """Apply the schema migrations now (as the owner role, in a two-role set-up)."""
        try:
            self._get_pool()
        except self._errors as exc:
            raise self._unavailable(exc) from exc

    # -- audit ------------------------------------------------------------------

    def append(self, row: AuditRow, /) -> int:
        if self._batcher is not None:
            self._batcher.submit(row)
            return 0
        row = storable(row)
        text = content(row)
        last, previous = self._head
        digest = link(previous, last + 1, text)
        found = self._one(_APPEND, (last, previous, digest, text, *row.values()))
        self._head = (int(found[0]), found[1])
        return int(found[0])

    def append_many(self, rows: list[AuditRow], /) -> None:
        ready = [storable(r) for r in rows]
        for start in range(0, len(ready), _CHUNK):
            self._run(_APPEND_MANY, _payload(ready[start : start + _CHUNK]))

    def audit_chain(
        self, *, after_id: int = 0, limit: int = 1000
    ) -> list[tuple[AuditRow, str | None]]:
        sql = f"{_SELECT_CHAIN} WHERE id > %s ORDER BY id LIMIT %s"
        rows = self._run(sql, (after_id, limit), fetch=True)
        return [(row_from(tuple(r)), r[-1]) for r in rows]

    def audit_rows(self, *, after_id: int = 0, limit: int = 1000, **filters: str) -> list[AuditRow]:
        check_filters(filters)
        where = " AND ".join(["id > %s", *(f"{k} = %s" for k in filters)])
        sql = f"{_SELECT} WHERE {where} ORDER BY id LIMIT %s"
        rows = self._run(sql, (after_id, *filters.values(), limit), fetch=True)
        return [row_from(tuple(r)) for r in rows]

    # -- counters and budgets -----------------------------------------------------

    def incr(self, key: str, by: int = 1, /) -> int:
        row = self._one(
            "INSERT INTO guardrails_counters AS c (key, value) VALUES (%s, %s) "
            "ON CONFLICT (key) DO UPDATE SET value = c.value + excluded.value RETURNING value",
            (key, by),
        )
        return int(row[0])

    def reserve(self, key: str, amount: int, cap: int, /) -> bool:
        # Create the row, then one conditional UPDATE: it takes the row lock and
        # re-checks its WHERE against the locked row, so reservations queue.
        self._run("INSERT INTO guardrails_budgets (key) VALUES (%s) ON CONFLICT DO NOTHING", (key,))
        row = self._one(
            "UPDATE guardrails_budgets SET reserved = reserved + %s "
            "WHERE key = %s AND spent + reserved < %s AND spent + reserved + %s <= %s "
            "RETURNING 1",
            (amount, key, cap, amount, cap),
        )
        return row is not None

    def settle(self, key: str, reserved: int, actual: int, /) -> int:
        row = self._one(
            "INSERT INTO guardrails_budgets AS b (key, spent, reserved) VALUES (%s, %s, %s) "
            "ON CONFLICT (key) DO UPDATE SET reserved = b.reserved - %s, spent = b.spent + %s "
            "RETURNING spent",
            (key, actual, -reserved, reserved, actual),
        )
        return int(row[0])

    def budget(self, key: str, /) -> tuple[int, int]:
        row = self._one("SELECT spent, reserved FROM guardrails_budgets WHERE key = %s", (key,))
        return (0, 0) if row is None else (int(row[0]), int(row[1]))

    def reserve_leased(
        self, key: str, holder: str, amount: int, cap: int, now: float, until: float, /
    ) -> bool:
        with self._transaction() as conn:
            conn.execute(
                "INSERT INTO guardrails_budgets (key) VALUES (%s) ON CONFLICT DO NOTHING", (key,)
            )
            # Give back what expired leases held; the UPDATE locks the budget row.
            conn.execute(
                "WITH gone AS (DELETE FROM guardrails_leases WHERE key = %s AND expires_at <= %s "
                "RETURNING amount) UPDATE guardrails_budgets SET reserved = reserved - "
                "(SELECT COALESCE(SUM(amount), 0) FROM gone) WHERE key = %s",
                (key, now, key),
            )
            admitted = conn.execute(
                "UPDATE guardrails_budgets SET reserved = reserved + %s "
                "WHERE key = %s AND spent + reserved < %s AND spent + reserved + %s <= %s "
                "RETURNING 1",
                (amount, key, cap, amount, cap),
            ).fetchone()
            if admitted is None:
                return False
            conn.execute(
                "INSERT INTO guardrails_leases AS l (key, holder, amount, expires_at) "
                "VALUES (%s, %s, %s, %s) ON CONFLICT (key, holder) DO UPDATE SET "
                "amount = l.amount + excluded.amount, expires_at = excluded.expires_at",
                (key, holder, amount, until),
            )
            return True

    def renew_leases(self, holder: str, until: float, /) -> int:
        count = self._run(
            "UPDATE guardrails_leases SET expires_at = %s WHERE holder = %s", (until, holder)
        )
        return int(count)

    def settle_leased(self, key: str, holder: str, actual: int, /) -> int:
        row = self._one(
            "WITH held AS (DELETE FROM guardrails_leases WHERE key = %s AND holder = %s "
            "RETURNING amount) "
            "INSERT INTO guardrails_budgets AS b (key, spent, reserved) "
            "VALUES (%s, %s, -(SELECT COALESCE(SUM(amount), 0) FROM held)) "
            "ON CONFLICT (key) DO UPDATE SET spent = b.spent + excluded.spent, "
            "reserved = b.reserved + excluded.reserved RETURNING spent",
            (key, holder, key, actual),
        )
        return int(row[0])

    # -- key/value with compare-and-set ---------------------------------------------

    def get(self, key: str, /) -> str | None:
        row = self._one("SELECT value FROM guardrails_kv WHERE key = %s", (key,))
        return None if row is None else str(row[0])

    def compare_and_set(self, key: str, expected: str | None, new: str, /) -> bool:
        if expected is None:
            count = self._run(
                "INSERT INTO guardrails_kv (key, value) VALUES (%s, %s) ON CONFLICT DO NOTHING",
                (key, new),
            )
        else:
            count = self._run(
                "UPDATE guardrails_kv SET value = %s WHERE key = %s AND value = %s",
                (new, key, expected),
            )
        return bool(count == 1)

    # -- idempotency ------------------------------------------------------------------

    def claim(self, key: str, owner: str, now: float, lease_until: float, /) -> Claim:
        # Take the key when it is absent or expired; otherwise report what is there.
        taken = self._one(
            "INSERT INTO guardrails_idempotency AS i (key, owner, state, result, expires_at) "
            "VALUES (%s, %s, 'pending', NULL, %s) "
            "ON CONFLICT (key) DO UPDATE SET owner = excluded.owner, state = 'pending', "
            "result = NULL, expires_at = excluded.expires_at WHERE i.expires_at <= %s "
            "RETURNING owner",
            (key, owner, lease_until, now),
        )
        if taken is not None:
            return Claim("new")
        row = self._one("SELECT state, result FROM guardrails_idempotency WHERE key = %s", (key,))
        if row is None:  # released between the two statements: try again
            return self.claim(key, owner, now, lease_until)
        return Claim("done", row[1]) if row[0] == "done" else Claim("pending")

    def complete(self, key: str, owner: str, result: str, expires_at: float, /) -> bool:
        count = self._run(
            "UPDATE guardrails_idempotency SET state = 'done', result = %s, expires_at = %s "
            "WHERE key = %s AND owner = %s",
            (result, expires_at, key, owner),
        )
        return bool(count == 1)

    def release(self, key: str, owner: str, /) -> None:
        self._run(
            "DELETE FROM guardrails_idempotency WHERE key = %s AND owner = %s AND state = 'pending'",
            (key, owner),
        )

    # -- snapshots ----------------------------------------------------------------------

    def put_snapshot(self, key: str, data: bytes, at: float, /) -> int:
        try:
            with self._get_pool().connection() as conn, conn.transaction():
                conn.execute("SELECT pg_advisory_xact_lock(hashtext(%s))", (key,))
                row = conn.execute(
                    "INSERT INTO guardrails_snapshots (key, version, at, data) VALUES "
                    "(%s, (SELECT COALESCE(MAX(version), 0) + 1 FROM guardrails_snapshots "
                    "WHERE key = %s), %s, %s) RETURNING version",
                    (key, key, at, bytes(data)),
                ).fetchone()
        except self._errors as exc:
            raise self._unavailable(exc) from exc
        return int(row[0])

    def snapshot(self, key: str, version: int | None = None, /) -> Snapshot | None:
        if version is None:
            row = self._one(
                "SELECT key, version, at, data FROM guardrails_snapshots WHERE key = %s "
                "ORDER BY version DESC LIMIT 1",
                (key,),
            )
        else:
            row = self._one(
                "SELECT key, version, at, data FROM guardrails_snapshots "
                "WHERE key = %s AND version = %s",
                (key, version),
            )
        return None if row is None else Snapshot(row[0], int(row[1]), float(row[2]), bytes(row[3]))

    def close(self) -> None:
        if self._batcher is not None:
            self._batcher.stop()
        with self._lock:
            pool, self._pool = self._pool, None
        if pool is not None and self._pid == os.getpid():
            pool.close()

    def __enter__(self) -> PostgresStore:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()
