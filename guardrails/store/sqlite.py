"""The embedded default store: one SQLite file, WAL mode, safe across threads and processes.

Each thread (and each process after a fork) opens its own connection. Writes
that read first (reserve, claim, snapshot versions) run inside ``BEGIN
IMMEDIATE``, which takes the file's write lock up front, so concurrent
processes serialise on it; ``busy_timeout`` makes them wait instead of fail.
An audit append is one autocommitted ``INSERT``: the store keeps the chain
head it last wrote, gives the row the next id and hashes it after that head.
Ids are consecutive and no row is ever replaced, so the id is free exactly
when that head is still the newest row; the insert checks it under the write
lock. When another writer took the id first (an integrity error), that append
and the next ones use one ``INSERT ... VALUES`` whose subqueries read the
newest row under the write lock and hash after it there (``guardrails_link``),
until an append finds the head where this store left it. Either way the chain
is extended inside the transaction that writes the row; in WAL mode with
``synchronous=NORMAL`` a committed row survives a killed
process. The store's connections cannot rewrite or remove audit rows
(``_append_only``).

``grouped()`` runs a thread's operations in one transaction (the store
thread of ``offloop`` runs each pass in one): a method that needs a
transaction of its own takes a savepoint instead, and the chain head hint of
the block's appends is published only once the block has committed. A pass
(``one_pass()``, which ``offloop`` enters around each pass of its thread)
waits for the file lock once: when that wait runs out, every operation left
in the pass fails at once with ``StoreUnavailable`` instead of waiting
``busy_timeout`` again.
"""

from __future__ import annotations

import os
import sqlite3
import threading
import time
import weakref
from collections.abc import Iterator, Sequence
from contextlib import contextmanager, suppress
from typing import Any

from ._append_only import refuse_audit_changes
from ._base import (
    AUDIT_COLUMNS,
    AuditRow,
    Claim,
    Snapshot,
    StoreUnavailable,
    check_filters,
    check_times,
    row_from,
)
from ._chain import GENESIS, content, link, sealed
from ._migrations import migrations, split_statements
from ._sqlite_approvals import SQLiteApprovals
from ._sqlite_insert import INSERT, insert
from ._sqlite_triggers import restore_triggers

__all__ = ["SQLiteStore"]

_COLUMNS = ", ".join(AUDIT_COLUMNS)
_VALUES = ", ".join("?" for _ in AUDIT_COLUMNS)
# A row after the newest one, whoever wrote it, in one statement (whose reads
# run under its write lock): the hash computed in Python goes in when the
# newest row is the hint given (id, hash); otherwise SQLite hashes after it.
_NEWEST_ID = "COALESCE((SELECT MAX(id) FROM guardrails_audit), 0)"
_NEWEST = "FROM guardrails_audit ORDER BY id DESC LIMIT 1"
_APPEND_AFTER_NEWEST = (
    f"INSERT INTO guardrails_audit (id, {_COLUMNS}, hash) VALUES ({_NEWEST_ID} + 1, {_VALUES}, "
    f"CASE WHEN (SELECT id = ? AND hash IS ? {_NEWEST}) THEN ? ELSE guardrails_link("
    f"COALESCE((SELECT hash {_NEWEST}), ''), {_NEWEST_ID} + 1, ?) END) RETURNING id, hash"
)
# What a value the driver cannot bind (a lone surrogate in a key, an integer
# past 64 bits) raises, besides the driver's own errors.
_FAILURES = (sqlite3.Error, UnicodeEncodeError, OverflowError)
_HEAD = "SELECT id, hash FROM guardrails_audit ORDER BY id DESC LIMIT 1"
_SELECT = f"SELECT id, {_COLUMNS} FROM guardrails_audit"
_SELECT_CHAIN = f"SELECT id, {_COLUMNS}, hash FROM guardrails_audit"
# A budget's row is made by its first reservation or settlement: the statements
# that change it run first, and only when they find no row is it made (one
# statement fewer on every other call).
_NEW_BUDGET = "INSERT OR IGNORE INTO guardrails_budgets (key) VALUES (?)"
_RESERVE = (
    "UPDATE guardrails_budgets SET reserved = reserved + ? "
    "WHERE key = ? AND spent + reserved < ? AND spent + reserved + ? <= ?"
)
_RENEW = "UPDATE guardrails_leases SET expires_at = ? WHERE holder = ?"
_SETTLE = (
    "UPDATE guardrails_budgets SET reserved = reserved - ?, spent = spent + ? "
    "WHERE key = ? RETURNING spent"
)


