"""Under ``acall`` no store operation runs on the event loop.

Each test gates one store method on a ``threading.Event`` that only a
coroutine on the same loop sets, once the method has started. Run on the
loop, the method would wait for a coroutine that cannot run: it gives up
after a generous timeout and fails the store call, which the test sees.
"""

from __future__ import annotations

import asyncio
import collections
import contextvars
import sys
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from guardrails import Guardrails, Outcome, tool
from guardrails.audit import AUDITED, AuditLog
from guardrails.effects import Idempotency, PaidCall, Snapshots, Usage
from guardrails.rules.session_ceiling import SessionCeiling
from guardrails.rules.workflow import Step, Workflow
from guardrails.store import AuditRow, MemoryStore, SQLiteStore, StoreUnavailable, offloop
from guardrails.store.offloop import _Job, off_loop
from guardrails.store.verify import verify
from tests.store._gated import GENEROUS, Gated, open_when_started

RUNS: list[str] = []


def _rails(store: Any) -> tuple[Guardrails, AuditLog]:
    paid = PaidCall(store, usage=lambda _: Usage(1, 2, 0.25), instance_cap=1.0)

    @tool(
        effect=True,
        options={"idempotency_key": "send-{to}", "snapshot": lambda args: {"to": args["to"]}},
    )
    async def send(to: str) -> str:
        RUNS.append(to)
        return str(await paid.acall(_reply, to))

    @tool
    def begin() -> None:
        return None

    flow = Workflow("mail", [Step("begin", "Now call send.")], store)
    audit = AuditLog(store)
    hooks = [audit, flow, Idempotency(store), Snapshots(store), SessionCeiling(50, store)]
    return Guardrails([send, begin], hooks=hooks, recorder=[audit]), audit


async def _reply(to: str) -> str:
    return f"sent to {to}"


async def _scenario(store: Any) -> tuple[list[Any], list[Any]]:
    RUNS.clear()
    rails, audit = _rails(store)
    turn = rails.turn(session="s-1", workflow="wf-1")
    calls = [("begin", {}), ("send", {"to": "a"}), ("send", {"to": "a"}), ("nope", {})]
    results = [await turn.acall(n, a) for n, a in calls]
    rows = [(r.kind, r.tool, r.outcome, r.reason, r.cost) for r in audit.rows()]
    return [(r.outcome, r.reason, r.content, r.escapes) for r in results], rows


METHODS = [
    "append",
    "get",
    "compare_and_set",
    "claim",
    "complete",
    "put_snapshot",
    "incr",
    "reserve_leased",
    "settle_leased",
]


@pytest.mark.parametrize("method", METHODS)
async def test_no_store_method_blocks_the_loop(method: str) -> None:
    expected = await _scenario(MemoryStore())
    gated = Gated(MemoryStore(), method)
    opener = asyncio.create_task(open_when_started(gated))
    try:
        got = await _scenario(gated)
    finally:
        opener.cancel()
    assert gated.started.is_set(), f"the scenario never called {method}"
    assert threading.get_ident() not in gated.threads
    assert got == expected
    assert all(outcome is not Outcome.UNAVAILABLE for outcome, *_ in got[0][:3])


@pytest.mark.parametrize("entry", ["refused", "pre_turn", "post_run"])
async def test_recorder_rows_of_the_async_entry_points_are_written_off_the_loop(
    entry: str,
) -> None:
    gated = Gated(MemoryStore(), "append")
    audit = AuditLog(gated)  # type: ignore[arg-type]
    rails = Guardrails([_plain], recorder=[audit])
    turn = rails.turn(session="s")
    opener = asyncio.create_task(open_when_started(gated))
    try:
        if entry == "refused":
            result = await turn.acall("missing", {})
            assert result.outcome is not Outcome.OK
        elif entry == "pre_turn":
            await turn.apre_turn("hello")
        else:
            await turn.apost_run("done")
    finally:
        opener.cancel()
    assert rails.recorder is not None and rails.recorder.failures == 0
    kinds = [r.kind for r in audit.rows()]  # written before the entry point returned
    assert kinds == ["tool_call" if entry == "refused" else entry]
    assert threading.get_ident() not in gated.threads


@tool
def _plain() -> str:
    return "ok"


class Counting:
    """A SQLite store that counts the rows of each commit; the first commit waits."""

    def __init__(self, inner: SQLiteStore) -> None:
        self.inner = inner
        self.batches: list[int] = []
        self.gate = threading.Event()

    def append(self, row: Any) -> int:
        self._commit(1)
        return self.inner.append(row)

    def append_many(self, rows: list[Any]) -> None:
        self._commit(len(rows))
        self.inner.append_many(rows)

    def _commit(self, rows: int) -> None:
        self.batches.append(rows)
        assert self.gate.wait(GENEROUS)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)


