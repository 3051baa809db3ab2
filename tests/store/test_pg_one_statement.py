"""PostgreSQL operations in one statement each (the functions of migrations 4 and 5).

On a real server: the store sends one statement per leased reservation and
per snapshot; a schema of version 3 is upgraded in place while a process of
the previous release, which sends its statements in one transaction, keeps
reserving on the same budget and writing snapshots of the same key, and
together they never pass the cap nor skip or repeat a version; expired
leases are given back exactly once however many reservations race for them,
and a reservation that finds them being given back by another asks again.
"""

from __future__ import annotations

import threading
import time
import uuid
from typing import Any

import pytest

from guardrails.store import PostgresStore
from guardrails.store import _pg_sql as sql
from guardrails.store._migrations import migrations
from tests.store._gated import GENEROUS
from tests.store._pg_schema import at_version

pytestmark = pytest.mark.postgres

# What a process of the previous release sends for one leased reservation, in
# one transaction (version 3 of the schema): create the budget row, give back
# what expired leases held, reserve and lease if the cap admits it.
_PREVIOUS_RELEASE = (
    "INSERT INTO guardrails_budgets (key) VALUES (%(key)s) ON CONFLICT DO NOTHING",
    "WITH gone AS (DELETE FROM guardrails_leases WHERE key = %(key)s AND expires_at <= %(now)s "
    "RETURNING amount) UPDATE guardrails_budgets SET reserved = reserved - "
    "(SELECT COALESCE(SUM(amount), 0) FROM gone) WHERE key = %(key)s",
    "WITH admitted AS (UPDATE guardrails_budgets SET reserved = reserved + %(amount)s "
    "WHERE key = %(key)s AND spent + reserved < %(cap)s "
    "AND spent + reserved + %(amount)s <= %(cap)s RETURNING key) "
    "INSERT INTO guardrails_leases AS l (key, holder, amount, expires_at) "
    "SELECT key, %(holder)s, %(amount)s, %(until)s FROM admitted "
    "ON CONFLICT (key, holder) DO UPDATE SET "
    "amount = l.amount + excluded.amount, expires_at = excluded.expires_at RETURNING 1",
)


# ... and for a snapshot: the key's advisory lock, then the next version.
_PREVIOUS_RELEASE_SNAPSHOT = (
    "SELECT pg_advisory_xact_lock(hashtext(%(key)s))",
    "INSERT INTO guardrails_snapshots (key, version, at, data) VALUES "
    "(%(key)s, (SELECT COALESCE(MAX(version), 0) + 1 FROM guardrails_snapshots "
    "WHERE key = %(key)s), %(at)s, %(data)s) RETURNING version",
)


def _previous_release_snapshot(conn: Any, key: str, data: bytes, at: float) -> int:
    values = {"key": key, "data": data, "at": at}
    with conn.transaction():
        conn.execute(_PREVIOUS_RELEASE_SNAPSHOT[0], values)
        return int(conn.execute(_PREVIOUS_RELEASE_SNAPSHOT[1], values).fetchone()[0])


def _previous_release_reserve(
    conn: Any, key: str, holder: str, amount: int, cap: int, now: float, until: float
) -> bool:
    values = {"key": key, "holder": holder, "amount": amount, "cap": cap}
    values.update(now=now, until=until)
    with conn.transaction():
        for statement in _PREVIOUS_RELEASE[:-1]:
            conn.execute(statement, values)
        return conn.execute(_PREVIOUS_RELEASE[-1], values).fetchone() is not None


def _budget(dsn: str, key: str) -> tuple[int, int, int]:
    """(spent, reserved, sum of the key's leases), read straight from the tables."""
    import psycopg

    with psycopg.connect(dsn, autocommit=True) as conn:
        spent, reserved = conn.execute(
            "SELECT spent, reserved FROM guardrails_budgets WHERE key = %s", (key,)
        ).fetchone() or (0, 0)
        (leased,) = conn.execute(
            "SELECT COALESCE(SUM(amount), 0) FROM guardrails_leases WHERE key = %s", (key,)
        ).fetchone()
    return int(spent), int(reserved), int(leased)


