"""PostgreSQL for async callers: the store threads and the async pool, against a real server.

Every test that takes ``path`` runs twice: through the store threads
(``offloop``, the default) and through ``PostgresStore(async_pool=True)``.
"""

from __future__ import annotations

import asyncio
import time
import uuid
from collections.abc import Callable, Iterator

import pytest

from guardrails import Guardrails, Outcome, tool
from guardrails.audit import AuditLog
from guardrails.effects import CapExceeded, PaidCall, Usage
from guardrails.effects._leases import renewer
from guardrails.store import AuditRow, PostgresStore, offloop
from guardrails.store._pg_sql import Head
from guardrails.store.offloop import off_loop
from guardrails.store.steps import finish_started
from guardrails.store.verify import verify
from guardrails.verdicts import EscapeReason, Reason

pytestmark = pytest.mark.postgres

PATHS = ["threads", "async pool"]


def _tagged(dsn: str, tag: str) -> str:
    from psycopg.conninfo import make_conninfo

    return make_conninfo(dsn, application_name=tag)


def _backends(dsn: str, tag: str, *, waiting: bool = False) -> list[int]:
    """The server processes of the connections named ``tag`` (only those waiting on a lock)."""
    import psycopg

    sql = "SELECT pid FROM pg_stat_activity WHERE application_name = %s"
    if waiting:
        sql += " AND wait_event_type = 'Lock'"
    with psycopg.connect(dsn, autocommit=True) as conn:
        return [row[0] for row in conn.execute(sql, (tag,)).fetchall()]


def _until(condition: Callable[[], bool], what: str, timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"never happened: {what}")
        time.sleep(0.01)


@pytest.fixture
def tag() -> str:
    return f"guardrails-test-{uuid.uuid4().hex[:12]}"


@pytest.fixture(params=PATHS)
def path(request: pytest.FixtureRequest) -> str:
    return str(request.param)


@pytest.fixture
def store(pg_dsn: str, tag: str, path: str) -> Iterator[PostgresStore]:
    opened = PostgresStore(_tagged(pg_dsn, tag), async_pool=path == "async pool")
    yield opened
    opened.close()


class FakeClock:
    def __init__(self) -> None:
        self.now = 1_000_000.0

    def __call__(self) -> float:
        return self.now


# -- the async path answers as the sync store does ---------------------------------------------


async def test_the_async_path_answers_every_operation_as_the_sync_store_does(pg_dsn: str) -> None:
    store = PostgresStore(pg_dsn, async_pool=True)
    path = store.async_path()
    assert path is not None
    try:
        assert await path.call("incr", "n", 2) == 2 and store.incr("n", 1) == 3
        assert await path.call("reserve", "b", 5, 10) is True
        assert await path.call("reserve", "b", 6, 10) is False
        assert await path.call("settle", "b", 5, 4) == 4
        assert await path.call("budget", "b") == store.budget("b") == (4, 0)
        assert await path.call("reserve_leased", "l", "h1", 3, 5, 1.0, 100.0) is True
        assert await path.call("reserve_leased", "l", "h2", 3, 5, 1.0, 100.0) is False
        assert await path.call("renew_leases", "h1", 200.0) == 1
        # h1's lease, renewed to 200, is still held at 150; expired at 250.
        assert await path.call("reserve_leased", "l", "h2", 3, 5, 150.0, 300.0) is False
        assert await path.call("reserve_leased", "l", "h2", 3, 5, 250.0, 300.0) is True
        assert await path.call("settle_leased", "l", "h2", 2) == 2
        assert store.budget("l") == (2, 0)
        assert await path.call("get", "k") is None
        assert await path.call("compare_and_set", "k", None, "a") is True
        assert await path.call("compare_and_set", "k", "b", "c") is False
        assert await path.call("compare_and_set", "k", "a", "c") is True
        assert store.get("k") == "c"
        claim = await path.call("claim", "i", "o1", 1.0, 50.0)
        assert claim.state == "new"
        assert (await path.call("claim", "i", "o2", 2.0, 50.0)).state == "pending"
        assert await path.call("complete", "i", "o1", '{"value": 1}', 99.0) is True
        assert tuple(await path.call("claim", "i", "o2", 3.0, 50.0)) == ("done", '{"value": 1}')
        await path.call("release", "i", "o1")  # done: not released
        assert store.claim("i", "o3", 4.0, 50.0).state == "done"
        assert await path.call("put_snapshot", "s", b"one", 1.0) == 1
        assert store.put_snapshot("s", b"two", 2.0) == 2
        latest = await path.call("snapshot", "s", None)
        assert (latest.version, latest.data) == (2, b"two")
        assert (await path.call("snapshot", "s", 1)).data == b"one"
        await path.append(AuditRow("tool_call", 1.0, call_id="a"))
        store.append(AuditRow("tool_call", 2.0, call_id="b"))
        await asyncio.gather(
            *(path.append(AuditRow("tool_call", 3.0, call_id=f"c{i}")) for i in range(40))
        )
        rows = await path.call("audit_rows", 0, 100, {})
        assert [r.call_id for r in rows[:2]] == ["a", "b"] and len(rows) == 42
        assert await path.call("audit_chain", 0, 100) == store.audit_chain(limit=100)
        assert verify(store).ok
    finally:
        await store.aclose()


