"""The connections of a PostgreSQL store: out of the pool between calls, idle
on one list any thread takes from, never owned by a thread that does nothing,
handed to a thread that waits for the pool, given back when a call fails,
left alone by a forked child, closed by ``close()``."""

from __future__ import annotations

import multiprocessing
import signal
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
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


def _backends(pg_dsn: str, tag: str, *, waiting_on_a_lock: bool = False) -> list[int]:
    import psycopg

    with psycopg.connect(pg_dsn, autocommit=True) as admin:
        found = admin.execute(
            "SELECT pid FROM pg_stat_activity WHERE application_name = %s "
            "AND (NOT %s OR wait_event_type = 'Lock')",
            (tag, waiting_on_a_lock),
        ).fetchall()
    return [pid for (pid,) in found]


def _until(condition: Callable[[], bool]) -> None:
    deadline = time.monotonic() + 30
    while not condition():
        assert time.monotonic() < deadline, "never happened"
        time.sleep(0.02)


def _stat(store: PostgresStore, name: str) -> int:
    """A counter of the store's pool (``requests_num``: connections taken from it)."""
    return int(store._pool.get_stats().get(name, 0))


@contextmanager
def _counter_locked(pg_dsn: str, key: str) -> Iterator[None]:
    """The counter ``key`` row-locked by another transaction: a store's ``incr(key)``
    holds its connection, waiting, until the block ends."""
    import psycopg

    with psycopg.connect(pg_dsn) as admin:  # not autocommit: the lock lasts until commit
        admin.execute(
            "INSERT INTO guardrails_counters (key, value) VALUES (%s, 0) "
            "ON CONFLICT (key) DO UPDATE SET value = guardrails_counters.value",
            (key,),
        )
        yield


def _at_once(store: PostgresStore, dsn: str, tag: str, n: int) -> list[BaseException]:
    """``n`` threads each hold a connection at the same time (all waiting on one row
    lock); the errors they met once the lock is gone."""
    key = f"held-{uuid.uuid4().hex[:8]}"
    store.incr(key, 0)  # the row exists, so every thread waits on its lock
    errors: list[BaseException] = []

    def hold() -> None:
        try:
            store.incr(key)
        except BaseException as exc:
            errors.append(exc)

    threads = [threading.Thread(target=hold) for _ in range(n)]
    with _counter_locked(dsn, key):
        for t in threads:
            t.start()
        _until(lambda: len(_backends(dsn, tag, waiting_on_a_lock=True)) + len(errors) >= n)
    for t in threads:
        t.join()
    if not errors:
        assert store.incr(key, 0) == n
    return errors


def test_a_threads_successive_calls_reuse_one_idle_connection(pg_dsn: str) -> None:
    with PostgresStore(pg_dsn, max_size=2) as store:
        store.incr("warm")
        before = _stat(store, "requests_num")
        for n in range(50):
            store.append(_row(n))
            store.incr("k")
        assert _stat(store, "requests_num") == before  # not one more checkout
        assert store.incr("k", 0) == 50 and verify(store).ok


