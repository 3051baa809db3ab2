"""The fair admission gate of the async entry points (``guardrails._fair``).

Time is a fake clock that only the calls advance (each call "costs" what its
tool adds), so every test is deterministic: what is checked is the order in
which things ran on the loop, never how long they took.
"""

from __future__ import annotations

import asyncio
import math
import threading
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from guardrails import Guardrails, Outcome, _fair, guard, tool
from guardrails.errors import ConfigurationError
from guardrails.store.offloop import WAKE_CHUNK

SLICE = 0.001
COST = 0.0003  # what each call's own work takes on the fake clock


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def _rails(clock: Clock, log: list[Any], *, slice: float | None = SLICE) -> Guardrails:
    @tool
    def work(n: int) -> int:
        log.append(n)
        clock.now += COST
        return n

    @tool
    def broken(n: int) -> int:
        log.append(n)
        clock.now += COST
        raise RuntimeError("tool failure")

    return Guardrails([work, broken], loop_slice=slice)


def _fake_clock() -> Clock:
    clock = Clock()
    _fair.gate().clock = clock
    return clock


async def _app(marks: list[Any], done: asyncio.Event) -> None:
    """Another task of the application: one mark per iteration of the loop it gets."""
    while not done.is_set():
        marks.append("app")
        await asyncio.sleep(0)


async def _burst(rails: Guardrails, calls: int, log: list[Any]) -> list[Any]:
    done = asyncio.Event()
    app = asyncio.create_task(_app(log, done))
    await asyncio.sleep(0)  # the app task has run once: it is part of every iteration
    results = await asyncio.gather(*(rails.acall("work", {"n": i}) for i in range(calls)))
    done.set()
    await app
    return results


def _runs(log: list[Any]) -> list[list[int]]:
    """The calls that ran back to back, between two marks of the other task."""
    runs: list[list[int]] = [[]]
    for entry in log:
        if entry == "app":
            runs.append([])
        else:
            runs[-1].append(entry)
    return [run for run in runs if run]


async def test_calls_past_the_slice_wait_and_enter_in_fifo_order_between_other_tasks() -> None:
    clock = _fake_clock()
    log: list[Any] = []
    results = await _burst(_rails(clock, log), 40, log)
    assert [r.outcome for r in results] == [Outcome.OK] * 40
    calls = [entry for entry in log if entry != "app"]
    assert calls == list(range(40))  # strict FIFO: the order the calls were made in
    runs = _runs(log)
    # The first slice holds the calls that fit in it (0.0, 0.3, 0.6, 0.9 ms < 1 ms) ...
    assert runs[0] == [0, 1, 2, 3]
    # ... and the other task ran between every two runs of calls: none is longer than
    # what fits in a slice, or what the previous iteration's measure allowed.
    assert len(runs) > 1 and all(len(run) <= 4 for run in runs)


async def test_no_caller_starves_when_every_iteration_is_longer_than_the_slice() -> None:
    clock = _fake_clock()
    log: list[Any] = []

    async def heavy(done: asyncio.Event) -> None:
        # Another task that takes ten slices of the loop in every iteration.
        while not done.is_set():
            clock.now += 10 * SLICE
            log.append("app")
            await asyncio.sleep(0)

    done = asyncio.Event()
    hog = asyncio.create_task(heavy(done))
    await asyncio.sleep(0)
    rails = _rails(clock, log)
    results = await asyncio.gather(*(rails.acall("work", {"n": i}) for i in range(30)))
    done.set()
    await hog
    assert [r.value for r in results] == list(range(30))
    assert [entry for entry in log if entry != "app"] == list(range(30))
    # At least one call enters per iteration, however busy the loop is.
    assert all(len(run) >= 1 for run in _runs(log))
    assert log.count("app") <= 30 + 2