class _Local(threading.local):
    """Per thread: its connection, the chain head hint of its ``grouped()``
    block while one is open, and its pass.

    A pass that waited for the lock in vain parks the connection (``refused``
    says why), so that its operations reach the slow path of ``_conn`` and
    fail there; the pass's end puts it back.
    """

    conn: sqlite3.Connection | None = None
    pending: list[Any] | None = None
    passing = False
    refused: str | None = None
    parked: sqlite3.Connection | None = None


class SQLiteStore(SQLiteApprovals):
    """A store in one SQLite file. ``path`` is created (with its schema) on first use."""

    def __init__(
        self,
        path: str | os.PathLike[str],
        *,
        busy_timeout: float = 30.0,
        synchronous: str = "NORMAL",
    ) -> None:
        self.path = os.fspath(path)
        if self.path == ":memory:" or self.path.startswith("file::memory:"):
            raise ValueError("SQLiteStore needs a file; use MemoryStore for an in-memory store")
        if synchronous.upper() not in {"OFF", "NORMAL", "FULL", "EXTRA"}:
            raise ValueError(f"synchronous must be OFF, NORMAL, FULL or EXTRA, not {synchronous!r}")
        self.busy_timeout = busy_timeout
        self.synchronous = synchronous.upper()
        self._local = _Local()
        self._migrated = False
        self._connections: list[sqlite3.Connection] = []
        self._lock = threading.Lock()
        # The (id, hash) of the last row this store wrote: a hint, which the
        # next append checks under the write lock (another writer may have moved on).
        self._shared_head: tuple[int, str] | None = None
        self._shared_moved = False  # the last check found the head moved: read it in SQL
        _STORES.add(self)

    # -- the chain head hint ----------------------------------------------------
    # Shared by the store's threads and set only from committed rows: inside
    # ``grouped()`` a thread's appends keep their own until the group commits
    # (and drop it if it does not).

    @property
    def _head(self) -> tuple[int, str] | None:
        pending = self._local.pending
        return self._shared_head if pending is None else pending[0]

    @_head.setter
    def _head(self, head: tuple[int, str] | None) -> None:
        pending = self._local.pending
        if pending is None:
            self._shared_head = head
        else:
            pending[0] = head

    @property
    def _moved(self) -> bool:
        pending = self._local.pending
        return self._shared_moved if pending is None else bool(pending[1])

    @_moved.setter
    def _moved(self, moved: bool) -> None:
        pending = self._local.pending
        if pending is None:
            self._shared_moved = moved
        else:
            pending[1] = moved

    # -- connections --------------------------------------------------------

    def _conn(self) -> sqlite3.Connection:
        local = self._local
        conn = local.conn
        if conn is not None:
            if local.pending is not None and not conn.in_transaction:
                # SQLite rolled the group back on an error (a full disk, an I/O
                # error): what follows would commit on its own. Nothing runs.
                raise StoreUnavailable(
                    f"SQLite store {self.path!r}: the transaction was rolled back"
                )
            return conn
        if local.refused is not None:
            raise StoreUnavailable(local.refused)
        try:
            conn = sqlite3.connect(
                self.path, timeout=self.busy_timeout, isolation_level=None, check_same_thread=False
            )
            self._set_up(conn)
        except (sqlite3.Error, OSError) as exc:
            raise StoreUnavailable(f"SQLite store {self.path!r}: {exc}") from exc
        local.conn = conn
        with self._lock:
            self._connections.append(conn)
        return conn

    def _set_up(self, conn: sqlite3.Connection) -> None:
        # Switching a new file to WAL needs an exclusive lock, and SQLite answers
        # "locked" at once (without the busy handler) when several processes
        # open a new file together: retry until busy_timeout has passed.
        deadline = time.monotonic() + self.busy_timeout
        while True:
            try:
                conn.execute(f"PRAGMA busy_timeout = {int(self.busy_timeout * 1000)}")
                if conn.execute("PRAGMA journal_mode").fetchone()[0].lower() != "wal":
                    conn.execute("PRAGMA journal_mode = WAL")
                conn.execute(f"PRAGMA synchronous = {self.synchronous}")
                if not self._migrated:
                    _migrate(conn)
                    self._migrated = True
                restore_triggers(conn)  # before the authorizer, which refuses trigger DDL
                conn.create_function("guardrails_link", 3, link, deterministic=True)
                refuse_audit_changes(conn)
                return
            except sqlite3.OperationalError as exc:
                busy = "locked" in str(exc) or "busy" in str(exc)
                if not busy or time.monotonic() >= deadline:
                    raise
                time.sleep(0.005)

    @contextmanager
    def one_pass(self) -> Iterator[None]:
        """The calling thread's operations, until the block ends, wait for the lock once.

        Once a wait for the file lock ran out (a ``grouped()`` block whose
        transaction could not begin, or an operation outside one that found
        the file locked past ``busy_timeout``), every operation left in the
        block fails at once with ``StoreUnavailable``: a pass of 128 queued
        operations waits one ``busy_timeout``, not 128. ``offloop`` runs each
        pass of the store's thread in one.
        """
        local = self._local
        if local.passing:
            yield
            return
        local.passing = True
        try:
            yield
        finally:
            local.passing = False
            self._resume()

    def _refuse(self, why: object) -> None:
        """Until the pass ends, this thread's operations fail at once (see ``_Local``)."""
        local = self._local
        local.refused = f"SQLite store {self.path!r}: {why}"
        local.parked, local.conn = local.conn, None

    def _resume(self) -> None:
        local = self._local
        if local.refused is not None:
            local.conn, local.parked, local.refused = local.parked, None, None

    @contextmanager
    def grouped(self) -> Iterator[None]:
        """The calling thread's operations, until the block ends, in one transaction.

        ``BEGIN IMMEDIATE`` on entry (the write lock, for the whole block), one
        ``COMMIT`` on exit; each operation that needs a transaction of its own
        runs in a savepoint, so it is still all or nothing. A block that ends
        with an exception is rolled back; a commit that fails (or a transaction
        SQLite rolled back by itself) raises ``StoreUnavailable``: nothing of
        the block was written, and the chain head hint of its appends is
        dropped. A block whose transaction cannot begin (the file is locked
        past ``busy_timeout``, or cannot be opened) is a pass that waited in
        vain: each of its operations fails at once with ``StoreUnavailable``,
        so that each job meets the failure itself (a fail-open hook stays
        fail-open) without waiting again. ``offloop`` runs each pass of the
        store's thread in one block, and answers its callers once it has
        committed.
        """
        local = self._local
        if local.pending is not None or local.refused is not None:  # already in one, or refused
            yield
            return
        conn = self._begun()
        if conn is None:
            try:
                yield
            finally:
                if not local.passing:  # the block was the pass
                    self._resume()
            return
        local.pending = [self._shared_head, self._shared_moved]
        try:
            yield
            if not conn.in_transaction:
                raise StoreUnavailable(
                    f"SQLite store {self.path!r}: the transaction was rolled back"
                )
            conn.execute("COMMIT")
        except BaseException as exc:
            local.pending = None
            self._roll_back(conn)
            if isinstance(exc, _FAILURES):
                raise StoreUnavailable(f"SQLite store {self.path!r}: {exc}") from exc
            raise
        (self._shared_head, self._shared_moved), local.pending = local.pending, None

    def _begun(self) -> sqlite3.Connection | None:
        """This thread's connection in a ``BEGIN IMMEDIATE`` just begun, or None
        if it could not (the pass is then refused)."""
        try:
            conn = self._conn()
            conn.execute("BEGIN IMMEDIATE")
        except (*_FAILURES, StoreUnavailable) as exc:
            self._refuse(exc)
            return None
        return conn

    def _roll_back(self, conn: sqlite3.Connection) -> None:
        """End ``conn``'s transaction without writing it; a connection whose
        ``ROLLBACK`` failed is closed (which discards it) and replaced on next use."""
        with suppress(sqlite3.Error):
            if conn.in_transaction:
                conn.execute("ROLLBACK")
        if conn.in_transaction:
            with suppress(sqlite3.Error):
                conn.close()
            if self._local.conn is conn:
                self._local.conn = None

    @contextmanager
    def _immediate(self) -> Iterator[sqlite3.Connection]:
        conn = self._conn()
        if self._local.pending is None:
            begin, end, undo = "BEGIN IMMEDIATE", "COMMIT", "ROLLBACK"
        else:  # inside ``grouped()``: a savepoint of its transaction
            begin, end, undo = "SAVEPOINT operation", "RELEASE operation", "ROLLBACK TO operation"
        try:
            conn.execute(begin)
            try:
                yield conn
            except BaseException:
                conn.execute(undo)
                if undo != "ROLLBACK":
                    conn.execute(end)
                raise
            conn.execute(end)
        except _FAILURES as exc:
            if undo == "ROLLBACK":  # a COMMIT that failed may leave the transaction open
                self._roll_back(conn)
            raise self._unavailable(exc) from exc

    def _execute(self, sql: str, params: tuple[Any, ...] = ()) -> sqlite3.Cursor:
        try:
            return self._conn().execute(sql, params)
        except _FAILURES as exc:
            raise self._unavailable(exc) from exc

    def _unavailable(self, exc: BaseException) -> StoreUnavailable:
        """``exc`` as ``StoreUnavailable``; in a pass, a wait for the lock that ran
        out refuses the rest of the pass."""
        local = self._local
        if local.passing and local.pending is None and _locked(exc):
            self._refuse(exc)
        return StoreUnavailable(f"SQLite store {self.path!r}: {exc}")

    # -- audit ----------------------------------------------------------------

    def append(self, row: AuditRow, /) -> int:
        local = self._local
        pending = local.pending  # ``_head`` and ``_moved`` in one read of the thread's own
        head, moved = (self._shared_head, self._shared_moved) if pending is None else pending
        last, previous = head or (0, GENESIS)
        row_id = last + 1
        row, digest = sealed(row, previous, row_id)
        if head is not None and not moved:
            # Outside ``grouped()`` the thread's open connection is all ``_conn`` would check.
            conn = local.conn if pending is None else None
            try:
                (conn or self._conn()).execute(*insert(row, row_id, digest))
            except sqlite3.IntegrityError:
                self._moved = True  # the id is taken: another writer moved the head
            except _FAILURES as exc:
                raise StoreUnavailable(f"SQLite store {self.path!r}: {exc}") from exc
            else:  # the ``_head`` setter, without reading the thread's state again
                if pending is None:
                    self._shared_head = (row_id, digest)
                else:
                    pending[0] = (row_id, digest)
                return row_id
        return self._append_after_newest(row, last, previous, digest)

    def _append_after_newest(self, row: AuditRow, last: int, previous: str, digest: str) -> int:
        """``row`` (storable, hashed as ``digest`` after the hint ``(last, previous)``) after
        the newest row: ``digest`` goes in when the hint holds, SQLite hashes otherwise."""
        params = (*row.values(), last, previous, digest, content(row))
        row_id, stored = self._execute(_APPEND_AFTER_NEWEST, params).fetchall()[0]
        self._head, self._moved = (row_id, stored), row_id != last + 1
        return int(row_id)

    def append_many(self, rows: list[AuditRow], /) -> None:
        if not rows:
            return
        with self._immediate() as conn:
            head = conn.execute(_HEAD).fetchone()
            row_id, previous = (0, GENESIS) if head is None else (head[0], head[1] or GENESIS)
            params = []
            for row in rows:
                row_id += 1
                ready, previous = sealed(row, previous, row_id)
                params.append((row_id, *ready.values(), previous))
            conn.executemany(INSERT, params)
        self._head, self._moved = (row_id, previous), False

    def audit_chain(
        self, *, after_id: int = 0, limit: int = 1000
    ) -> list[tuple[AuditRow, str | None]]:
        sql = f"{_SELECT_CHAIN} WHERE id > ? ORDER BY id LIMIT ?"
        rows = self._execute(sql, (after_id, limit)).fetchall()
        return [(row_from(r), r[-1]) for r in rows]

    def audit_rows(self, *, after_id: int = 0, limit: int = 1000, **filters: str) -> list[AuditRow]:
        check_filters(filters)
        where = " AND ".join(["id > ?", *(f"{k} = ?" for k in filters)])
        sql = f"{_SELECT} WHERE {where} ORDER BY id LIMIT ?"
        rows = self._execute(sql, (after_id, *filters.values(), limit)).fetchall()
        return [row_from(r) for r in rows]

    # -- counters and budgets -------------------------------------------------

    def incr(self, key: str, by: int = 1, /) -> int:
        row = self._execute(
            "INSERT INTO guardrails_counters (key, value) VALUES (?, ?) "
            "ON CONFLICT (key) DO UPDATE SET value = value + excluded.value RETURNING value",
            (key, by),
        ).fetchone()
        return int(row[0])

    def reserve(self, key: str, amount: int, cap: int, /) -> bool:
        with self._immediate() as conn:
            return _reserved(conn, key, amount, cap)

    def settle(self, key: str, reserved: int, actual: int, /) -> int:
        with self._immediate() as conn:
            return _settled(conn, key, reserved, actual)

    def budget(self, key: str, /) -> tuple[int, int]:
        row = self._execute(
            "SELECT spent, reserved FROM guardrails_budgets WHERE key = ?", (key,)
        ).fetchone()
        return (0, 0) if row is None else (int(row[0]), int(row[1]))

    def reserve_leased(
        self, key: str, holder: str, amount: int, cap: int, now: float, until: float, /
    ) -> bool:
        check_times(now, until)
        with self._immediate() as conn:
            # Expired leases are given back only when the cap refuses without them: an
            # admitted reservation did not need their room, and skips the sweep (a scan of
            # the key's leases: as many rows as calls in flight on the key).
            if not _reserved(conn, key, amount, cap) and not (
                _gave_back(conn, key, now) and _reserved(conn, key, amount, cap)
            ):
                return False
            conn.execute(
                "INSERT INTO guardrails_leases (key, holder, amount, expires_at) "
                "VALUES (?, ?, ?, ?) ON CONFLICT (key, holder) DO UPDATE SET "
                "amount = amount + excluded.amount, expires_at = excluded.expires_at",
                (key, holder, amount, until),
            )
            return True

    def renew_leases(self, holder: str, until: float, /) -> int:
        check_times(until)
        cursor = self._execute(_RENEW, (until, holder))
        return cursor.rowcount

    def renew_leases_of(self, holders: Sequence[str], until: float, /) -> int:
        """``renew_leases`` of each of ``holders``, in one transaction; the leases renewed."""
        check_times(until)
        with self._immediate() as conn:
            cursor = conn.executemany(_RENEW, [(until, holder) for holder in holders])
            return cursor.rowcount

    def settle_leased(self, key: str, holder: str, actual: int, /) -> int:
        with self._immediate() as conn:
            held = conn.execute(
                "DELETE FROM guardrails_leases WHERE key = ? AND holder = ? RETURNING amount",
                (key, holder),
            ).fetchone()
            return _settled(conn, key, 0 if held is None else int(held[0]), actual)

    # -- key/value with compare-and-set -------------------------------------------

    def get(self, key: str, /) -> str | None:
        row = self._execute("SELECT value FROM guardrails_kv WHERE key = ?", (key,)).fetchone()
        return None if row is None else str(row[0])

    def compare_and_set(self, key: str, expected: str | None, new: str, /) -> bool:
        params: tuple[str, ...]
        if expected is None:
            sql, params = (
                "INSERT INTO guardrails_kv (key, value) VALUES (?, ?) ON CONFLICT DO NOTHING",
                (key, new),
            )
        else:
            sql, params = (
                "UPDATE guardrails_kv SET value = ? WHERE key = ? AND value = ?",
                (new, key, expected),
            )
        return self._execute(sql, params).rowcount == 1

    # -- idempotency --------------------------------------------------------------

    def claim(self, key: str, owner: str, now: float, lease_until: float, /) -> Claim:
        check_times(now, lease_until)
        with self._immediate() as conn:
            row = conn.execute(
                "SELECT state, result, expires_at FROM guardrails_idempotency WHERE key = ?",
                (key,),
            ).fetchone()
            if row is not None and row[2] > now:
                return Claim("done", row[1]) if row[0] == "done" else Claim("pending")
            conn.execute(
                "INSERT OR REPLACE INTO guardrails_idempotency "
                "(key, owner, state, result, expires_at) VALUES (?, ?, 'pending', NULL, ?)",
                (key, owner, lease_until),
            )
            return Claim("new")

    def complete(self, key: str, owner: str, result: str, expires_at: float, /) -> bool:
        check_times(expires_at)
        cursor = self._execute(
            "UPDATE guardrails_idempotency SET state = 'done', result = ?, expires_at = ? "
            "WHERE key = ? AND owner = ?",
            (result, expires_at, key, owner),
        )
        return cursor.rowcount == 1

    def release(self, key: str, owner: str, /) -> None:
        self._execute(
            "DELETE FROM guardrails_idempotency WHERE key = ? AND owner = ? AND state = 'pending'",
            (key, owner),
        )

    # -- snapshots ------------------------------------------------------------------

    def put_snapshot(self, key: str, data: bytes, at: float, /) -> int:
        check_times(at)
        with self._immediate() as conn:
            row = conn.execute(
                "INSERT INTO guardrails_snapshots (key, version, at, data) VALUES "
                "(?, (SELECT COALESCE(MAX(version), 0) + 1 FROM guardrails_snapshots "
                "WHERE key = ?), ?, ?) RETURNING version",
                (key, key, at, bytes(data)),
            ).fetchone()
            return int(row[0])

    def snapshot(self, key: str, version: int | None = None, /) -> Snapshot | None:
        if version is None:
            sql = "SELECT key, version, at, data FROM guardrails_snapshots WHERE key = ? ORDER BY version DESC LIMIT 1"
            params: tuple[Any, ...] = (key,)
        else:
            sql = "SELECT key, version, at, data FROM guardrails_snapshots WHERE key = ? AND version = ?"
            params = (key, version)
        row = self._execute(sql, params).fetchone()
        return None if row is None else Snapshot(row[0], int(row[1]), float(row[2]), bytes(row[3]))

    def close(self) -> None:
        with self._lock:
            connections, self._connections = self._connections, []
        for conn in connections:
            with suppress(sqlite3.Error):
                conn.close()
        self._local = _Local()

    def __enter__(self) -> SQLiteStore:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()


