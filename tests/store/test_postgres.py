"""What only the PostgreSQL store does: grouped commits, the append-only trigger, migrations."""

from __future__ import annotations

import threading
from typing import Any

import pytest

from guardrails.store import AuditRow, PostgresStore, StoreError, StoreUnavailable
from guardrails.store._migrations import migrations
from guardrails.store.testing import temporary_schema

pytestmark = pytest.mark.postgres


def test_grouped_commits_return_only_after_each_row_is_committed(pg_dsn: str) -> None:
    import psycopg

    with PostgresStore(pg_dsn, group_commit=True) as store:
        committed: list[bool] = []

        def writer(n: int) -> None:
            for i in range(25):
                store.append(AuditRow("tool_call", 1.0, call_id=f"w{n}-{i}"))
                # Seen from another connection: the row is committed, not queued.
                with psycopg.connect(pg_dsn) as conn:
                    found = conn.execute(
                        "SELECT 1 FROM guardrails_audit WHERE call_id = %s", (f"w{n}-{i}",)
                    ).fetchone()
                committed.append(found is not None)

        threads = [threading.Thread(target=writer, args=(n,)) for n in range(6)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert committed == [True] * 150
        assert len(store.audit_rows(limit=1000)) == 150


def test_grouped_commits_report_an_unreachable_server_to_every_caller() -> None:
    store = PostgresStore(
        "postgresql://postgres@127.0.0.1:1/none", group_commit=True, timeout=0.5, connect_timeout=1
    )
    with pytest.raises(StoreUnavailable):
        store.append(AuditRow("tool_call", 1.0))
    store.close()


_AWAY = "postgresql://postgres@127.0.0.1:1/none"  # nothing listens there
_TIMED = [  # every operation that takes a time, with a time the store refuses
    ("reserve_leased", ("k", "b", 5, 10, float("nan"), 100.0)),
    ("reserve_leased", ("k", "b", 5, 10, 0.0, "100")),
    ("renew_leases", ("a", None)),
    ("claim", ("i", "o", float("nan"), 100.0)),
    ("complete", ("i", "o", "r", True)),
    ("put_snapshot", ("s", b"y", float("nan"))),
]


def test_a_bad_time_is_refused_before_a_connection_is_asked_for() -> None:
    """The time check runs when the operation is called: with the server away (or the
    pool exhausted), a bad time is the developer's ``StoreError``, not the backend's
    ``StoreUnavailable`` after a wait for a connection."""
    store = PostgresStore(_AWAY, timeout=0.5, connect_timeout=1)
    try:
        for name, args in _TIMED:
            with pytest.raises(StoreError, match="time given to the store") as refused:
                getattr(store, name)(*args)
            assert type(refused.value) is StoreError
        with pytest.raises(StoreUnavailable):  # the server is away indeed
            store.budget("k")
    finally:
        store.close()


async def test_a_bad_time_is_refused_before_the_async_pool_is_asked() -> None:
    store = PostgresStore(_AWAY, async_pool=True, timeout=0.5, connect_timeout=1)
    path = store.async_path()
    assert path is not None
    try:
        for name, args in _TIMED:
            with pytest.raises(StoreError, match="time given to the store") as refused:
                await path.call(name, *args)
            assert type(refused.value) is StoreError
    finally:
        store.close()


@pytest.mark.parametrize(
    "statement",
    ["UPDATE guardrails_audit SET outcome = 'ok'", "DELETE FROM guardrails_audit"],
)
def test_audit_rows_cannot_be_changed_even_with_raw_sql(pg_dsn: str, statement: str) -> None:
    import psycopg

    with PostgresStore(pg_dsn) as store:
        store.append(AuditRow("tool_call", 1.0, outcome="error"))
    with psycopg.connect(pg_dsn) as conn, pytest.raises(psycopg.errors.RaiseException):
        conn.execute(statement)


def test_two_stores_migrate_one_schema_once(pg_dsn: str) -> None:
    import psycopg

    stores = [PostgresStore(pg_dsn) for _ in range(4)]
    threads = [threading.Thread(target=s.incr, args=("k",)) for s in stores]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert stores[0].incr("k", 0) == 4
    for s in stores:
        s.close()
    with psycopg.connect(pg_dsn) as conn:
        latest = migrations("postgres")[-1][0]
        assert conn.execute("SELECT COUNT(*) FROM guardrails_schema").fetchone() == (latest,)


def test_threads_that_first_use_a_new_store_wait_for_its_migration(
    pg_dsn: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The first thread opens the pool and migrates; a thread that comes while
    # it migrates must wait for it, not query tables that do not exist yet.
    import guardrails.store.postgres as module

    migrating, go_on = threading.Event(), threading.Event()
    real = module._migrate

    def held_migration(conn: Any) -> None:
        migrating.set()
        assert go_on.wait(30)
        real(conn)

    monkeypatch.setattr(module, "_migrate", held_migration)
    errors: list[BaseException] = []

    def use(i: int) -> None:
        try:
            if i % 2:
                store.append(AuditRow("tool_call", float(i), tool="t"))
            else:
                store.incr(f"k{i}")
        except BaseException as exc:
            errors.append(exc)

    with temporary_schema(pg_dsn) as fresh:
        store = PostgresStore(fresh)
        first = threading.Thread(target=use, args=(0,))
        first.start()
        assert migrating.wait(30)
        later = [threading.Thread(target=use, args=(i,)) for i in range(1, 7)]
        for t in later:
            t.start()
        for t in later:
            t.join(0.5)  # they wait for the migration (or, wrongly, failed already)
        go_on.set()
        for t in [first, *later]:
            t.join()
        store.close()
    assert errors == []
