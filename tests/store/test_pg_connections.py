"""The connections a PostgreSQL store keeps: one per thread (and one for the
group commit's writer) between calls, within ``max_size``, given back when a
thread ends or a call fails, left alone by a forked child, closed by ``close()``."""

from __future__ import annotations

import gc
import multiprocessing
import threading
import time
import uuid
from collections.abc import Callable
from typing import Any

import pytest

from guardrails.store import AuditRow, PostgresStore, StoreUnavailable
from guardrails.store.verify import verify

pytestmark = pytest.mark.postgres

_fork = multiprocessing.get_context("fork")


def _row(n: int, who: str = "main") -> AuditRow:
    return AuditRow("tool_call", float(n), f"{who}-{n}", "acme", tool="t", outcome="ok")


def _named(pg_dsn: str) -> tuple[str, str]:
    from psycopg.conninfo import make_conninfo

    tag = f"gr_conn_{uuid.uuid4().hex[:10]}"
    return make_conninfo(pg_dsn, application_name=tag), tag


def _backends(pg_dsn: str, tag: str) -> list[int]:
    import psycopg

    with psycopg.connect(pg_dsn, autocommit=True) as admin:
        found = admin.execute(
            "SELECT pid FROM pg_stat_activity WHERE application_name = %s", (tag,)
        ).fetchall()
    return [pid for (pid,) in found]


def _until(condition: Callable[[], bool]) -> None:
    deadline = time.monotonic() + 30
    while not condition():
        assert time.monotonic() < deadline, "never happened"
        time.sleep(0.02)


def _taken(store: PostgresStore) -> int:
    """How many times a connection was taken from the store's pool."""
    return int(store._pool.get_stats().get("requests_num", 0))


def test_a_thread_keeps_its_connection_between_calls(pg_dsn: str) -> None:
    with PostgresStore(pg_dsn, max_size=2) as store:
        store.incr("warm")
        before = _taken(store)
        for n in range(50):
            store.append(_row(n))
            store.incr("k")
        assert _taken(store) == before  # not one more checkout
        assert store.incr("k", 0) == 50 and verify(store).ok