def _reserved(conn: sqlite3.Connection, key: str, amount: int, cap: int) -> bool:
    """Add ``amount`` to the key's reservations if the cap allows (in the caller's transaction)."""
    reserve = (amount, key, cap, amount, cap)
    if conn.execute(_RESERVE, reserve).rowcount == 1:
        return True
    # No row for the key yet (its first reservation: made, then tried again), or the
    # cap refuses (the row exists: nothing is inserted, and the answer stands).
    inserted = conn.execute(_NEW_BUDGET, (key,)).rowcount == 1
    return inserted and conn.execute(_RESERVE, reserve).rowcount == 1


def _gave_back(conn: sqlite3.Connection, key: str, now: float) -> bool:
    """Give back what the key's leases expired by ``now`` hold; whether there were any
    (in the caller's transaction)."""
    expired = conn.execute(
        "DELETE FROM guardrails_leases WHERE key = ? AND expires_at <= ? RETURNING amount",
        (key, now),
    ).fetchall()
    if expired:
        conn.execute(
            "UPDATE guardrails_budgets SET reserved = reserved - ? WHERE key = ?",
            (sum(int(r[0]) for r in expired), key),
        )
    return bool(expired)


def _settled(conn: sqlite3.Connection, key: str, reserved: int, actual: int) -> int:
    """Move ``reserved`` out of the key's reservations and ``actual`` into its spend;
    the spend after (in the caller's transaction)."""
    settle = (reserved, actual, key)
    row = conn.execute(_SETTLE, settle).fetchone()
    if row is None:  # no row for the key yet: made, then settled
        conn.execute(_NEW_BUDGET, (key,))
        row = conn.execute(_SETTLE, settle).fetchone()
    return int(row[0])


