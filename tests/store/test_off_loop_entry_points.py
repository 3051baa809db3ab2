"""What else the async entry points do with a store, off the event loop.

As in ``test_off_loop.py``: each store method is gated on a ``threading.Event``
that only a coroutine of the caller's loop sets, once the method has started.
Run on the loop, the method would wait for a coroutine that cannot run: it
gives up after a generous timeout and fails the store call, which the test sees.
"""

from __future__ import annotations

import asyncio
import contextvars
import threading
from collections.abc import Callable
from typing import Any

import pytest

from guardrails import Guardrails, Outcome, _fair, guard, tool
from guardrails.audit import AuditLog
from guardrails.effects import PaidCall, Usage
from guardrails.rules import required_action
from guardrails.rules.session_ceiling import SessionCeiling
from guardrails.rules.workflow import Step, Workflow
from guardrails.store import MemoryStore, offloop
from guardrails.store.offloop import WAKE_CHUNK, off_loop
from tests.store._gated import GENEROUS, Gated, check, opened


@tool
def search(query: str) -> str:
    return query


@tool
def begin() -> str:
    return "begun"


async def test_the_session_ceiling_is_read_off_the_loop_at_pre_turn() -> None:
    gated = Gated(MemoryStore(), "incr")
    ceiling = SessionCeiling(1, gated)  # type: ignore[arg-type]
    rails = Guardrails([search], [ceiling.at_pre_turn()])
    gated.inner.incr("tool_calls::s", 1)  # one call so far: the ceiling is reached
    decision = await opened(gated, rails.turn(session="s").apre_turn("more"))
    check(gated)
    assert decision.offered == () and not decision.escapes


async def test_the_workflow_phase_is_read_off_the_loop_at_pre_turn() -> None:
    gated = Gated(MemoryStore(), "get")
    flow = Workflow("w", [Step("begin", "Now search."), Step("search", "Done.")], gated)  # type: ignore[arg-type]
    rails = Guardrails([search, begin], [flow.pre_turn_guard()])
    decision = await opened(gated, rails.turn(session="s").apre_turn("go"))
    check(gated)
    assert decision.offered == ("begin",) and not decision.escapes


async def test_the_backstop_row_is_written_off_the_loop() -> None:
    gated = Gated(MemoryStore(), "append")
    audit = AuditLog(gated)  # type: ignore[arg-type]
    rule = required_action("begin", when=lambda run: True)
    rails = Guardrails([begin], [rule], recorder=[audit])
    report = await opened(gated, rails.turn(session="s").apost_run("done"))
    check(gated)
    assert [a.outcome for a in report.actions] == [Outcome.OK]
    assert rails.recorder is not None and rails.recorder.failures == 0
    assert [r.kind for r in audit.rows()] == ["tool_call", "backstop", "post_run"]


@pytest.mark.parametrize("stage", ["guard", "tool"])
async def test_a_cancelled_call_is_recorded_off_the_loop(stage: str) -> None:
    gated = Gated(MemoryStore(), "append")
    audit = AuditLog(gated)  # type: ignore[arg-type]
    entered = asyncio.Event()

    @guard
    async def slow_guard(_: Any) -> Any:
        entered.set()
        await asyncio.Event().wait()  # until cancelled

    @tool
    async def slow_tool() -> str:
        entered.set()
        await asyncio.Event().wait()
        return "never"

    if stage == "guard":
        rails = Guardrails([begin], [slow_guard], hooks=[audit], recorder=[audit])
        name = "begin"
    else:
        rails = Guardrails([slow_tool], hooks=[audit], recorder=[audit])
        name = "slow_tool"
    task = asyncio.create_task(rails.turn(session="s").acall(name, {}))

    async def cancel_when_entered() -> None:
        await entered.wait()
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task

    await opened(gated, cancel_when_entered())
    check(gated)
    rows = [(r.kind, r.outcome, r.reason) for r in audit.rows()]
    assert rows == [("tool_call", "unavailable", "interrupted")]