# -- budgets under concurrency and cancellation ---------------------------------------------------


def _paid(store: PostgresStore, cap: float, clock: Callable[[], float] = time.time) -> PaidCall:
    return PaidCall(
        store,
        usage=lambda _: Usage(1, 1, 1.0),
        daily_cap=cap,
        estimate=1.0,
        scope=f"s-{uuid.uuid4().hex[:8]}",
        clock=clock,
    )


async def _answer() -> str:
    return "ok"


async def test_concurrent_async_callers_never_overspend_a_budget(
    store: PostgresStore, path: str
) -> None:
    paid = _paid(store, cap=37.0)
    results = await asyncio.gather(
        *(paid.acall(_answer) for _ in range(200)), return_exceptions=True
    )
    refused = [r for r in results if isinstance(r, CapExceeded)]
    assert results.count("ok") == 37 and len(refused) == 163
    assert store.budget(paid._daily_key()) == (37_000_000, 0)
    paid_rows = store.audit_rows(limit=1000, kind="paid_call")
    assert sum(r.outcome == "ok" for r in paid_rows) == 37
    assert sum(r.outcome == "limit" for r in paid_rows) == 163
    await store.aclose()


async def test_a_call_cancelled_while_its_tool_runs_gives_its_reservation_back(
    store: PostgresStore, path: str
) -> None:
    paid = _paid(store, cap=100.0)
    started = 0
    never = asyncio.Event()

    async def hangs() -> str:
        nonlocal started
        started += 1
        await never.wait()
        return "never"

    tasks = [asyncio.create_task(paid.acall(hangs)) for _ in range(20)]
    while started < 20:
        await asyncio.sleep(0.001)
    assert store.budget(paid._daily_key()) == (0, 20_000_000)
    for task in tasks:
        task.cancel()
    results = await asyncio.gather(*tasks, return_exceptions=True)
    assert all(isinstance(r, asyncio.CancelledError) for r in results)
    assert store.budget(paid._daily_key()) == (0, 0)
    assert renewer.tick() == 0  # nothing of theirs is renewed any more
    rows = store.audit_rows(limit=100, kind="paid_call")
    assert [r.exception for r in rows] == ["CancelledError"] * 20
    await store.aclose()


async def _given_back(store: PostgresStore) -> None:
    """Wait until every reservation still being made when its caller was cancelled is made
    and given back: the store thread's jobs done, their answers handed over on this loop
    (a reservation made for a caller that left starts its give-back from there), and the
    give-backs ended. Before, the give-backs started by answers the loop had not yet taken
    could still be writing when the test's schema was dropped (a deadlock, now and then)."""
    runner = off_loop(store)
    assert runner is not None
    waking = offloop._waking(asyncio.get_running_loop())
    while True:
        assert await asyncio.to_thread(runner.drain, 30)
        while waking.due or waking.inbox:  # answers posted, not all handed over yet
            await asyncio.sleep(0)
        await asyncio.sleep(0)  # the give-backs the last hand-over scheduled start
        await finish_started(store)
        if not runner._queue and not runner._busy:
            return