# A forked child must not use its parent's connections (SQLite's locks are the
# process's): once per fork, not once per operation, the forking thread (the
# child's only one) forgets them and opens its own on next use.
_STORES: weakref.WeakSet[SQLiteStore] = weakref.WeakSet()


def _forget_connections_in_child() -> None:
    for store in list(_STORES):
        local = store._local
        local.conn = local.parked = None


os.register_at_fork(after_in_child=_forget_connections_in_child)


def _locked(exc: BaseException) -> bool:
    """The file was locked by another writer past ``busy_timeout``."""
    code = getattr(exc, "sqlite_errorcode", None)
    return code is not None and code & 0xFF in (sqlite3.SQLITE_BUSY, sqlite3.SQLITE_LOCKED)


def _migrate(conn: sqlite3.Connection) -> None:
    wanted = migrations("sqlite")
    conn.execute(
        "CREATE TABLE IF NOT EXISTS guardrails_schema (version INTEGER PRIMARY KEY, applied_at REAL NOT NULL)"
    )
    current = conn.execute("SELECT COALESCE(MAX(version), 0) FROM guardrails_schema").fetchone()[0]
    if current >= wanted[-1][0]:
        return
    conn.execute("BEGIN IMMEDIATE")
    try:
        current = conn.execute(
            "SELECT COALESCE(MAX(version), 0) FROM guardrails_schema"
        ).fetchone()[0]
        for version, sql in wanted:
            if version > current:
                for statement in split_statements(sql):
                    conn.execute(statement)
                conn.execute("INSERT INTO guardrails_schema VALUES (?, ?)", (version, time.time()))
        conn.execute("COMMIT")
    except BaseException:
        conn.execute("ROLLBACK")
        raise