@pytest.mark.parametrize(
    ("steps", "params", "answer", "value"),
    [
        (sql.reserve_leased("k", "h", 5, 10, 1.0, 2.0), ("k", "h", 5, 10, 1.0, 2.0), True, True),
        (sql.put_snapshot("k", b"\x00data", 3.0), ("k", 3.0, b"\x00data"), 7, 7),
    ],
    ids=["leased reservation", "snapshot"],
)
def test_an_operation_that_needed_a_transaction_is_one_statement(
    steps: Any, params: tuple[Any, ...], answer: Any, value: Any
) -> None:
    sent = next(steps)
    assert isinstance(sent, sql.Sql) and sent.params == params
    with pytest.raises(StopIteration) as done:
        steps.send(sql.Result(1, [(answer,)]))
    assert done.value.value == value


def test_the_function_gives_the_same_answers_as_the_previous_release(pg_dsn: str) -> None:
    """The same sequence of reservations on two keys, one through each path: the same
    admissions, and the same rows (the one expired lease here is given back either way:
    ``d`` needs its room; the function leaves one whose room nobody needs)."""
    import psycopg

    cases = [  # holder, amount, cap, now, until
        ("a", 4, 10, 0.0, 5.0),
        ("b", 4, 10, 1.0, 5.0),
        ("c", 4, 10, 2.0, 5.0),  # refused: 8 held, 12 > 10
        ("a", 1, 10, 3.0, 9.0),  # the same holder again: its lease grows
        ("d", 5, 10, 6.0, 9.0),  # b's lease expired at 5: given back first (a's runs to 9)
        ("e", 0, 10, 6.5, 9.0),  # nothing left under the cap, even for nothing
        ("f", 1, 3, 7.0, 9.0),  # a lower cap than what is held: refused
    ]
    with PostgresStore(pg_dsn) as store:
        store.audit_rows(limit=1)  # the schema
        answers_new = [store.reserve_leased("new", *case) for case in cases]
    with psycopg.connect(pg_dsn, autocommit=True) as conn:
        answers_old = [_previous_release_reserve(conn, "old", *case) for case in cases]
        leases = {
            key: conn.execute(
                "SELECT holder, amount, expires_at FROM guardrails_leases WHERE key = %s "
                "ORDER BY holder",
                (key,),
            ).fetchall()
            for key in ("new", "old")
        }
    assert answers_new == answers_old == [True, True, False, True, True, False, False]
    assert _budget(pg_dsn, "new") == _budget(pg_dsn, "old") == (0, 10, 10)
    assert leases["new"] == leases["old"] == [("a", 5, 9.0), ("d", 5, 9.0)]


def test_an_upgrade_while_the_previous_release_writes_never_passes_a_cap_nor_skips_a_version(
    pg_dsn: str,
) -> None:
    import psycopg

    with psycopg.connect(pg_dsn, autocommit=True) as conn:
        at_version(conn, 3)
    cap, attempts, threads = 40, 25, 4
    admitted: list[bool] = []
    versions_written: list[int] = []
    lock = threading.Lock()
    start = threading.Barrier(2 * threads)

    def old_process() -> None:
        with psycopg.connect(pg_dsn, autocommit=True) as conn:
            start.wait()
            for n in range(attempts):
                ok = _previous_release_reserve(conn, "k", uuid.uuid4().hex, 1, cap, 0.0, 1e12)
                version = _previous_release_snapshot(conn, "snap", b"old %d" % n, 1.0)
                with lock:
                    admitted.append(ok)
                    versions_written.append(version)

    with PostgresStore(pg_dsn, max_size=threads) as store:

        def new_process() -> None:
            start.wait()
            for n in range(attempts):
                ok = store.reserve_leased("k", uuid.uuid4().hex, 1, cap, 0.0, 1e12)
                version = store.put_snapshot("snap", b"new %d" % n, 2.0)
                with lock:
                    admitted.append(ok)
                    versions_written.append(version)

        workers = [threading.Thread(target=old_process) for _ in range(threads)]
        workers += [threading.Thread(target=new_process) for _ in range(threads)]
        for worker in workers:
            worker.start()
        for worker in workers:
            worker.join(timeout=120)
        assert not any(worker.is_alive() for worker in workers)
        with psycopg.connect(pg_dsn, autocommit=True) as conn:
            versions = conn.execute("SELECT version FROM guardrails_schema ORDER BY 1").fetchall()
    assert versions == [(version,) for version, _ in migrations("postgres")]
    assert len(admitted) == 2 * threads * attempts
    assert admitted.count(True) == cap  # 200 attempts of 1 on a cap of 40
    assert _budget(pg_dsn, "k") == (0, cap, cap)
    assert sorted(versions_written) == list(range(1, 2 * threads * attempts + 1))