async def test_a_call_cancelled_anywhere_leaves_nothing_held_past_its_lease(
    store: PostgresStore, path: str
) -> None:
    clock = FakeClock()
    paid = _paid(store, cap=1000.0, clock=clock)
    key = paid._daily_key()

    async def cancelled_after(turns: int) -> None:
        task = asyncio.create_task(paid.acall(_answer))
        for _ in range(turns):
            await asyncio.sleep(0)
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)

    await asyncio.gather(*(cancelled_after(turns) for turns in range(60)))
    await _given_back(store)
    assert renewer.tick() == 0
    clock.now += paid.lease + 1  # every lease of a call that never settled has expired
    spent = 1_000_000 * sum(
        r.outcome == "ok" for r in store.audit_rows(limit=1000, kind="paid_call")
    )
    # A reservation of all the room left under the spend: expired leases are given back
    # to it, so it is admitted only if nothing is held past its lease. From a thread: a
    # pooled connection whose call was cancelled mid-transaction is rolled back by a
    # task of this loop, which a write waiting on the budget row's lock here would
    # never let run.
    assert await asyncio.to_thread(
        store.reserve_leased, key, "after", 1, spent + 1, clock.now, clock.now + 60
    )
    assert store.budget(key) == (spent, 1)  # only the reservation just made
    await store.aclose()


async def test_a_call_cancelled_while_it_reserves_gives_the_reservation_back_once_made(
    store: PostgresStore, path: str, pg_dsn: str, tag: str
) -> None:
    import psycopg

    paid = _paid(store, cap=100.0)
    key = paid._daily_key()
    store.settle(key, 0, 0)  # the budget row, which another transaction now holds
    blocker = await psycopg.AsyncConnection.connect(pg_dsn)
    await blocker.execute("SELECT * FROM guardrails_budgets WHERE key = %s FOR UPDATE", (key,))
    ran: list[bool] = []

    async def never() -> None:
        ran.append(True)

    task = asyncio.create_task(paid.acall(never))
    await asyncio.to_thread(_until, lambda: bool(_backends(pg_dsn, tag, waiting=True)), "a wait")
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task  # at once: the reservation is still waiting for the row lock
    await blocker.rollback()  # now it is made, after its caller left, and given back
    await blocker.close()
    rows: list[AuditRow] = []
    for _ in range(3000):
        rows = store.audit_rows(limit=10, kind="paid_call")
        if rows:
            break
        await asyncio.sleep(0.01)
    assert [(r.outcome, r.exception) for r in rows] == [("error", "CancelledError")]
    assert store.budget(key) == (0, 0)
    assert not ran and renewer.tick() == 0
    await store.aclose()


async def test_a_call_cancelled_again_while_it_settles_still_gives_its_reservation_back(
    store: PostgresStore, path: str
) -> None:
    paid = _paid(store, cap=100.0)
    entered = asyncio.Event()

    async def hangs() -> None:
        entered.set()
        await asyncio.Event().wait()

    task = asyncio.create_task(paid.acall(hangs))
    await entered.wait()
    task.cancel()
    await asyncio.sleep(0)  # the settlement has started
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    rows: list[AuditRow] = []
    for _ in range(3000):
        rows = store.audit_rows(limit=10, kind="paid_call")
        if rows:
            break
        await asyncio.sleep(0.01)
    assert [(r.outcome, r.exception) for r in rows] == [("error", "CancelledError")]
    assert store.budget(paid._daily_key()) == (0, 0)
    assert renewer.tick() == 0
    await store.aclose()