async def test_a_cancelled_call_is_still_recorded_when_cancelled_again() -> None:
    gated = Gated(MemoryStore(), "append")
    audit = AuditLog(gated)  # type: ignore[arg-type]
    entered = asyncio.Event()

    @tool
    async def slow_tool() -> str:
        entered.set()
        await asyncio.Event().wait()
        return "never"

    rails = Guardrails([slow_tool], hooks=[audit], recorder=[audit])
    task = asyncio.create_task(rails.turn(session="s").acall("slow_tool", {}))
    await entered.wait()
    task.cancel()
    while not gated.started.is_set():  # the interrupted row waits at the store
        await asyncio.sleep(0.001)
    task.cancel()  # and the caller is cancelled again meanwhile
    with pytest.raises(asyncio.CancelledError):
        await task
    gated.gate.set()
    runner = off_loop(gated)
    assert runner is not None and runner.drain(GENEROUS)
    for _ in range(100):  # the recording finishes in its own task on this loop
        if [r.kind for r in audit.rows()] == ["tool_call"]:
            break
        await asyncio.sleep(0.001)
    assert [(r.kind, r.reason) for r in audit.rows()] == [("tool_call", "interrupted")]


async def test_a_paid_call_cancelled_while_it_runs_gives_its_reservation_back_off_the_loop() -> (
    None
):
    gated = Gated(MemoryStore(), "settle_leased")
    paid = PaidCall(gated, usage=lambda _: Usage(cost=0.5), daily_cap=1.0)  # type: ignore[arg-type]
    entered = asyncio.Event()

    async def hangs() -> None:
        entered.set()
        await asyncio.Event().wait()

    task = asyncio.create_task(paid.acall(hangs))

    async def cancel_when_entered() -> None:
        await entered.wait()
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task

    await opened(gated, cancel_when_entered())
    check(gated)
    assert paid.spent_today() == 0.0
    assert gated.inner.budget(paid._daily_key()) == (0, 0)


def _iterations_taking(share: float) -> Callable[[], float]:
    """A clock for the loop's drain of answers (read once per drain, once per iteration):
    each reading ``share`` of the loop's slice after the last."""
    step, now = share * _fair.DEFAULT_SLICE, [0.0]

    def clock() -> float:
        now[0] += step
        return now[0]

    return clock


_STEADY = 0.95
"""Iterations that take this share of the slice: the chunk stays as it is (a share of
``WAKE_CHUNK / (WAKE_CHUNK + 1)`` or less would grow it, more than 1 shrink it)."""


async def test_answers_of_one_pass_wake_their_callers_a_chunk_per_iteration() -> None:
    offloop._waking(asyncio.get_running_loop()).clock = _iterations_taking(_STEADY)

    class Plain:
        """Any store that may block: its operations get a thread of their own."""

    store = Plain()
    first = threading.Event()
    release = threading.Event()
    log: list[Any] = []
    calls = 2 * WAKE_CHUNK + 7

    def job(n: int) -> int:
        if n == 0:
            first.set()
            assert release.wait(GENEROUS)
        return n

    async def caller(n: int) -> None:
        log.append(await offloop.run(store, job, n))

    async def app(done: asyncio.Event) -> None:
        while not done.is_set():
            log.append("app")
            await asyncio.sleep(0)

    tasks = [asyncio.create_task(caller(0))]
    while not first.is_set():  # the store thread holds job 0; the others queue behind it
        await asyncio.sleep(0.001)
    tasks += [asyncio.create_task(caller(n)) for n in range(1, calls)]
    await asyncio.sleep(0)  # every caller has queued its job
    runner = off_loop(store)
    assert runner is not None and len(runner._queue) == calls - 1
    done = asyncio.Event()
    other = asyncio.create_task(app(done))
    release.set()  # the thread answers job 0, then all the others in one pass
    await asyncio.gather(*tasks)
    done.set()
    await other
    runs: list[list[int]] = [[]]
    for entry in log:
        if entry == "app":
            runs.append([])
        else:
            runs[-1].append(entry)
    # Job 0 was answered in a pass of its own: its caller wakes alone, or with the
    # first chunk when the second pass's answers reached the loop before it woke.
    woken = [run for run in runs if run and run != [0]]
    assert sorted(n for run in woken for n in run if n != 0) == list(range(1, calls))
    assert len(woken) == 3
    assert all(len(run) == WAKE_CHUNK for run in woken[:-1]) and len(woken[-1]) <= WAKE_CHUNK


async def test_a_paid_call_cancelled_while_it_reserves_gives_the_reservation_back() -> None:
    from guardrails.effects._leases import renewer

    gated = Gated(MemoryStore(), "reserve_leased")
    paid = PaidCall(gated, usage=lambda _: Usage(cost=0.5), daily_cap=1.0, estimate=0.5)  # type: ignore[arg-type]
    ran: list[bool] = []

    async def never() -> None:
        ran.append(True)

    task = asyncio.create_task(paid.acall(never))
    while not gated.started.is_set():  # the reservation waits at the store
        await asyncio.sleep(0.001)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    gated.gate.set()  # now it is made, after its caller left
    runner = off_loop(gated)
    assert runner is not None
    for _ in range(1000):  # given back by a job the loop queues once the reservation is made
        if runner.drain(GENEROUS) and gated.inner.budget(paid._daily_key()) == (0, 0):
            break
        await asyncio.sleep(0.001)
    assert gated.inner.budget(paid._daily_key()) == (0, 0)
    assert not ran and not renewer._held
    assert [r.reason for r in gated.inner.audit_rows(kind="paid_call")] == [None]