async def test_a_caller_cancelled_while_waiting_never_runs_and_passes_nothing_on() -> None:
    clock = _fake_clock()
    log: list[Any] = []
    rails = _rails(clock, log)
    tasks = [asyncio.create_task(rails.acall("work", {"n": i})) for i in range(12)]
    await asyncio.sleep(0)  # every task ran its first step: 4 entered, 8 wait
    gate = _fair.gate()
    assert len(gate.waiting) == 8
    tasks[5].cancel()
    tasks[9].cancel()
    results = await asyncio.gather(*tasks, return_exceptions=True)
    assert isinstance(results[5], asyncio.CancelledError)
    assert isinstance(results[9], asyncio.CancelledError)
    assert log == [n for n in range(12) if n not in (5, 9)]
    assert not gate.waiting and not gate.ticking


async def test_a_caller_cancelled_after_it_was_let_in_does_not_run() -> None:
    clock = _fake_clock()
    log: list[Any] = []
    rails = _rails(clock, log)
    tasks = [asyncio.create_task(rails.acall("work", {"n": i})) for i in range(6)]
    await asyncio.sleep(0)
    gate = _fair.gate()
    waiting = list(gate.waiting)
    gate._tick(asyncio.get_running_loop())  # the next iteration's tick, now
    let_in = [f for f in waiting if f.done()]
    assert let_in
    tasks[4].cancel()  # let in, not yet resumed
    results = await asyncio.gather(*tasks, return_exceptions=True)
    assert isinstance(results[4], asyncio.CancelledError)
    assert log == [0, 1, 2, 3, 5]


async def test_exceptions_inside_calls_leave_nothing_held() -> None:
    clock = _fake_clock()
    log: list[Any] = []

    @guard
    def explodes(_: Any) -> Any:
        clock.now += COST
        raise ValueError("guard failure")

    rails = _rails(clock, log)
    rails.add_guard(explodes)
    names = ["broken" if i % 2 else "work" for i in range(20)]
    results = await asyncio.gather(*(rails.acall(name, {"n": i}) for i, name in enumerate(names)))
    assert [r.outcome for r in results] == [
        Outcome.ERROR if name == "broken" else Outcome.OK for name in names
    ]
    gate = _fair.gate()
    assert not gate.waiting and not gate.ticking
    # The next call, one slice later, enters at once.
    clock.now += 2 * SLICE
    assert gate.admit(SLICE)


async def test_an_uncontended_call_never_waits() -> None:
    clock = _fake_clock()
    log: list[Any] = []
    rails = _rails(clock, log)
    gate = _fair.gate()
    for i in range(50):
        assert gate.admit(SLICE)  # nothing else runs: the slice opens again each time
        clock.now += 2 * SLICE
        result = await rails.acall("work", {"n": i})
        assert result.outcome is Outcome.OK
    assert not gate.ticking and not gate.waiting


async def test_back_to_back_awaits_of_one_task_yield_to_the_loop_each_slice() -> None:
    clock = _fake_clock()
    log: list[Any] = []
    done = asyncio.Event()
    app = asyncio.create_task(_app(log, done))
    await asyncio.sleep(0)
    rails = _rails(clock, log)
    for i in range(12):  # no call here ever waits on I/O
        await rails.acall("work", {"n": i})
    done.set()
    await app
    assert _runs(log) == [[0, 1, 2, 3], [4, 5, 6, 7], [8, 9, 10, 11]]


async def test_pre_turn_and_post_run_take_their_turn_too() -> None:
    clock = _fake_clock()
    log: list[Any] = []
    rails = _rails(clock, log)
    turn = rails.turn(session="s")
    gate = _fair.gate()
    for n in range(4):  # back to back, in one step: the slice is spent
        await turn.acall("work", {"n": n})
    order: list[str] = []

    async def entry(name: str, coro: Any) -> None:
        await coro
        order.append(name)

    async def other() -> None:
        order.append("other")

    tasks = [
        asyncio.create_task(entry("pre_turn", turn.apre_turn("hello"))),
        asyncio.create_task(entry("post_run", turn.apost_run("done"))),
        asyncio.create_task(other()),
    ]
    await asyncio.gather(*tasks)
    assert order == ["other", "pre_turn", "post_run"]
    assert not gate.ticking