async def test_both_paths_keep_the_head_hint_and_the_server_hashes_when_it_is_wrong(
    pg_dsn: str,
) -> None:
    store = PostgresStore(pg_dsn, async_pool=True)
    path = store.async_path()
    assert path is not None

    def head() -> tuple[int, str]:
        chain = store.audit_chain(limit=100)
        last = chain[-1][1]
        assert last is not None
        return len(chain), last

    try:
        store.append(AuditRow("tool_call", 1.0, call_id="sync"))
        assert store._head[:2] == head() and store._head[0] == 1
        await path.append(AuditRow("tool_call", 2.0, call_id="async"))
        assert store._head[:2] == head() and store._head[0] == 2
        assert await path.call("append", AuditRow("tool_call", 3.0, call_id="call")) == 3
        assert store._head[:2] == head()
        store._head = Head(3, "0" * 64)  # a hint the locked head does not match
        await path.append(AuditRow("tool_call", 4.0, call_id="wrong hint"))
        assert store._head[:2] == head() and store._head[0] == 4
        store._head = Head(1, store._head[1])
        store.append(AuditRow("tool_call", 5.0, call_id="behind"))
        assert store._head[:2] == head() and store._head[0] == 5
        found = verify(store)
        assert found.ok and found.rows == 5, found.line()
    finally:
        await store.aclose()


# -- a connection killed in the middle of a transaction ---------------------------------------------


async def test_a_killed_connection_is_unavailable_with_a_counted_escape_and_no_returned_call_loses_its_row(
    store: PostgresStore, path: str, pg_dsn: str, tag: str
) -> None:
    import psycopg

    ran: list[str] = []

    @tool(effect=True)
    async def send(to: str) -> str:
        ran.append(to)
        return "sent"

    @tool
    async def lookup(order: str) -> str:
        return order

    audit = AuditLog(store)
    rails = Guardrails([send, lookup], hooks=[audit], recorder=[audit])
    turn = rails.turn(tenant="t", session="s")
    assert (await turn.acall("lookup", {"order": "warm"})).outcome == Outcome.OK

    # Another connection holds the chain head: the store's next append waits
    # on it inside its statement, and is killed there.
    blocker = await psycopg.AsyncConnection.connect(pg_dsn)
    await blocker.execute("SELECT * FROM guardrails_audit_head FOR UPDATE")
    calls = [
        asyncio.create_task(
            turn.acall("send", {"to": f"x{i}"})
            if i % 2
            else turn.acall("lookup", {"order": f"o{i}"})
        )
        for i in range(20)
    ]
    await asyncio.to_thread(_until, lambda: bool(_backends(pg_dsn, tag, waiting=True)), "a wait")
    with psycopg.connect(pg_dsn, autocommit=True) as admin:
        for pid in _backends(pg_dsn, tag, waiting=True):
            admin.execute("SELECT pg_terminate_backend(%s)", (pid,))
    await blocker.rollback()
    await blocker.close()
    results = await asyncio.gather(*calls)

    rows = {r.call_id: r for r in store.audit_rows(limit=1000, kind="tool_call")}
    hit = 0
    for result in results:
        missed = [e for e in result.escapes if e.reason == EscapeReason.AUDIT_UNAVAILABLE]
        if missed:  # the row could not be written: the escape says so and is counted
            hit += 1
            assert result.outcome == Outcome.OK
        elif result.outcome == Outcome.UNAVAILABLE:  # the call_started row failed: not run
            hit += 1
            assert result.reason == Reason.AUDIT_UNAVAILABLE
        else:
            assert result.outcome == Outcome.OK
            assert result.call_id in rows  # a call that returned has its row
    assert hit > 0
    unavailable = [r for r in results if r.outcome == Outcome.UNAVAILABLE]
    assert len(ran) == sum(1 for r in results if r.tool == "send") - len(unavailable)
    assert verify(store).ok
    await store.aclose()


# -- every hook that keeps state, on both paths ------------------------------------------------------