async def test_answers_from_several_store_threads_share_one_chunk_per_iteration() -> None:
    loop = asyncio.get_running_loop()
    offloop._waking(loop).clock = _iterations_taking(_STEADY)
    futures = [loop.create_future() for _ in range(3 * WAKE_CHUNK)]
    passes = [futures[: 2 * WAKE_CHUNK], futures[2 * WAKE_CHUNK :]]
    for one_pass in passes:  # two threads' passes, both answered before the loop turns
        offloop._answer([(offloop._Job(loop, f), True, n) for n, f in enumerate(one_pass)])
    settled: list[int] = []
    for _ in range(10):
        if all(f.done() for f in futures):
            break
        await asyncio.sleep(0)  # one iteration of the loop
        settled.append(sum(f.done() for f in futures) - sum(settled))
    assert settled == [WAKE_CHUNK, WAKE_CHUNK, WAKE_CHUNK]


async def _chunks(loop: asyncio.AbstractEventLoop, answers: int) -> list[int]:
    """How many of ``answers`` posted at once each iteration of the loop settles."""
    futures = [loop.create_future() for _ in range(answers)]
    offloop._answer([(offloop._Job(loop, f), True, n) for n, f in enumerate(futures)])
    settled: list[int] = []
    while not all(f.done() for f in futures):
        await asyncio.sleep(0)  # one iteration of the loop
        settled.append(sum(f.done() for f in futures) - sum(settled))
    return settled


@pytest.mark.parametrize(
    ("share", "expected"),
    [
        (0.0, [8, 16, 32, 64, 64, 16]),  # cheap steps: twice as many each time, 64 at most
        (_STEADY, [8] * 25),
        (0.5, [8, 16, 32, 64, 64, 16]),  # (half the slice or less: twice as many)
        (2.0, [8, 4, 2] + [1] * 186),  # costly steps: fewer each time, one at least
    ],
)
async def test_the_answers_an_iteration_settles_keep_the_iterations_within_the_slice(
    share: float, expected: list[int]
) -> None:
    """The first iteration of a series wakes ``WAKE_CHUNK`` callers; each later one as
    many as keep the iterations within the loop's slice, as the admission gate does:
    twice as many after one that took half of it or less, fewer after one over it."""
    loop = asyncio.get_running_loop()
    waking = offloop._waking(loop)
    waking.clock = _iterations_taking(share)
    assert await _chunks(loop, 200) == expected
    assert waking.chunk == WAKE_CHUNK and waking.drained is None  # the series ended
    assert (await _chunks(loop, 24))[0] == WAKE_CHUNK  # and the next starts afresh


