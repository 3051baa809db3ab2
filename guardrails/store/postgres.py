"""The shared store: PostgreSQL through psycopg 3 and a connection pool.

For many processes or machines. Every method is one statement or one short
transaction; read-modify-write paths rely on row locks (``UPDATE ... WHERE``
re-checks its condition after waiting for the lock) or an advisory lock.
Install with ``pip install 'guardrails-kit[postgres]'``.

The statements and what is decided from their answers live in ``_pg_sql``;
this module drives them on sync connections. ``async_pool=True`` adds
``async_path()``: the same operations on async connections, awaited on the
caller's event loop (``_pg_async``), which ``offloop`` and the effects use
for async callers instead of the store threads.

``group_commit=True`` sends audit appends from many threads of one process
through one ``Batcher`` that commits them together; each caller still waits
until its row is committed, so a returned call always has its row.

Connections taken from the pool stay out of it between calls, each with one
cursor, on a list of idle ones that every thread of the store (and the group
commit's writer) takes from, the most recently used first: taking a
connection from the pool and giving it back cost about as much client time
as the statement it served. No thread owns one while it does nothing. A
thread finds none idle only when all that are out are busy; it then waits in
the pool's ``getconn`` and is counted, and while one is counted, a connection
whose call ends goes back to the pool, which hands it to the first waiter,
instead of lying idle. A connection whose call failed goes back to the pool
too (it resets it, or replaces a broken one). ``close()`` closes every
connection out of the pool, idle or busy, and the pool. A forked child
leaves its parent's connections alone and opens a pool of its own.
"""

from __future__ import annotations

import asyncio
import os
import threading
import time
import weakref
from collections.abc import Callable, Sequence
from contextlib import suppress
from typing import Any, TypeVar

from . import _pg_sql as sql
from ._base import AuditRow, Claim, Snapshot, StoreUnavailable
from ._group_commit import Batcher
from ._pg_approvals import PostgresApprovals
from ._pg_async import AsyncPath
from ._pg_errors import collided, refused
from ._pg_migrate import migrate as _migrate
from ._pg_sql import START, Head, Result, Sql

# How long a connection may go from idle list to call and back without
# passing through the pool, whose checks (``max_lifetime``, ``max_idle``, the
# reset of a connection left in a transaction) run when it is given back.
ROUND_TRIP_TO_POOL = 30.0

__all__ = ["PostgresStore"]

T = TypeVar("T")