def test_the_group_commits_writes_reuse_an_idle_connection_whichever_thread_writes(
    pg_dsn: str,
) -> None:
    with PostgresStore(pg_dsn, max_size=3, group_commit=True) as store:
        store.append(_row(0, "warm"))
        before = _stat(store, "requests_num")

        def work(who: str) -> None:
            for n in range(40):
                store.append(_row(n, who))

        threads = [threading.Thread(target=work, args=(f"t{i}",)) for i in range(8)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert _stat(store, "requests_num") == before
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


def test_forty_threads_on_four_connections_all_finish_and_each_makes_progress_while_others_run(
    pg_dsn: str,
) -> None:
    # A short pool timeout: a thread left waiting while connections idle (or are
    # owned by threads doing nothing) fails with StoreUnavailable.
    calls, threads = 25, 40
    done: list[tuple[int, int]] = []  # (thread, call), in the order calls ended
    errors: list[BaseException] = []
    with PostgresStore(pg_dsn, max_size=4, timeout=2) as store:
        store.incr("warm")
        start = threading.Barrier(threads)

        def work(who: int) -> None:
            try:
                start.wait(30)
                for n in range(calls):
                    store.incr(f"k{who}")
                    done.append((who, n))
            except BaseException as exc:
                errors.append(exc)

        pool = [threading.Thread(target=work, args=(i,)) for i in range(threads)]
        for t in pool:
            t.start()
        for t in pool:
            t.join()
        assert errors == []
        assert [store.incr(f"k{i}", 0) for i in range(threads)] == [calls] * threads
        assert _stat(store, "requests_errors") == 0  # not one pool timeout
        assert _stat(store, "requests_queued") > 0  # threads did wait for the pool
    first_finished = min(i for i, (_, n) in enumerate(done) if n == calls - 1)
    started = {who for who, _ in done[:first_finished]}
    assert started == set(range(threads))  # every thread got calls through before any ended


@pytest.mark.parametrize("max_size", [1, 2])
def test_a_thread_waiting_for_the_pool_gets_a_connection_another_thread_is_done_with(
    pg_dsn: str, max_size: int
) -> None:
    # With nothing handed over, a waiter would sit out the 2 s timeout while the
    # threads that have a connection keep taking it back from the idle list.
    errors: list[BaseException] = []
    with PostgresStore(pg_dsn, max_size=max_size, timeout=2) as store:
        store.incr("warm")

        def work(who: int) -> None:
            try:
                for n in range(60):
                    store.append(_row(n, f"t{who}"))
            except BaseException as exc:
                errors.append(exc)

        threads = [threading.Thread(target=work, args=(i,)) for i in range(6)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert errors == []
        assert _stat(store, "requests_errors") == 0
        assert _stat(store, "requests_queued") > 0
        assert len(store.audit_rows(limit=1000)) == 360 and verify(store).ok


def test_a_pool_with_no_connection_free_in_time_fails_that_call_only(pg_dsn: str) -> None:
    # The pool timing out means it is busy, not that the server went away: the
    # call that waited fails, and the pool, with the calls running on it, stays.
    dsn, tag = _named(pg_dsn)
    with PostgresStore(dsn, max_size=1, timeout=0.2) as store:
        store.incr("warm")
        pool = store._pool
        key = f"held-{uuid.uuid4().hex[:8]}"
        store.incr(key, 0)
        held: list[int] = []
        with _counter_locked(pg_dsn, key):
            holder = threading.Thread(target=lambda: held.append(store.incr(key)))
            holder.start()
            _until(lambda: len(_backends(pg_dsn, tag, waiting_on_a_lock=True)) == 1)
            with pytest.raises(StoreUnavailable):
                store.incr("other")  # the only connection is busy past the timeout
            assert store._pool is pool
        holder.join()
        assert held == [1]  # the call that held the connection finished on it
        assert store.incr("other") == 1 and store._pool is pool


def test_an_idle_connection_goes_back_through_the_pool_once_its_round_is_due(
    pg_dsn: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The pool's own checks (max_lifetime, max_idle, reset) run when a
    # connection is given back: one kept on the idle list still meets them.
    from guardrails.store import postgres

    with PostgresStore(pg_dsn, max_size=2) as store:
        store.incr("warm")
        taken = _stat(store, "requests_num")
        for _ in range(20):
            store.incr("k")
        assert _stat(store, "requests_num") == taken  # reused from the idle list
    monkeypatch.setattr(postgres, "ROUND_TRIP_TO_POOL", 0.0)  # due as soon as taken
    with PostgresStore(pg_dsn, max_size=2) as store:
        store.incr("warm")
        taken = _stat(store, "requests_num")
        for _ in range(20):
            store.incr("k")
            assert store._idle == []
        assert _stat(store, "requests_num") == taken + 20


def test_a_thread_that_did_calls_and_sleeps_holds_no_connection(pg_dsn: str) -> None:
    # Others then hold every connection of the pool at once; a connection owned by
    # the sleeper would leave one of them waiting out the timeout.
    dsn, tag = _named(pg_dsn)
    with PostgresStore(dsn, max_size=3, timeout=1) as store:
        worked, wake = threading.Event(), threading.Event()

        def sleeper() -> None:
            for n in range(5):
                store.append(_row(n, "sleeper"))
                store.incr("k")
            worked.set()
            wake.wait(60)

        asleep = threading.Thread(target=sleeper)
        asleep.start()
        try:
            assert worked.wait(30)
            assert _at_once(store, dsn, tag, 3) == []
            assert _stat(store, "requests_errors") == 0
        finally:
            wake.set()
            asleep.join()


def test_idle_connections_terminated_by_the_server_fail_one_call_at_most_and_the_next_works(
    pg_dsn: str,
) -> None:
    import psycopg

    dsn, tag = _named(pg_dsn)
    with PostgresStore(dsn, max_size=3) as store:
        store.append(_row(0))
        assert _at_once(store, dsn, tag, 3) == []
        assert len(store._idle) == 3  # three idle connections, all about to be killed
        with psycopg.connect(pg_dsn, autocommit=True) as admin:
            for pid in _backends(pg_dsn, tag):
                admin.execute("SELECT pg_terminate_backend(%s)", (pid,))
        _until(lambda: _backends(pg_dsn, tag) == [])
        failed = 0
        for n in range(1, 7):
            try:
                store.append(_row(n))
            except StoreUnavailable:
                failed += 1
                assert n == 1, "only the first call may fail"
        assert failed <= 1
        ids = [r.call_id for r in store.audit_rows()]
        assert ids[-5:] == [f"main-{n}" for n in range(2, 7)] and verify(store).ok


class _Killed(BaseException):
    """What kills a thread mid-call (``SystemExit``, a signal handler's exception)."""


def test_a_call_killed_mid_statement_gives_its_connection_back(pg_dsn: str) -> None:
    # One connection and a short timeout: kept by the killed call, it would make
    # the next call time out.
    with PostgresStore(pg_dsn, max_size=1, timeout=2) as store:
        store.incr("victim", 0)

        def kill(*_: Any) -> None:
            raise _Killed

        previous = signal.signal(signal.SIGALRM, kill)
        try:
            with _counter_locked(pg_dsn, "victim"), pytest.raises(_Killed):
                signal.setitimer(signal.ITIMER_REAL, 0.3)
                store.incr("victim")  # waits on the lock until the signal kills it
        finally:
            signal.setitimer(signal.ITIMER_REAL, 0)
            signal.signal(signal.SIGALRM, previous)
        assert store._out == set() and store._idle == []  # back in the pool, not idle
        assert store.incr("victim") in (1, 2)  # the killed one may have committed
        assert _stat(store, "requests_errors") == 0


def test_a_call_that_fails_gives_its_connection_to_the_pool_not_the_idle_list(
    pg_dsn: str,
) -> None:
    with PostgresStore(pg_dsn, max_size=1, timeout=2) as store:
        store.incr("warm")
        assert len(store._idle) == 1
        for _ in range(3):
            with pytest.raises(StoreUnavailable):
                store.incr("k", object())  # type: ignore[arg-type]  # the driver refuses it
            assert store._out == set() and store._idle == []
        assert store.incr("k") == 1
        assert _stat(store, "requests_errors") == 0


def test_close_closes_idle_connections_and_the_store_opens_again(pg_dsn: str) -> None:
    dsn, tag = _named(pg_dsn)
    store = PostgresStore(dsn, max_size=4)
    used, go_on = threading.Event(), threading.Event()
    errors: list[BaseException] = []

    def idle_thread() -> None:
        try:
            store.append(_row(1, "idle"))
            used.set()
            assert go_on.wait(30)
            store.append(_row(2, "idle"))  # after close(): a new pool, a new connection
        except BaseException as exc:
            errors.append(exc)

    idle = threading.Thread(target=idle_thread)
    idle.start()
    assert used.wait(30)
    assert _at_once(store, dsn, tag, 3) == []
    assert _backends(pg_dsn, tag) != []
    store.close()
    _until(lambda: _backends(pg_dsn, tag) == [])
    go_on.set()
    idle.join()
    assert errors == []
    store.append(_row(2))
    assert len(store.audit_rows()) == 3 and verify(store).ok
    store.close()
    _until(lambda: _backends(pg_dsn, tag) == [])


def test_a_call_running_during_close_fails_with_store_unavailable(pg_dsn: str) -> None:
    dsn, tag = _named(pg_dsn)
    store = PostgresStore(dsn, max_size=2)
    store.incr("held", 0)
    failed: list[BaseException] = []

    def running() -> None:
        try:
            store.incr("held")
        except BaseException as exc:
            failed.append(exc)

    with _counter_locked(pg_dsn, "held"):
        call = threading.Thread(target=running)
        call.start()
        _until(lambda: len(_backends(pg_dsn, tag, waiting_on_a_lock=True)) == 1)
        store.close()
        call.join(30)
    assert not call.is_alive()
    assert [type(e) for e in failed] == [StoreUnavailable]
    _until(lambda: _backends(pg_dsn, tag) == [])
    store.close()


def _child_appends(store: PostgresStore, done: Any, close_first: bool) -> None:
    if close_first:  # before using the store: the connections it lists are the parent's
        store.close()
    for n in range(20):
        store.append(_row(n, "child"))
    done.put(len(store.audit_rows(limit=1000)))
    store.close()


@pytest.mark.parametrize("close_first", [False, True])
def test_a_forked_child_opens_its_own_and_leaves_the_parents_connections_working(
    pg_dsn: str, close_first: bool
) -> None:
    dsn, tag = _named(pg_dsn)
    with PostgresStore(dsn, max_size=3) as store:
        store.append(_row(0))
        assert _at_once(store, dsn, tag, 2) == []  # the parent has two idle connections
        parents = sorted(c.conn.info.backend_pid for c in store._idle)
        done = _fork.Queue()
        child = _fork.Process(target=_child_appends, args=(store, done, close_first))
        child.start()
        assert done.get(timeout=60) == 21
        child.join(30)
        assert child.exitcode == 0
        assert sorted(c.conn.info.backend_pid for c in store._idle) == parents
        assert set(parents) <= set(_backends(pg_dsn, tag))  # still open
        for n in range(1, 4):  # on the same idle connections
            store.append(_row(n))
        assert _stat(store, "requests_errors") == 0
        assert len(store.audit_rows()) == 24 and verify(store).ok


def _child_counts(store: PostgresStore, done: Any) -> None:
    done.put(store.incr("child"))


def test_a_child_forked_while_the_stores_lock_is_held_uses_the_store(pg_dsn: str) -> None:
    # The lock is taken twice per call: a fork from a process whose other
    # threads use the store finds it held now and then. Held in the child by a
    # thread that is not there, it would never be released.
    with PostgresStore(pg_dsn, max_size=2) as store:
        store.incr("child", 0)
        done = _fork.Queue()
        with store._lock:
            child = _fork.Process(target=_child_counts, args=(store, done))
            child.start()
        try:
            assert done.get(timeout=30) == 1
        finally:
            child.join(5)
            if child.is_alive():
                child.kill()
        assert child.exitcode == 0
        assert store.incr("child") == 2


def test_threads_that_used_the_store_and_sit_idle_never_starve_the_others(pg_dsn: str) -> None:
    # Both connections go round, however many threads hold on to the store
    # while doing nothing.
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