async def test_without_a_slice_the_gate_is_not_consulted() -> None:
    clock = _fake_clock()
    log: list[Any] = []
    results = await _burst(_rails(clock, log, slice=None), 20, log)
    assert [r.value for r in results] == list(range(20))
    assert _runs(log) == [list(range(20))]  # all in one iteration, as before the gate
    assert _fair.gate().entered == 0


def test_each_loop_and_thread_has_its_own_gate() -> None:
    gates: list[_fair.Gate] = []
    failures: list[BaseException] = []

    async def scenario() -> None:
        clock = _fake_clock()
        gates.append(_fair.gate())
        log: list[Any] = []
        results = await _burst(_rails(clock, log), 25, log)
        assert [r.value for r in results] == list(range(25))
        assert [entry for entry in log if entry != "app"] == list(range(25))

    def in_thread() -> None:
        try:
            for _ in range(3):  # asyncio.run again: a new loop, a new gate
                asyncio.run(scenario())
        except BaseException as exc:
            failures.append(exc)

    threads = [threading.Thread(target=in_thread) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert not failures
    assert len(gates) == 12 and len({id(g) for g in gates}) == 12


@pytest.mark.parametrize("bad", [0, -0.001, 2, math.nan, math.inf, True, "0.001"])
def test_a_bad_slice_is_refused_at_construction(bad: Any) -> None:
    with pytest.raises(ConfigurationError, match="loop_slice"):
        Guardrails(loop_slice=bad)


def test_the_default_slice_is_the_documented_one() -> None:
    assert Guardrails().loop_slice == _fair.DEFAULT_SLICE == 0.0005
    assert Guardrails(loop_slice=None).loop_slice is None
    page = (Path(__file__).parents[1] / "docs" / "production.md").read_text()
    assert "loop_slice=0.0005)  # the default: 0.5 ms" in page
    assert f"at most {_fair.MAX_BURST} and at least one" in page
    assert f"come from: {WAKE_CHUNK} in the first iteration, then by the same rule" in page
    assert f"last batch, at most {_fair.MAX_BURST}, at least one" in page


@given(
    burst=st.integers(1, _fair.MAX_BURST),
    elapsed=st.floats(0, 1, allow_nan=False),
    more=st.floats(0, 1, allow_nan=False),
    slice=st.floats(1e-5, 1e-2),
)
def test_the_next_burst_is_bounded_and_shrinks_as_iterations_grow(
    burst: int, elapsed: float, more: float, slice: float
) -> None:
    got = _fair.next_burst(burst, elapsed, slice)
    assert 1 <= got <= min(2 * burst, _fair.MAX_BURST)
    assert _fair.next_burst(burst, elapsed + more, slice) <= got
    if elapsed > slice:
        assert got <= burst  # an iteration longer than the slice never lets more in


async def test_enter_is_admit_then_queue_in_one_step() -> None:
    """``enter``: None while the slice has room, then a future per caller, in FIFO order;
    once anyone waits, even a call inside a fresh slice queues behind them."""
    clock = _fake_clock()
    gate = _fair.gate()
    loop = asyncio.get_running_loop()
    assert gate.enter(SLICE, loop) is None
    clock.now += 2 * SLICE  # the slice is used up ...
    gate.last = clock.now  # ... by guarded calls, the loop never left them: no new slice opens
    places = [_fair.enter(SLICE) for _ in range(3)]
    assert all(isinstance(p, asyncio.Future) and not p.done() for p in places)
    assert list(gate.waiting) == places
    clock.now += 10 * SLICE  # the loop was away long enough to open a new slice...
    late = gate.enter(SLICE, loop)
    assert late is not None and gate.waiting[-1] is late  # ...but others wait: behind them
    for place in (*places, late):
        await place  # released one iteration at a time, in order
    assert not gate.waiting and gate.enter(SLICE, loop) is None