def test_expired_leases_are_given_back_once_however_many_reservations_race(
    pg_dsn: str,
) -> None:
    """Ten leases of 3 expire; eight threads then reserve 1 each at once, each of them
    entitled to give the expired leases back: they are given back once in all."""
    with PostgresStore(pg_dsn, max_size=8) as store:
        for n in range(10):
            assert store.reserve_leased("k", f"gone-{n}", 3, 30, 0.0, 1.0)
        assert _budget(pg_dsn, "k") == (0, 30, 30)
        assert not store.reserve_leased("k", "early", 1, 30, 0.5, 2.0)  # not expired yet
        start = threading.Barrier(8)
        answers: list[bool] = []

        def reserve(n: int) -> None:
            start.wait()
            answers.append(store.reserve_leased("k", f"new-{n}", 1, 30, time.time(), 1e12))

        workers = [threading.Thread(target=reserve, args=(n,)) for n in range(8)]
        for worker in workers:
            worker.start()
        for worker in workers:
            worker.join(timeout=60)
    assert answers == [True] * 8
    assert _budget(pg_dsn, "k") == (0, 8, 8)


def test_a_reservation_that_finds_the_leases_being_given_back_asks_again(pg_dsn: str) -> None:
    """The window of the give-back on refusal: the reservation is refused as things
    stand, its DELETE of the expired leases waits for rows a racing reservation's
    give-back holds, finds them gone once that commits, and asks the cap again
    (a new snapshot: it sees the room given back) rather than answering refused."""
    import psycopg

    with PostgresStore(pg_dsn, max_size=2) as store:
        assert store.reserve_leased("k", "gone", 10, 10, 0.0, 1.0)
        with psycopg.connect(pg_dsn) as racing:  # the other give-back, its transaction open
            racing.execute("DELETE FROM guardrails_leases WHERE key = 'k' AND expires_at <= 2")
            answers: list[bool] = []
            worker = threading.Thread(
                target=lambda: answers.append(store.reserve_leased("k", "new", 4, 10, 2.0, 9.0))
            )
            worker.start()
            _until_a_backend_waits_for_a_lock(pg_dsn)
            racing.execute("UPDATE guardrails_budgets SET reserved = reserved - 10 WHERE key = 'k'")
            racing.commit()
            worker.join(timeout=60)
    assert answers == [True]
    assert _budget(pg_dsn, "k") == (0, 4, 4)


def _until_a_backend_waits_for_a_lock(dsn: str) -> None:
    import psycopg

    with psycopg.connect(dsn, autocommit=True) as conn:
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            waiting = conn.execute(
                "SELECT count(*) FROM pg_stat_activity WHERE wait_event_type = 'Lock' "
                "AND datname = current_database()"
            ).fetchone()[0]
            if waiting:
                return
            time.sleep(0.01)
    raise AssertionError("no backend waited for the racing give-back's rows")


def test_renewing_many_holders_skips_the_leases_another_transaction_holds(pg_dsn: str) -> None:
    """A lease being settled or given back is not waited for (its renewal would come to
    nothing): a renewal of many holders, which holds some of a key's leases, can then
    never wait for a give-back of that key that waits for it."""
    import psycopg

    store = PostgresStore(pg_dsn)
    try:
        for holder in ("h1", "h2", "h3"):
            assert store.reserve_leased("k", holder, 1, 10, 0.0, 5.0)
        done: list[int] = []
        with psycopg.connect(pg_dsn) as other:  # a transaction holding h2's lease
            other.execute(
                "SELECT 1 FROM guardrails_leases WHERE key = 'k' AND holder = 'h2' FOR UPDATE"
            )
            renewing = threading.Thread(
                target=lambda: done.append(store.renew_leases_of(["h1", "h2", "h3"], 50.0))
            )
            renewing.start()
            renewing.join(GENEROUS)  # answered while the other transaction still holds h2
            assert done == [2]
            other.rollback()
        # At 10.0 h2's lease has lapsed, the others were renewed: a refusal gives back h2's 1.
        assert not store.reserve_leased("k", "c", 9, 10, 10.0, 20.0)
        assert store.budget("k") == (0, 2)
        assert store.renew_leases_of(["h2"], 50.0) == 0  # given back: nothing to renew
    finally:
        store.close()
