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

A thread keeps the pool connection it took (and one cursor on it) between
calls, and so does the group commit's writer: taking a connection from the
pool and giving it back cost about as much client time as the statement it
served. At most ``max_size - 1`` are kept, so one connection always goes
round the other threads; a kept connection goes back to its pool when its
thread ends, when a call on it fails (the pool replaces a broken one), and
is closed by ``close()``.
"""

from __future__ import annotations

import asyncio
import os
import threading
import weakref
from collections.abc import Callable
from contextlib import suppress
from typing import TYPE_CHECKING, Any, TypeVar

from . import _pg_sql as sql
from ._base import AuditRow, Claim, Snapshot, StoreUnavailable
from ._group_commit import Batcher
from ._pg_migrate import migrate as _migrate
from ._pg_sql import START, Batch, Head, Result, Sql

if TYPE_CHECKING:
    from ._pg_async import AsyncPath

__all__ = ["PostgresStore"]

T = TypeVar("T")


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
        async_pool: bool = False,
    ) -> None:
        try:
            import psycopg
            import psycopg_pool
        except ImportError as exc:  # pragma: no cover - depends on the install
            raise ImportError(
                "PostgresStore needs psycopg 3: pip install 'guardrails-kit[postgres]'"
            ) from exc
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
        self._options: dict[str, Any] = {
            "min_size": min_size,
            "max_size": max_size,
            "timeout": timeout,
            "kwargs": {"autocommit": True, "connect_timeout": connect_timeout},
        }
        self._pool: Any = None
        self._pid = 0
        self._lock = threading.Lock()
        self._local = _Local()
        self._writer = _Keeper()
        self._held: weakref.WeakSet[_Held] = weakref.WeakSet()
        self._migrated = False
        self._migrating = threading.Lock()
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
            from ._pg_async import AsyncPath

            self._async = AsyncPath(self, self._options)
        # Async callers' operations run on this many threads (``offloop``)
        # when the store has no async path.
        self.off_loop_threads = min(4, max_size)

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
        if isinstance(exc, self.disconnected):
            # The server went away. A pool left alone backs off for ever longer
            # between reconnection attempts; a fresh pool connects at once when
            # the server is back.
            with self._lock:
                pool, self._pool = self._pool, None
            if pool is not None and self._pid == os.getpid():
                pool.close(timeout=0)
        return refused(exc)

    def _drive(self, steps: sql.Steps[T], keeper: _Keeper | None = None) -> T:
        """Run an operation's statements on the connection the thread (or ``keeper``) keeps,
        else on one taken from the pool for this call."""
        keeper = self._local if keeper is None else keeper
        try:
            pool = self._get_pool()
            held = keeper.held
            if held is None or held.pool is not pool:  # a fork opens a new pool too
                held = keeper.held = self._keep(pool, held)
            if held is None:
                # getconn/putconn rather than pool.connection(): the connections are in
                # autocommit, so the context manager's commit on exit is work for nothing.
                conn = pool.getconn()
                try:
                    return sql.drive(steps, _Cursor(conn.cursor()))
                finally:
                    pool.putconn(conn)
            try:
                return sql.drive(steps, held.execute)
            except BaseException:
                keeper.held = None
                held.give_back()  # the pool resets it, or replaces it if it is broken
                raise
        except self.errors as exc:
            raise self.unavailable(exc) from exc

    def _keep(self, pool: Any, old: _Held | None) -> _Held | None:
        """A connection of ``pool`` to keep, unless ``max_size - 1`` are kept already."""
        if old is not None:  # of a pool replaced since (a fork, a lost server, close())
            old.give_back()
        pid = os.getpid()
        with self._lock:
            if sum(h.pid == pid for h in self._held) >= self._options["max_size"] - 1:
                return None
            held = _Held(pool)
            self._held.add(held)
        try:
            held.take()
        except BaseException:
            self._held.discard(held)
            raise
        return held

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

    def _append_steps(
        self, steps: Callable[..., sql.Steps[Head]], rows: Any, keeper: _Keeper | None = None
    ) -> Head:
        try:
            return self._drive(steps(rows, self._head), keeper)
        except StoreUnavailable as exc:
            if not collided(exc):
                raise
        # A row written around the store took the id after the head: the
        # function chains after the newest row instead.
        return self._drive(steps(rows, self._head, around=True), keeper)

    def _write_rows(self, rows: list[AuditRow]) -> None:
        # The batcher's writes, one at a time, on the connection its writer
        # keeps whichever thread writes; one row in the plain statement,
        # cheaper than the function call.
        if len(rows) == 1:
            self._head = self._append_steps(sql.append, rows[0], self._writer)
        elif rows:
            self._head = self._append_steps(sql.append_many, rows, self._writer)

    def audit_chain(
        self, *, after_id: int = 0, limit: int = 1000
    ) -> list[tuple[AuditRow, str | None]]:
        return self._drive(sql.audit_chain(after_id, limit))

    def audit_rows(self, *, after_id: int = 0, limit: int = 1000, **filters: str) -> list[AuditRow]:
        return self._drive(sql.audit_rows(after_id, limit, filters))

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
        """Close the pools and the kept connections (a call running on one fails: ``StoreUnavailable``)."""
        if self._async is not None:
            self._async.close()
        with self._lock:
            pool, self._pool = self._pool, None
            held, self._held = list(self._held), weakref.WeakSet()
        for kept in held:
            kept.close()
        if pool is not None and self._pid == os.getpid():
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


def refused(exc: BaseException) -> StoreUnavailable:
    """The ``StoreUnavailable`` that stands for the backend failure ``exc`` (its type only)."""
    return StoreUnavailable(f"PostgreSQL store: {type(exc).__name__}")


def collided(exc: BaseException) -> bool:
    """Whether ``exc`` stands for an audit row whose id was taken by a row written around the store."""
    return type(exc.__cause__).__name__ == "UniqueViolation"


class _Cursor:
    """Runs what an operation yields: a statement on one cursor, reused; a batch on its own."""

    __slots__ = ("cursor",)

    def __init__(self, cursor: Any) -> None:
        self.cursor = cursor

    def __call__(self, item: Sql | Batch) -> Result | tuple[Result, ...]:
        if isinstance(item, Sql):
            return _result(self.cursor.execute(item.text, item.params))
        conn = self.cursor.connection
        with conn.pipeline(), conn.transaction():
            cursors = [conn.execute(s.text, s.params) for s in item.statements]
        return tuple(_result(c) for c in cursors)


def _result(cursor: Any) -> Result:
    return Result(cursor.rowcount, cursor.fetchall() if cursor.description is not None else [])


class _Held:
    """A pool connection kept between calls, and the process that took it (a
    forked child leaves its parent's connection alone: the parent still uses it)."""

    __slots__ = ("__weakref__", "conn", "execute", "pid", "pool")

    def __init__(self, pool: Any) -> None:
        self.pool, self.pid = pool, os.getpid()
        self.conn: Any = None

    def take(self) -> None:
        self.conn = self.pool.getconn()
        self.execute = _Cursor(self.conn.cursor())

    def give_back(self) -> None:
        conn, self.conn = self.conn, None
        with suppress(Exception):  # a closed pool closes it
            if conn is not None and self.pid == os.getpid():
                self.pool.putconn(conn)

    def close(self) -> None:
        conn, self.conn = self.conn, None
        if conn is not None and self.pid == os.getpid():
            conn.close()

    __del__ = give_back  # its thread ended (the thread's ``_Local`` went with it)


class _Keeper:
    """Where a kept connection is held: the group commit's writer's (one thread at a time)."""

    held: _Held | None = None


class _Local(threading.local, _Keeper):
    """The connection one thread keeps."""