def test_the_group_commits_writer_keeps_one_connection_whichever_thread_writes(
    pg_dsn: str,
) -> None:
    with PostgresStore(pg_dsn, max_size=3, group_commit=True) as store:
        store.append(_row(0, "warm"))
        before = _taken(store)

        def work(who: str) -> None:
            for n in range(40):
                store.append(_row(n, who))

        threads = [threading.Thread(target=work, args=(f"t{i}",)) for i in range(8)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert _taken(store) == before
        assert len(store.audit_rows(limit=1000)) == 321 and verify(store).ok


def test_more_threads_than_max_size_all_get_through_and_the_server_sees_at_most_max_size(
    pg_dsn: str,
) -> None:
    dsn, tag = _named(pg_dsn)
    seen: list[int] = []
    errors: list[BaseException] = []
    with PostgresStore(dsn, max_size=3, timeout=30) as store:
        store.incr("warm")

        def work(who: str) -> None:
            try:
                for n in range(30):
                    store.append(_row(n, who))
                    store.incr("k")
                    if n == 15:
                        seen.append(len(_backends(pg_dsn, tag)))
            except BaseException as exc:
                errors.append(exc)

        threads = [threading.Thread(target=work, args=(f"t{i}",)) for i in range(12)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert errors == []
        assert store.incr("k", 0) == 360 and verify(store).ok
    assert max(seen) <= 3


def test_a_thread_that_ends_gives_its_connection_back(pg_dsn: str) -> None:
    # One connection can be kept of two; with none given back, the third thread
    # would wait for one in vain (timeout: StoreUnavailable).
    with PostgresStore(pg_dsn, max_size=2, timeout=1) as store:
        failures: list[BaseException] = []

        def once(n: int) -> None:
            try:
                store.append(_row(n))
            except BaseException as exc:
                failures.append(exc)

        for n in range(6):
            t = threading.Thread(target=once, args=(n,))
            t.start()
            t.join()
            gc.collect()
        assert failures == []
        assert len(store.audit_rows()) == 6 and verify(store).ok


def test_a_kept_connection_terminated_by_the_server_fails_one_call_and_the_next_reconnects(
    pg_dsn: str,
) -> None:
    import psycopg

    dsn, tag = _named(pg_dsn)
    with PostgresStore(dsn, max_size=2) as store:
        store.append(_row(0))
        with psycopg.connect(pg_dsn, autocommit=True) as admin:
            for pid in _backends(pg_dsn, tag):
                admin.execute("SELECT pg_terminate_backend(%s)", (pid,))
        _until(lambda: _backends(pg_dsn, tag) == [])
        with pytest.raises(StoreUnavailable):
            store.append(_row(1))
        for n in range(2, 6):
            store.append(_row(n))
        assert [r.call_id for r in store.audit_rows()] == [f"main-{n}" for n in (0, 2, 3, 4, 5)]
        assert verify(store).ok


def test_close_closes_the_connections_threads_keep_and_the_store_opens_again(
    pg_dsn: str,
) -> None:
    dsn, tag = _named(pg_dsn)
    store = PostgresStore(dsn, max_size=4)
    kept, go_on = threading.Event(), threading.Event()
    errors: list[BaseException] = []

    def idle_holder() -> None:
        try:
            store.append(_row(1, "holder"))
            kept.set()
            assert go_on.wait(30)
            store.append(_row(2, "holder"))  # after close(): a new pool, a new connection
        except BaseException as exc:
            errors.append(exc)

    holder = threading.Thread(target=idle_holder)
    holder.start()
    assert kept.wait(30)
    store.append(_row(1))
    assert _backends(pg_dsn, tag) != []
    store.close()
    _until(lambda: _backends(pg_dsn, tag) == [])  # the idle thread's kept one too
    go_on.set()
    holder.join()
    assert errors == []
    store.append(_row(2))
    assert len(store.audit_rows()) == 4 and verify(store).ok
    store.close()
    _until(lambda: _backends(pg_dsn, tag) == [])


def _child_appends(store: PostgresStore, done: Any) -> None:
    for n in range(20):
        store.append(_row(n, "child"))
    done.put(len(store.audit_rows(limit=1000)))


def test_a_forked_child_opens_its_own_and_leaves_the_parents_connection_working(
    pg_dsn: str,
) -> None:
    with PostgresStore(pg_dsn, max_size=2) as store:
        store.append(_row(0))  # the parent keeps a connection
        done = _fork.Queue()
        child = _fork.Process(target=_child_appends, args=(store, done))
        child.start()
        assert done.get(timeout=60) == 21
        child.join(30)
        assert child.exitcode == 0
        for n in range(1, 4):  # the same kept connection, still open
            store.append(_row(n))
        assert len(store.audit_rows()) == 24 and verify(store).ok


def test_threads_that_keep_a_connection_and_sit_idle_never_starve_the_others(pg_dsn: str) -> None:
    # Of two connections one is kept: the other goes round, however many
    # threads hold on to the store while doing nothing.
    with PostgresStore(pg_dsn, max_size=2, timeout=2) as store:
        idle = threading.Barrier(4)
        errors: list[BaseException] = []

        def work(who: str) -> None:
            try:
                store.append(_row(0, who))
                idle.wait(30)  # all four alive, each having used the store
                for n in range(1, 11):
                    store.append(_row(n, who))
            except BaseException as exc:
                errors.append(exc)

        threads = [threading.Thread(target=work, args=(f"t{i}",)) for i in range(4)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert errors == []
        assert len(store.audit_rows()) == 44 and verify(store).ok


def _grouped_process(dsn: str, who: int, barrier: Any, done: Any) -> None:
    store = PostgresStore(dsn, max_size=2, group_commit=True)
    store.audit_rows(limit=1)
    barrier.wait(30)

    def work(t: int) -> None:
        for n in range(25):
            store.append(_row(n, f"p{who}t{t}"))

    threads = [threading.Thread(target=work, args=(t,)) for t in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    store.close()
    done.put(who)


def test_eight_processes_of_grouped_threads_keep_one_valid_chain(pg_dsn: str) -> None:
    with PostgresStore(pg_dsn) as store:
        store.migrate()
    barrier, done = _fork.Barrier(8), _fork.Queue()
    procs = [
        _fork.Process(target=_grouped_process, args=(pg_dsn, w, barrier, done)) for w in range(8)
    ]
    for p in procs:
        p.start()
    assert sorted(done.get(timeout=120) for _ in procs) == list(range(8))
    for p in procs:
        p.join(30)
        assert p.exitcode == 0
    with PostgresStore(pg_dsn) as store:
        rows = store.audit_rows(limit=1000)
        assert len(rows) == 8 * 4 * 25 == len({r.call_id for r in rows})
        report = verify(store)
        assert report.ok and report.rows == 800