class PostgresStore(PostgresApprovals):
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
        async_pool: bool = False,
    ) -> None:
        psycopg, psycopg_pool = _driver()
        self.dsn = dsn
        self._pool_cls = psycopg_pool.ConnectionPool
        # A value the driver cannot encode (a lone surrogate in a key) counts as a
        # refused write too.
        self.errors: tuple[type[BaseException], ...] = (
            psycopg.Error,
            psycopg_pool.PoolTimeout,
            UnicodeEncodeError,
        )
        self.disconnected: type[BaseException] = psycopg.OperationalError
        # ``PoolTimeout`` is an ``OperationalError``: whether it means a busy pool
        # or a lost server is decided by ``_busy``.
        self.timed_out: type[BaseException] = psycopg_pool.PoolTimeout
        self._options: dict[str, Any] = {
            "min_size": min_size,
            "max_size": max_size,
            "timeout": timeout,
            "kwargs": {"autocommit": True, "connect_timeout": connect_timeout},
        }
        self._pool: Any = None
        self._pid = 0
        self._lock = threading.Lock()
        # Connections out of the pool (``_out``), the idle ones among them, last
        # used on top (``_idle``), and how many threads wait in ``getconn``: all
        # under ``_lock``, and all of the process that opened ``_pool``.
        self._out: set[_Conn] = set()
        self._idle: list[_Conn] = []
        self._waiting = 0
        self._migrated = False
        self._migrating = threading.Lock()
        _STORES.add(self)
        # The group commit of this store's audit rows: of sync callers when
        # ``group_commit``, and always of the rows ``offloop`` writes.
        self.batcher = Batcher(self._write_rows)
        self._group_commit = group_commit
        # The chain head after this store's last append: a hint the append
        # checks against the head it locks (kept by both paths: the sync one
        # and the async one).
        self._head: Head = START
        self._async: AsyncPath | None = None
        if async_pool:
            self._async = AsyncPath(self, self._options)
        # Async callers' operations run on this many threads (``offloop``) when the
        # store has no async path: one for the store work, the rest for the guards
        # that read the store.
        self.off_loop_threads = min(4, max_size)

    def _forked(self) -> None:
        """In a forked child, which has one thread: the locks may have been held by
        threads that are not here, and the connections are the parent's, not ours
        to use or close (the pool is replaced on first use: ``_pid``)."""
        self._lock, self._migrating = threading.Lock(), threading.Lock()
        self._out, self._idle, self._waiting = set(), [], 0

    def async_path(self) -> AsyncPath | None:
        """The async path (``async_pool=True``), or None: async callers use the store threads."""
        return self._async

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

    def unavailable(self, exc: BaseException) -> StoreUnavailable:
        """The ``StoreUnavailable`` of a backend failure ``exc`` (a lost server resets the pool)."""
        if isinstance(exc, self.disconnected) and not self._busy(exc):
            # The server went away. A pool left alone backs off for ever longer
            # between reconnection attempts; a fresh pool connects at once when
            # the server is back.
            with self._lock:
                pool, self._pool = self._pool, None
            if pool is not None and self._pid == os.getpid():
                pool.close(timeout=0)
        return refused(exc)

    def _busy(self, exc: BaseException) -> bool:
        """Whether ``exc`` is a pool timeout while every connection the pool may open is out.

        Then calls hold them all: the one that waited fails, and the pool, with the
        calls running on it, stays. A timeout with a connection left to open means
        the pool cannot reach the server; kept, its reconnection attempts, ever
        further apart, would leave the store unavailable long after the server is
        back, so it is reset like a lost connection.
        """
        if not isinstance(exc, self.timed_out):
            return False
        with self._lock:
            pool = self._pool
            out = sum(1 for conn in self._out if conn.pool is pool)
        return pool is not None and out >= self._options["max_size"]

    def _drive(self, steps: sql.Steps[T]) -> T:
        """Run an operation's statements on the idle connection used last, else on one from
        the pool; then keep it idle for the next call, unless a thread waits for the pool:
        the pool hands it over. The idle ones are at most those out of the pool
        (``max_size``): none lies idle while a thread waits, so a lower bound would only
        add checkouts."""
        statement = sql.first(steps)  # its checks, before a connection is asked for
        try:
            pool = self._get_pool()
            with self._lock:
                conn = self._idle.pop() if self._idle else None
            if conn is None or conn.pool is not pool:
                conn = self._take(pool, conn)
            try:
                found = sql.drive(steps, statement, conn.execute)
            except BaseException:
                self._give_back(conn)  # the pool resets it, or replaces it if it is broken
                raise
            fresh = time.monotonic() < conn.due
            with self._lock:
                if fresh and not self._waiting and conn.pool is self._pool:
                    self._idle.append(conn)
                    return found
            self._give_back(conn)
            return found
        except self.errors as exc:
            raise self.unavailable(exc) from exc

    def _take(self, pool: Any, popped: _Conn | None) -> _Conn:
        """An idle connection of ``pool``, else one from ``pool``, waited for as a counted
        waiter (counted when it found none idle, under the same lock), so that a
        connection whose call ends comes to it."""
        while True:
            if popped is not None:
                if popped.pool is pool:
                    return popped
                self._give_back(popped)  # of a pool replaced since (a lost server, close())
            with self._lock:
                if not self._idle:
                    self._waiting += 1
                    break
                popped = self._idle.pop()
        try:
            # getconn/putconn rather than pool.connection(): the connections are in
            # autocommit, so the context manager's commit on exit is work for nothing.
            taken = pool.getconn()
        except BaseException:
            with self._lock:
                self._waiting -= 1
            raise
        # The cursor is made once per connection: one handed round through the
        # pool to a waiting thread comes with it (a new one costs about 8 µs).
        conn = getattr(taken, "_guardrails_conn", None)
        if conn is None:
            conn = taken._guardrails_conn = _Conn(pool, taken)
        conn.due = time.monotonic() + ROUND_TRIP_TO_POOL
        with self._lock:
            self._waiting -= 1
            self._out.add(conn)
        return conn

    def _give_back(self, conn: _Conn) -> None:
        with self._lock:
            self._out.discard(conn)
        with suppress(Exception):  # a closed pool closes it
            conn.pool.putconn(conn.conn)

    def migrate(self) -> None:
        """Apply the schema migrations now (as the owner role, in a two-role set-up)."""
        try:
            self._get_pool()
        except self.errors as exc:
            raise self.unavailable(exc) from exc

    # -- audit ------------------------------------------------------------------

    def append(self, row: AuditRow, /) -> int:
        if self._group_commit:
            self.batcher.submit(row)
            return 0
        return self._append_one(row)

    def _append_one(self, row: AuditRow) -> int:
        # The head this store last wrote is the hint; the head the row got is the next one.
        self._head = found = self._append_steps(sql.append, row)
        return found.id

    def append_many(self, rows: list[AuditRow], /) -> None:
        if rows:
            self._head = self._append_steps(sql.append_many, rows)

    def _append_steps(self, steps: Callable[..., sql.Steps[Head]], rows: Any) -> Head:
        try:
            return self._drive(steps(rows, self._head))
        except StoreUnavailable as exc:
            if not collided(exc):
                raise
        # A row written around the store took the id after the head: the
        # function chains after the newest row instead.
        return self._drive(steps(rows, self._head, around=True))

    def _write_rows(self, rows: list[AuditRow]) -> None:
        # The batcher's writes, one at a time, on an idle connection like any
        # call's; one row in the plain statement, cheaper than the function call.
        if len(rows) == 1:
            self._head = self._append_steps(sql.append, rows[0])
        elif rows:
            self._head = self._append_steps(sql.append_many, rows)

    def audit_chain(
        self, *, after_id: int = 0, limit: int = 1000
    ) -> list[tuple[AuditRow, str | None]]:
        return self._drive(sql.audit_chain(after_id, limit))

    def audit_rows(self, *, after_id: int = 0, limit: int = 1000, **filters: str) -> list[AuditRow]:
        return self._drive(sql.audit_rows(after_id, limit, filters))

    def audit_head(self) -> tuple[int, str] | None:
        """The chain head table's (id, hash): what ``verify`` compares with the
        newest row (not in the ``Store`` protocol: only this store keeps one)."""
        return self._drive(sql.audit_head())

    # -- counters and budgets -----------------------------------------------------

    def incr(self, key: str, by: int = 1, /) -> int:
        return self._drive(sql.incr(key, by))

    def reserve(self, key: str, amount: int, cap: int, /) -> bool:
        return self._drive(sql.reserve(key, amount, cap))

    def settle(self, key: str, reserved: int, actual: int, /) -> int:
        return self._drive(sql.settle(key, reserved, actual))

    def budget(self, key: str, /) -> tuple[int, int]:
        return self._drive(sql.budget(key))

    def reserve_leased(
        self, key: str, holder: str, amount: int, cap: int, now: float, until: float, /
    ) -> bool:
        return self._drive(sql.reserve_leased(key, holder, amount, cap, now, until))

    def renew_leases(self, holder: str, until: float, /) -> int:
        return self._drive(sql.renew_leases(holder, until))

    def renew_leases_of(self, holders: Sequence[str], until: float, /) -> int:
        """``renew_leases`` of each of ``holders``, in one statement; the leases renewed."""
        return self._drive(sql.renew_leases_of(holders, until))

    def settle_leased(self, key: str, holder: str, actual: int, /) -> int:
        return self._drive(sql.settle_leased(key, holder, actual))

    # -- key/value with compare-and-set ---------------------------------------------

    def get(self, key: str, /) -> str | None:
        return self._drive(sql.get(key))

    def compare_and_set(self, key: str, expected: str | None, new: str, /) -> bool:
        return self._drive(sql.compare_and_set(key, expected, new))

    # -- idempotency ------------------------------------------------------------------

    def claim(self, key: str, owner: str, now: float, lease_until: float, /) -> Claim:
        return self._drive(sql.claim(key, owner, now, lease_until))

    def complete(self, key: str, owner: str, result: str, expires_at: float, /) -> bool:
        return self._drive(sql.complete(key, owner, result, expires_at))

    def release(self, key: str, owner: str, /) -> None:
        self._drive(sql.release(key, owner))

    # -- snapshots ----------------------------------------------------------------------

    def put_snapshot(self, key: str, data: bytes, at: float, /) -> int:
        return self._drive(sql.put_snapshot(key, data, at))

    def snapshot(self, key: str, version: int | None = None, /) -> Snapshot | None:
        return self._drive(sql.snapshot(key, version))

    def close(self) -> None:
        """Close the pools and the connections out of them (a call running on one fails:
        ``StoreUnavailable``); the next call opens a new pool."""
        if self._async is not None:
            self._async.close()
        with self._lock:
            pool, self._pool = self._pool, None
            out, self._out, self._idle = self._out, set(), []
            ours = self._pid == os.getpid()  # a forked child's copies are its parent's
        if ours:
            for conn in out:
                conn.conn.close()
            if pool is not None:
                pool.close()

    async def aclose(self) -> None:
        """``close`` for async code: the running loop's async pool is closed before it returns."""
        if self._async is not None:
            await self._async.aclose()
        await asyncio.to_thread(self.close)  # the sync pool's close joins its threads

    def __enter__(self) -> PostgresStore:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()