async def test_workflow_idempotency_snapshots_ceiling_and_audit_hold_on_both_paths(
    store: PostgresStore, path: str
) -> None:
    from guardrails.effects import Idempotency, Snapshots
    from guardrails.rules.session_ceiling import SessionCeiling
    from guardrails.rules.workflow import Workflow

    runs: list[str] = []

    @tool(effect=True, options={"idempotency_key": "pub-{brief}", "snapshot": lambda a: dict(a)})
    async def publish(brief: str) -> str:
        runs.append(brief)
        return f"published {brief}"

    @tool
    async def plan(brief: str) -> str:
        return "planned"

    audit = AuditLog(store)
    flow = Workflow("w", [("plan", "now publish"), ("publish", "done")], store)
    hooks = [audit, SessionCeiling(4, counter=store), flow, Idempotency(store), Snapshots(store)]
    rails = Guardrails([plan, publish], hooks=hooks, recorder=[audit])
    turn = rails.turn(tenant="t", session=f"s-{path}")
    first = await turn.acall("publish", {"brief": "b"})
    assert (first.outcome, first.reason) == (Outcome.UNAVAILABLE, Reason.OUT_OF_ORDER)
    planned = await turn.acall("plan", {"brief": "b"})
    assert planned.outcome == Outcome.OK and "now publish" in planned.content
    published = await turn.acall("publish", {"brief": "b"})
    assert published.outcome == Outcome.OK and runs == ["b"], (
        published.reason,
        published.exception,
    )
    assert flow.current(turn.context) is None  # done
    assert store.snapshot("publish") is not None
    limited = await turn.acall("plan", {"brief": "b"})  # the fourth call of the session
    assert limited.outcome == Outcome.UNAVAILABLE  # past the last step
    over = await turn.acall("plan", {"brief": "b"})
    assert over.outcome == Outcome.LIMIT
    assert len(store.audit_rows(limit=100, kind="tool_call")) == 5
    assert verify(store).ok
    await store.aclose()


# -- one group commit for sync threads and async callers -----------------------------------------


def test_sync_threads_and_async_callers_share_the_store_group_commit(pg_dsn: str) -> None:
    import threading

    from guardrails.store import offloop

    store = PostgresStore(pg_dsn, group_commit=True)
    runner = off_loop(store)
    assert runner is not None and runner.batcher is store.batcher

    def sync_writer(n: int) -> None:
        for i in range(25):
            store.append(AuditRow("tool_call", 1.0, call_id=f"sync-{n}-{i}"))

    async def async_writers() -> None:
        await asyncio.gather(
            *(
                offloop.append(store, AuditRow("tool_call", 2.0, call_id=f"a-{i}"))
                for i in range(200)
            )
        )

    threads = [threading.Thread(target=sync_writer, args=(n,)) for n in range(4)]
    for t in threads:
        t.start()
    asyncio.run(async_writers())
    for t in threads:
        t.join()
    ids = {r.call_id for r in store.audit_rows(limit=1000)}
    assert len(ids) == 300 and verify(store).ok
    store.close()


# -- closing --------------------------------------------------------------------------------------


def _connections_close(dsn: str, tag: str) -> None:
    _until(lambda: not _backends(dsn, tag), "every connection of the store closed")


def test_the_pools_close_at_close_after_the_loop_ended(pg_dsn: str, tag: str, path: str) -> None:
    store = PostgresStore(_tagged(pg_dsn, tag), async_pool=path == "async pool", min_size=2)
    paid = _paid(store, cap=100.0)

    async def use() -> None:
        await asyncio.gather(*(paid.acall(_answer) for _ in range(10)))

    asyncio.run(use())
    assert _backends(pg_dsn, tag)
    store.close()
    _connections_close(pg_dsn, tag)


def test_the_pools_close_at_close_called_from_async_code(pg_dsn: str, tag: str, path: str) -> None:
    store = PostgresStore(_tagged(pg_dsn, tag), async_pool=path == "async pool", min_size=2)
    paid = _paid(store, cap=100.0)

    async def use_and_close() -> None:
        await asyncio.gather(*(paid.acall(_answer) for _ in range(10)))
        store.close()
        await asyncio.to_thread(_connections_close, pg_dsn, tag)

    asyncio.run(use_and_close())