async def test_answers_posted_while_a_wake_up_is_due_ride_along_without_waking_again(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    loop = asyncio.get_running_loop()
    woken: list[object] = []
    wake = loop.call_soon_threadsafe

    def counted(callback: Any, *args: Any) -> Any:
        woken.append(callback)
        return wake(callback, *args)

    monkeypatch.setattr(loop, "call_soon_threadsafe", counted)
    waking = offloop._Waking()
    futures = [loop.create_future() for _ in range(40)]

    def post_all() -> None:  # forty passes' answers, while the loop cannot take any
        for n, future in enumerate(futures):
            waking.post(loop, [(offloop._Job(loop, future), True, n)])

    thread = threading.Thread(target=post_all)
    thread.start()
    thread.join()  # (on the loop's thread: the loop waits meanwhile)
    assert len(woken) == 1
    assert await asyncio.gather(*futures) == list(range(40))
    assert not waking.due and not waking.inbox
    waking.post(loop, [(offloop._Job(loop, loop.create_future()), True, 0)])  # wakes it again
    assert len(woken) == 2


class _Stop(BaseException):
    """A stop a job passes on (as KeyboardInterrupt would), without stopping the test's loop."""


async def test_a_worker_ended_by_a_stop_is_replaced_by_the_next_job(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(threading, "excepthook", lambda args: None)  # the stop ends the thread

    class Plain:
        """Any store that may block: its operations get a thread of their own."""

    store = Plain()

    def stop() -> None:
        raise _Stop

    with pytest.raises(_Stop):
        await offloop.run(store, stop)
    runner = off_loop(store)
    assert runner is not None
    waited = 0.0
    while runner._workers:  # the worker takes itself out as it ends
        assert waited < GENEROUS, "the ended worker is still counted"
        await asyncio.sleep(0.001)
        waited += 0.001
    assert await offloop.run(store, lambda: 7) == 7
    assert len(runner._workers) == 1 and runner._workers[0].is_alive()


async def test_a_reservation_given_back_for_a_cancelled_caller_is_recorded_as_its_call() -> None:
    gated = Gated(MemoryStore(), "reserve_leased")
    paid = PaidCall(gated, usage=lambda _: Usage(cost=0.5), daily_cap=1.0, estimate=0.5)  # type: ignore[arg-type]
    audit = AuditLog(gated)  # type: ignore[arg-type]

    @tool
    async def charged() -> str:
        return str(await paid.acall(search.fn, "q"))

    rails = Guardrails([charged], hooks=[audit], recorder=[audit])
    task = asyncio.create_task(rails.turn(tenant="acme", session="s-9").acall("charged", {}))
    while not gated.started.is_set():  # the reservation waits at the store
        await asyncio.sleep(0.001)
    task.cancel()
    await asyncio.sleep(0)  # the caller has left; its interrupted row queues behind the gate
    gated.gate.set()
    with pytest.raises(asyncio.CancelledError):
        await task
    runner = off_loop(gated)
    assert runner is not None
    for _ in range(1000):
        if runner.drain(GENEROUS) and gated.inner.audit_rows(kind="paid_call"):
            break
        await asyncio.sleep(0.001)
    [given_back] = gated.inner.audit_rows(kind="paid_call")
    [call] = gated.inner.audit_rows(kind="tool_call")
    # Run in the cancelled caller's context: the row belongs to its call.
    assert (given_back.call_id, given_back.session) == (call.call_id, "s-9")
    assert call.reason == "interrupted"
    assert gated.inner.budget(paid._daily_key()) == (0, 0)


class _Held:
    """Any store that may block; its jobs wait until ``release`` is set."""

    def __init__(self) -> None:
        self.started = threading.Event()
        self.release = threading.Event()

    def job(self, value: Any) -> Any:
        self.started.set()
        assert self.release.wait(GENEROUS)
        if isinstance(value, Exception):
            raise value
        return value


async def _cancelled_while_held(held: _Held, value: Any, lost: Any) -> None:
    """Submit ``held.job(value)``, cancel its future while the job runs, then let it end."""
    future = offloop.submit(held, held.job, value, lost=lost)
    while not held.started.is_set():
        await asyncio.sleep(0.001)
    future.cancel()
    held.release.set()
    runner = off_loop(held)
    assert runner is not None and runner.drain(GENEROUS)
    for _ in range(5):  # the drain on the loop, then the callback it schedules
        await asyncio.sleep(0)


_seen: contextvars.ContextVar[str] = contextvars.ContextVar("seen", default="")


async def test_lost_gets_the_value_on_the_loop_in_the_callers_context_once_the_caller_left() -> (
    None
):
    held = _Held()
    got: list[tuple[Any, str, int]] = []
    _seen.set("the caller's")
    await _cancelled_while_held(
        held, 7, lambda v: got.append((v, _seen.get(), threading.get_ident()))
    )
    assert got == [(7, "the caller's", threading.get_ident())]


async def test_lost_is_not_called_for_a_caller_that_got_its_answer_or_a_job_that_failed() -> None:
    held = _Held()
    got: list[Any] = []
    held.release.set()
    assert await offloop.submit(held, held.job, 3, lost=got.append) == 3
    failing = _Held()
    await _cancelled_while_held(failing, ValueError("no"), got.append)
    assert got == []


async def test_a_lost_callback_that_raises_does_not_stop_the_other_answers() -> None:
    loop = asyncio.get_running_loop()
    reported: list[Any] = []
    loop.set_exception_handler(lambda _, context: reported.append(context.get("exception")))

    def explode(value: Any) -> None:
        raise RuntimeError(value)

    lost_future = loop.create_future()
    lost_future.cancel()
    others = [loop.create_future() for _ in range(3)]
    offloop._answer(
        [(offloop._Job(loop, lost_future, lost=explode), True, "boom")]
        + [(offloop._Job(loop, f), True, n) for n, f in enumerate(others)]
    )
    assert await asyncio.gather(*others) == [0, 1, 2]
    await asyncio.sleep(0)
    assert [str(e) for e in reported] == ["boom"]