_STORES: weakref.WeakSet[PostgresStore] = weakref.WeakSet()


def _driver() -> tuple[Any, Any]:
    """psycopg and psycopg_pool, or an ImportError that says which extra to install."""
    try:
        import psycopg
        import psycopg_pool
    except ImportError as exc:  # pragma: no cover - depends on the install
        raise ImportError(
            "PostgresStore needs psycopg 3: pip install 'guardrails-kit[postgres]'"
        ) from exc
    return psycopg, psycopg_pool


def _after_fork() -> None:
    for store in list(_STORES):
        store._forked()


if hasattr(os, "register_at_fork"):  # POSIX: elsewhere nothing forks
    os.register_at_fork(after_in_child=_after_fork)


class _Cursor:
    """Runs what an operation yields: each statement on one cursor, reused."""

    __slots__ = ("cursor",)

    def __init__(self, cursor: Any) -> None:
        self.cursor = cursor

    def __call__(self, item: Sql) -> Result:
        return _result(self.cursor.execute(item.text, item.params))


def _result(cursor: Any) -> Result:
    return Result(cursor.rowcount, cursor.fetchall() if cursor.description is not None else [])


class _Conn:
    """A connection out of the pool, with the cursor its statements run on."""

    __slots__ = ("conn", "due", "execute", "pool")

    def __init__(self, pool: Any, conn: Any) -> None:
        self.pool, self.conn, self.execute = pool, conn, _Cursor(conn.cursor())
        self.due = 0.0  # given back to the pool by then (``ROUND_TRIP_TO_POOL``)
