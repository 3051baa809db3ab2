"""PostgreSQL store operations written once, without I/O: the statements and the decisions.

Each operation is a generator that yields what to run and receives the
answer; its return value is the method's. It yields ``Sql`` statements, each
run alone in autocommit and answered by its ``Result``: what needs a
transaction of several statements is one function of the schema (migration
4: a leased reservation, a snapshot's next version), so every statement is
one round trip and one commit, and row locks are held only while the server
works. ``PostgresStore`` drives the operations on sync
connections, ``_pg_async`` on async ones: the SQL and what is decided from
its answers are the same on both paths. Both drivers take an operation's
first statement (``first``) before they ask for a connection: what it
checks before that statement (its times, its filters) is refused without
one, a ``StoreError`` even when the pool is exhausted or the server away.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Generator, Sequence
from typing import Any, NamedTuple, TypeVar

from ._base import AUDIT_COLUMNS, AuditRow, Claim, Snapshot, check_filters, check_times, row_from
from ._chain import GENESIS, content, link
from ._storable import storable

__all__ = ["Head", "Result", "Sql", "Steps", "drive"]

T = TypeVar("T")

_COLUMNS = ", ".join(AUDIT_COLUMNS)
_VALUES = ", ".join("%s" for _ in AUDIT_COLUMNS)
# One row, when the store's hint of the chain head still holds: the UPDATE
# takes the head's row lock and moves it only if it is the (id, hash) the
# client hashed after (one that waited re-reads the head its predecessor
# committed, EvalPlanQual); the INSERT writes the row with the client's hash.
# The server checks and inserts, nothing more; nothing comes back. A head that
# moved meanwhile inserts nothing (row count 0).
# Parameters: the row's hash, the hint's id and hash, then the row's columns.
APPEND = (
    "WITH head AS (UPDATE guardrails_audit_head SET id = id + 1, hash = %s "
    "WHERE id = %s::bigint AND hash = %s RETURNING id, hash) "
    f"INSERT INTO guardrails_audit (id, {_COLUMNS}, hash) "
    f"SELECT head.id, {_VALUES}, head.hash FROM head"
)
# One row after whatever head the UPDATE locks: the client's hash when that
# head is the hint, otherwise the server hashes after it (in SQL, about a
# microsecond; a function call costs more than the row's insert). For a store
# whose hint fell behind (writers taking turns) until the head is back where
# it left it. The head table is only trusted when it names a row it can see
# with that hash (or is the empty chain's): a head someone overwrote (the
# application role may UPDATE it), or one moved by a writer that committed
# while this one waited for the lock, inserts nothing, and the row goes
# through the function, which chains after the newest row (migration 6).
# Parameters: the hint's id and hash, the client's hash, the row's content,
# then its columns; answers the row's (id, hash), or no row.
APPEND_AFTER_HEAD = (
    "WITH head AS (UPDATE guardrails_audit_head h SET id = h.id + 1, hash = CASE "
    "WHEN h.id = %s::bigint AND h.hash = %s THEN %s ELSE encode(sha256(convert_to("
    "h.hash || '|' || (h.id + 1)::text || '|' || %s, 'UTF8')), 'hex') END "
    "WHERE (h.id = 0 AND h.hash = '') OR EXISTS (SELECT 1 FROM guardrails_audit a "
    "WHERE a.id = h.id AND a.hash = h.hash) "
    "RETURNING h.id, h.hash) "
    f"INSERT INTO guardrails_audit (id, {_COLUMNS}, hash) "
    f"SELECT head.id, {_VALUES}, head.hash FROM head "
    "RETURNING id, hash"
)
# The chain head table as it is (``verify`` compares it with the newest row).
HEAD = "SELECT id, hash FROM guardrails_audit_head"
# Many rows: the function of migration 3 locks the head; the client's hashes
# go in when it is the hint, otherwise (or when the client sent none, its
# hint having fallen behind last time) the server hashes after the head it
# locked, in the same call; a row written around the store (not through the
# head) is chained after, not collided with. Answers the new head and whether
# the hint was out of date.
APPEND_MANY = "SELECT * FROM guardrails_audit_append(%s::bigint, %s, %s, %s, %s::json)"
SELECT = f"SELECT id, {_COLUMNS} FROM guardrails_audit"
SELECT_CHAIN = f"SELECT id, {_COLUMNS}, hash FROM guardrails_audit"
CHUNK = 1000  # rows per call of the append function

INCR = (
    "INSERT INTO guardrails_counters AS c (key, value) VALUES (%s, %s) "
    "ON CONFLICT (key) DO UPDATE SET value = c.value + excluded.value RETURNING value"
)
BUDGET_ROW = "INSERT INTO guardrails_budgets (key) VALUES (%s) ON CONFLICT DO NOTHING"
# One conditional UPDATE: it takes the row lock and re-checks its WHERE
# against the locked row, so reservations queue.
RESERVE = (
    "UPDATE guardrails_budgets SET reserved = reserved + %s "
    "WHERE key = %s AND spent + reserved < %s AND spent + reserved + %s <= %s RETURNING 1"
)
SETTLE = (
    "INSERT INTO guardrails_budgets AS b (key, spent, reserved) VALUES (%s, %s, %s) "
    "ON CONFLICT (key) DO UPDATE SET reserved = b.reserved - %s, spent = b.spent + %s "
    "RETURNING spent"
)
BUDGET = "SELECT spent, reserved FROM guardrails_budgets WHERE key = %s"
# A leased reservation (create the budget row, reserve and lease if the cap admits
# it; if not, give back what expired leases hold and ask again) in one function
# (migrations 4 and 5): one statement, one round trip, one commit.
RESERVE_LEASED_FUNCTION = "SELECT guardrails_reserve_leased(%s, %s, %s, %s, %s, %s)"
RENEW = "UPDATE guardrails_leases SET expires_at = %s WHERE holder = %s"
# Many holders' leases in one statement. Rows another transaction holds are skipped, not
# waited for: that one is settling them, giving them back (expired) or leasing them anew,
# and each leaves nothing to renew. Waiting could close a cycle that one holder's renewal
# cannot: this statement holding one lease of a key while a give-back of that key holds
# another that it wants.
RENEW_ALL = (
    "UPDATE guardrails_leases SET expires_at = %s WHERE (key, holder) IN ("
    "SELECT key, holder FROM guardrails_leases WHERE holder = ANY(%s::text[]) "
    "FOR UPDATE SKIP LOCKED)"
)
SETTLE_LEASED = (
    "WITH held AS (DELETE FROM guardrails_leases WHERE key = %s AND holder = %s "
    "RETURNING amount) "
    "INSERT INTO guardrails_budgets AS b (key, spent, reserved) "
    "VALUES (%s, %s, -(SELECT COALESCE(SUM(amount), 0) FROM held)) "
    "ON CONFLICT (key) DO UPDATE SET spent = b.spent + excluded.spent, "
    "reserved = b.reserved + excluded.reserved RETURNING spent"
)
GET = "SELECT value FROM guardrails_kv WHERE key = %s"
INSERT_KV = "INSERT INTO guardrails_kv (key, value) VALUES (%s, %s) ON CONFLICT DO NOTHING"
UPDATE_KV = "UPDATE guardrails_kv SET value = %s WHERE key = %s AND value = %s"
# Take the key when it is absent or expired; otherwise report what is there.
CLAIM = (
    "INSERT INTO guardrails_idempotency AS i (key, owner, state, result, expires_at) "
    "VALUES (%s, %s, 'pending', NULL, %s) "
    "ON CONFLICT (key) DO UPDATE SET owner = excluded.owner, state = 'pending', "
    "result = NULL, expires_at = excluded.expires_at WHERE i.expires_at <= %s "
    "RETURNING owner"
)
CLAIMED = "SELECT state, result FROM guardrails_idempotency WHERE key = %s"
COMPLETE = (
    "UPDATE guardrails_idempotency SET state = 'done', result = %s, expires_at = %s "
    "WHERE key = %s AND owner = %s"
)
RELEASE = "DELETE FROM guardrails_idempotency WHERE key = %s AND owner = %s AND state = 'pending'"
# The advisory lock of the key, then the next version, in one function (migration 4).
PUT_SNAPSHOT = "SELECT guardrails_put_snapshot(%s, %s, %s)"
LATEST_SNAPSHOT = (
    "SELECT key, version, at, data FROM guardrails_snapshots WHERE key = %s "
    "ORDER BY version DESC LIMIT 1"
)
SNAPSHOT = "SELECT key, version, at, data FROM guardrails_snapshots WHERE key = %s AND version = %s"


class Sql(NamedTuple):
    text: str
    params: tuple[Any, ...] = ()


class Result(NamedTuple):
    """What a statement answered: its row count and the rows it returned (if any)."""

    rowcount: int
    rows: list[tuple[Any, ...]]

    def first(self) -> tuple[Any, ...] | None:
        return self.rows[0] if self.rows else None


Steps = Generator[Sql, Any, T]


def first(steps: Steps[Any]) -> Sql:
    """The first statement of ``steps``: what the operation checks before it runs here,
    before a connection is asked for (every operation sends at least one statement)."""
    return next(steps)


def drive(steps: Steps[T], statement: Sql, execute: Callable[[Sql], Any]) -> T:
    """Run ``steps`` from its ``first`` statement with ``execute`` answering each statement
    (the sync driver's loop)."""
    try:
        while True:
            statement = steps.send(execute(statement))
    except StopIteration as done:
        return done.value  # type: ignore[no-any-return]


# -- audit ----------------------------------------------------------------------------


class Head(NamedTuple):
    """A store's hint of the chain head: the last row it wrote, and whether the
    head had moved past the hint the last time it looked (then the next append
    goes straight to ``APPEND_AFTER_HEAD``, which shows when the head is back
    where the store left it)."""

    id: int
    hash: str
    moved: bool = False


START = Head(0, GENESIS)


def append(row: AuditRow, head: Head = START, *, around: bool = False) -> Steps[Head]:
    """Append ``row`` after ``head`` (checked under the head's lock); returns the next hint.
    ``around``: a row written around the store took the next id; go through the function."""
    row = storable(row)
    text = content(row)
    last, previous, moved = head
    digest = link(previous, last + 1, text)
    if around:
        return (yield from _append_rows([row], [text], [digest], head))
    if not moved:
        done = yield Sql(APPEND, (digest, last, previous, *row.values()))
        if done.rowcount == 1:
            return Head(last + 1, digest)
    found = yield Sql(APPEND_AFTER_HEAD, (last, previous, digest, text, *row.values()))
    if not found.rows:  # the head names no row it can see: the function decides
        return (yield from _append_rows([row], [text], [], head))
    written, stored = found.rows[0]
    return Head(int(written), str(stored), stored != digest)


def append_many(rows: list[AuditRow], head: Head = START, *, around: bool = False) -> Steps[Head]:
    """Append ``rows`` in chunks of ``CHUNK``, each one statement and one commit
    (``around``: as ``append``'s; the function always handles it)."""
    ready = [storable(r) for r in rows]
    for start in range(0, len(ready), CHUNK):
        chunk = ready[start : start + CHUNK]
        texts = [content(r) for r in chunk]
        last, previous, moved = head
        hashes = []
        if not moved:  # a hint that fell behind last time sends none: the server hashes
            for text in texts:
                last += 1
                previous = link(previous, last, text)
                hashes.append(previous)
        head = yield from _append_rows(chunk, texts, hashes, head)
    return head


def _append_rows(
    rows: list[AuditRow], texts: list[str], hashes: list[str], head: Head
) -> Steps[Head]:
    """One call of the function: the hint, the client's hashes, the contents, the rows as JSON."""
    payload = json.dumps([dict(zip(AUDIT_COLUMNS, r, strict=False)) for r in rows])
    found = yield Sql(APPEND_MANY, (head.id, head.hash, hashes, texts, payload))
    last, stored, moved = found.rows[0]
    return Head(int(last), str(stored), bool(moved))


def audit_head() -> Steps[tuple[int, str] | None]:
    """The chain head table's (id, hash), or None when it has no row."""
    found = yield Sql(HEAD, ())
    return (int(found.rows[0][0]), str(found.rows[0][1])) if found.rows else None


def audit_chain(after_id: int, limit: int) -> Steps[list[tuple[AuditRow, str | None]]]:
    found = yield Sql(f"{SELECT_CHAIN} WHERE id > %s ORDER BY id LIMIT %s", (after_id, limit))
    return [(row_from(tuple(r)), r[-1]) for r in found.rows]


def audit_rows(after_id: int, limit: int, filters: dict[str, str]) -> Steps[list[AuditRow]]:
    check_filters(filters)
    where = " AND ".join(["id > %s", *(f"{k} = %s" for k in filters)])
    sql = f"{SELECT} WHERE {where} ORDER BY id LIMIT %s"
    found = yield Sql(sql, (after_id, *filters.values(), limit))
    return [row_from(tuple(r)) for r in found.rows]


# -- counters and budgets ----------------------------------------------------------------


def incr(key: str, by: int = 1) -> Steps[int]:
    found = yield Sql(INCR, (key, by))
    return int(found.rows[0][0])


def reserve(key: str, amount: int, cap: int) -> Steps[bool]:
    yield Sql(BUDGET_ROW, (key,))
    found = yield Sql(RESERVE, (amount, key, cap, amount, cap))
    return found.first() is not None


def settle(key: str, reserved: int, actual: int) -> Steps[int]:
    found = yield Sql(SETTLE, (key, actual, -reserved, reserved, actual))
    return int(found.rows[0][0])


def budget(key: str) -> Steps[tuple[int, int]]:
    row = (yield Sql(BUDGET, (key,))).first()
    return (0, 0) if row is None else (int(row[0]), int(row[1]))


def reserve_leased(
    key: str, holder: str, amount: int, cap: int, now: float, until: float
) -> Steps[bool]:
    check_times(now, until)
    # Create the row, reserve and lease; refused, give back what expired leases
    # hold and ask again: the function of migrations 4 and 5, one statement.
    found = yield Sql(RESERVE_LEASED_FUNCTION, (key, holder, amount, cap, now, until))
    return bool(found.rows[0][0])


def renew_leases(holder: str, until: float) -> Steps[int]:
    check_times(until)
    found = yield Sql(RENEW, (until, holder))
    return int(found.rowcount)


def renew_leases_of(holders: Sequence[str], until: float) -> Steps[int]:
    check_times(until)
    found = yield Sql(RENEW_ALL, (until, list(holders)))
    return int(found.rowcount)


def settle_leased(key: str, holder: str, actual: int) -> Steps[int]:
    found = yield Sql(SETTLE_LEASED, (key, holder, key, actual))
    return int(found.rows[0][0])


# -- key/value with compare-and-set ---------------------------------------------------------


def get(key: str) -> Steps[str | None]:
    row = (yield Sql(GET, (key,))).first()
    return None if row is None else str(row[0])


def compare_and_set(key: str, expected: str | None, new: str) -> Steps[bool]:
    if expected is None:
        found = yield Sql(INSERT_KV, (key, new))
    else:
        found = yield Sql(UPDATE_KV, (new, key, expected))
    return bool(found.rowcount == 1)


# -- idempotency ---------------------------------------------------------------------------


def claim(key: str, owner: str, now: float, lease_until: float) -> Steps[Claim]:
    check_times(now, lease_until)
    while True:
        taken = yield Sql(CLAIM, (key, owner, lease_until, now))
        if taken.first() is not None:
            return Claim("new")
        row = (yield Sql(CLAIMED, (key,))).first()
        if row is not None:
            return Claim("done", row[1]) if row[0] == "done" else Claim("pending")
        # released between the two statements: try again


def complete(key: str, owner: str, result: str, expires_at: float) -> Steps[bool]:
    check_times(expires_at)
    found = yield Sql(COMPLETE, (result, expires_at, key, owner))
    return bool(found.rowcount == 1)


def release(key: str, owner: str) -> Steps[None]:
    yield Sql(RELEASE, (key, owner))


# -- snapshots --------------------------------------------------------------------------------


def put_snapshot(key: str, data: bytes, at: float) -> Steps[int]:
    check_times(at)
    found = yield Sql(PUT_SNAPSHOT, (key, at, bytes(data)))
    return int(found.rows[0][0])


def snapshot(key: str, version: int | None = None) -> Steps[Snapshot | None]:
    if version is None:
        found = yield Sql(LATEST_SNAPSHOT, (key,))
    else:
        found = yield Sql(SNAPSHOT, (key, version))
    row = found.first()
    return None if row is None else Snapshot(row[0], int(row[1]), float(row[2]), bytes(row[3]))