async def test_rows_queued_together_are_committed_together(tmp_path: Path) -> None:
    store = Counting(SQLiteStore(tmp_path / "a.db"))
    audit = AuditLog(store)  # type: ignore[arg-type]
    rails = Guardrails([_plain], hooks=[audit], recorder=[audit])
    calls = 40

    async def open_when_all_queued() -> None:
        runner = off_loop(store)
        assert runner is not None
        while not (store.batches and store.batches[0] + len(runner._queue) == calls):
            await asyncio.sleep(0.001)
        store.gate.set()

    opener = asyncio.create_task(open_when_all_queued())
    turns = [rails.turn(session=f"s-{i}") for i in range(calls)]
    results = await asyncio.gather(*(t.acall("_plain", {}) for t in turns))
    opener.cancel()
    assert all(r.outcome is Outcome.OK and AUDITED in r.flags and not r.escapes for r in results)
    # The rows that queued while the first commit ran share the next commit.
    assert sum(store.batches) == calls and len(store.batches) <= 2
    rows = list(audit.rows())
    assert sorted(r.call_id or "" for r in rows) == sorted(r.call_id for r in results)
    assert verify(store.inner).ok


async def test_a_failed_batch_fails_every_call_in_it(tmp_path: Path) -> None:
    class Down:
        def append(self, row: Any) -> int:
            raise StoreUnavailable("down")

        def append_many(self, rows: list[Any]) -> None:
            raise StoreUnavailable("down")

    audit = AuditLog(Down())  # type: ignore[arg-type]
    rails = Guardrails([_plain], hooks=[audit], recorder=[audit])
    results = await asyncio.gather(*(rails.turn(session="s").acall("_plain", {}) for _ in range(8)))
    for result in results:
        assert result.outcome is Outcome.OK
        assert [e.reason for e in result.escapes] == ["audit_unavailable"]


async def test_a_call_cancelled_while_its_row_is_queued_still_writes_the_row() -> None:
    gated = Gated(MemoryStore(), "append")
    audit = AuditLog(gated)  # type: ignore[arg-type]
    rails = Guardrails([_plain], hooks=[audit])
    task = asyncio.create_task(rails.turn(session="s").acall("_plain", {}))
    while not gated.started.is_set():
        await asyncio.sleep(0.001)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    gated.gate.set()
    runner = off_loop(gated)
    assert runner is not None and runner.drain(GENEROUS)
    assert [(r.kind, r.tool, r.outcome) for r in audit.rows()] == [("tool_call", "_plain", "ok")]


# -- lanes: store work on one thread, other jobs beside it ---------------------------------


class _ManyThreads(MemoryStore):
    """A store that may use four threads off the loop (as PostgreSQL's), and blocks."""

    off_loop_threads = 4


async def test_store_work_runs_on_one_thread_and_a_slow_guard_holds_none_of_it() -> None:
    store = _ManyThreads()
    runner = off_loop(store)
    assert runner is not None and runner.others is not None
    release = threading.Event()
    guards_in = threading.Barrier(4)  # three guards and this test: all three at once

    def guard() -> str:
        guards_in.wait(timeout=GENEROUS)
        assert release.wait(GENEROUS)
        return threading.current_thread().name

    def store_work(n: int) -> int:
        return threading.get_ident()

    guards = [runner.run(guard) for _ in range(3)]  # store_only=False: the other lane
    await asyncio.to_thread(guards_in.wait, GENEROUS)  # three slow guards hold three threads
    idents = await asyncio.gather(*(runner.run(store_work, n, store_only=True) for n in range(50)))
    rows = await asyncio.gather(
        *(runner.append(AuditRow("tool_call", float(n), call_id=f"c{n}")) for n in range(20))
    )
    assert not any(g.done() for g in guards)  # the store work went on while they waited
    assert len(set(idents)) == 1 and threading.get_ident() not in idents
    assert rows == [None] * 20 and len(store.audit_rows(limit=100)) == 20
    release.set()
    assert len(await asyncio.gather(*guards)) == 3
    assert await asyncio.to_thread(runner.drain, GENEROUS)


async def test_drain_waits_for_both_lanes() -> None:
    store = _ManyThreads()
    runner = off_loop(store)
    assert runner is not None
    release = threading.Event()
    started = threading.Event()

    def guard() -> None:
        started.set()
        assert release.wait(GENEROUS)

    pending = runner.run(guard)
    await asyncio.to_thread(started.wait, GENEROUS)
    assert not await asyncio.to_thread(runner.drain, 0.05)  # the other lane is still busy
    release.set()
    assert await asyncio.to_thread(runner.drain, GENEROUS)
    await pending