_GROWING_AT_THE_END = """
import asyncio, sys, time, uuid
import psycopg
import psycopg.conninfo
from guardrails.effects import PaidCall, Usage
from guardrails.store import PostgresStore, _pg_async

dsn, tag, how = sys.argv[1:]
made = []
original = _pg_async._LoopPool._made


async def slow(self, conn):
    await original(self, conn)
    made.append(conn)
    if len(made) > 1:  # growing the pool: still being made when the calls are done
        await asyncio.sleep(0.5)


def backends():
    with psycopg.connect(dsn, autocommit=True) as conn:
        sql = "SELECT count(*) FROM pg_stat_activity WHERE application_name = %s"
        return conn.execute(sql, (tag,)).fetchone()[0]


_pg_async._LoopPool._made = slow
conninfo = psycopg.conninfo.make_conninfo(dsn, application_name=tag)
store = PostgresStore(conninfo, async_pool=True, min_size=1, max_size=3)
paid = PaidCall(store, usage=lambda _: Usage(1, 1, 1.0), daily_cap=100.0, estimate=1.0,
                scope=uuid.uuid4().hex)


async def answer():
    return "ok"


async def main():
    await asyncio.gather(*(paid.acall(answer) for _ in range(10)))
    assert len(made) > 1
    if how == "close":  # from async code: every connection closes while the loop runs
        store.close()
        deadline = time.monotonic() + 30
        while await asyncio.to_thread(backends):
            assert time.monotonic() < deadline, "a connection of the pool stayed open"
            await asyncio.sleep(0.05)


asyncio.run(main())
store.close()
"""


@pytest.mark.parametrize("how", ["end", "close"])
def test_a_loop_that_ends_while_the_pool_grows_ends_and_closes_it(
    pg_dsn: str, tag: str, how: str
) -> None:
    """The pool grows while the calls wait, and its new connection is slow to finish (as on
    a loaded machine). ``end``: ``asyncio.run`` cancels the loop's tasks while a worker of
    the pool makes it; psycopg_pool's worker takes that for a failed attempt and waits for
    its next task, so the pool is closed as the loop cancels its tasks and the run ends.
    ``close``: ``store.close()`` from async code hangs up the pool's connections and closes
    it in a task of the loop; the connection it was still making closes too.
    In a process of its own: the tree before this test hung in ``asyncio.run``."""
    import subprocess
    import sys

    run = subprocess.run(
        [sys.executable, "-c", _GROWING_AT_THE_END, pg_dsn, tag, how],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert run.returncode == 0, run.stderr[-2000:]
    _connections_close(pg_dsn, tag)


def test_the_pools_close_at_aclose(pg_dsn: str, tag: str, path: str) -> None:
    store = PostgresStore(_tagged(pg_dsn, tag), async_pool=path == "async pool", min_size=2)
    paid = _paid(store, cap=100.0)

    async def use_and_close() -> None:
        await asyncio.gather(*(paid.acall(_answer) for _ in range(10)))
        await store.aclose()
        await asyncio.to_thread(_connections_close, pg_dsn, tag)

    asyncio.run(use_and_close())


def test_each_event_loop_gets_its_own_pool_and_a_closed_store_opens_again(
    pg_dsn: str, tag: str
) -> None:
    store = PostgresStore(_tagged(pg_dsn, tag), async_pool=True)
    paid = _paid(store, cap=100.0)
    for _ in range(3):  # one loop after another, as asyncio.run and test runners do
        assert asyncio.run(paid.acall(_answer)) == "ok"
    store.close()
    assert asyncio.run(paid.acall(_answer)) == "ok"
    store.close()
    _connections_close(pg_dsn, tag)
    assert store.budget(paid._daily_key()) == (4_000_000, 0)
    store.close()


def test_the_default_is_the_store_threads(pg_dsn: str) -> None:
    with PostgresStore(pg_dsn) as store:
        assert store.async_path() is None