# -- waking the store threads ---------------------------------------------------------------


class _CountingCondition(threading.Condition):
    notified = 0

    def notify(self, n: int = 1) -> None:
        self.notified += 1
        super().notify(n)


async def test_no_job_is_left_waiting_when_the_worker_goes_idle_and_busy_in_turn() -> None:
    """A job put while the worker is busy is queued without the lock (the worker takes
    it with its next pass); one put while it waits wakes it. Put at either point, in
    turn, no job is left in the queue."""
    store = _ManyThreads()  # four threads: the store work's lane and three others
    runner = off_loop(store)
    assert runner is not None
    runner._cond = counting = _CountingCondition()  # before any worker starts

    def work(n: int) -> int:
        return n

    for n in range(300):  # the worker waits between jobs: each put must wake it
        assert await asyncio.wait_for(runner.run(work, n, store_only=True), GENEROUS) == n
    for burst in range(50):  # jobs put while the worker runs a pass
        started, release = threading.Event(), threading.Event()

        def busy(started: threading.Event, release: threading.Event) -> None:
            started.set()
            assert release.wait(GENEROUS)

        holding = runner.run(busy, started, release, store_only=True)
        await asyncio.to_thread(started.wait, GENEROUS)
        before = counting.notified
        wanted = list(range(burst * 20, burst * 20 + 20))
        queued = [runner.run(work, n, store_only=True) for n in wanted]
        assert counting.notified == before  # queued without waking anyone
        release.set()
        assert await asyncio.wait_for(asyncio.gather(*queued), GENEROUS) == wanted
        await holding
    for n in range(100):  # the other lane's threads, idle and woken the same way
        assert await asyncio.wait_for(runner.run(work, n), GENEROUS) == n
    assert await asyncio.to_thread(runner.drain, GENEROUS)


class _PutWhileLooking(collections.deque[Any]):
    """A job queue that, the first time an idle worker finds it empty, has another
    thread put a job at that instant: between the worker's look and its wait."""

    put: Callable[[], None] | None = None

    def __len__(self) -> int:
        found = super().__len__()
        put = self.put
        if put is not None and not found and sys._getframe(1).f_code.co_name == "_work":
            self.put = None
            put()
        return found  # what the worker saw: the put came after its look


async def test_a_job_put_while_the_idle_worker_looks_at_the_queue_is_not_left_there() -> None:
    """The put takes no lock when it finds no worker waiting: a worker is counted as
    waiting before it looks at the queue, so one that looked too early is counted."""
    store = _ManyThreads()
    runner = off_loop(store)
    assert runner is not None
    loop = asyncio.get_running_loop()
    future: asyncio.Future[str] = loop.create_future()
    job = _Job(loop, future, None, lambda: "put", (), contextvars.copy_context())
    queue = runner._queue = _PutWhileLooking()  # before any worker starts

    def put_from_another_thread() -> None:
        other = threading.Thread(target=runner._put, args=(job,))
        other.start()
        other.join(0.5)  # done at once (no lock taken), or waiting for this worker's lock

    queue.put = put_from_another_thread
    assert await asyncio.wait_for(runner.run(lambda: 1, store_only=True), GENEROUS) == 1
    assert await asyncio.wait_for(future, GENEROUS) == "put"
    assert queue.put is None  # the put was made while the worker looked


async def test_without_a_gil_every_put_takes_the_lock(monkeypatch: pytest.MonkeyPatch) -> None:
    """The put's path without the lock relies on the GIL's ordering: a build without
    one (free-threaded) takes the lock and wakes a worker for every job."""
    monkeypatch.setattr(offloop, "_GIL", False)
    store = _ManyThreads()
    runner = off_loop(store)
    assert runner is not None
    runner._cond = counting = _CountingCondition()
    started, release = threading.Event(), threading.Event()

    def busy() -> None:
        started.set()
        assert release.wait(GENEROUS)

    holding = runner.run(busy, store_only=True)
    await asyncio.to_thread(started.wait, GENEROUS)
    before = counting.notified
    queued = [runner.run(int, n, store_only=True) for n in range(5)]
    assert counting.notified == before + 5  # each put took the lock, the worker busy
    release.set()
    assert await asyncio.wait_for(asyncio.gather(*queued), GENEROUS) == list(range(5))
    await holding


def test_each_store_has_its_own_runner_whichever_was_asked_for_last() -> None:
    first, second = _ManyThreads(), _ManyThreads()
    one, other = off_loop(first), off_loop(second)
    assert one is not None and other is not None and one is not other
    for _ in range(3):
        assert off_loop(first) is one and off_loop(second) is other
        assert off_loop(MemoryStore()) is None  # a store that never blocks runs inline
    assert one.store is first and other.store is second
