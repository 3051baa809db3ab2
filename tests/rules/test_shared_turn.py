"""A turn shared by threads never exceeds its ceilings (per turn and per session)."""

from __future__ import annotations

import sys
import threading
from collections.abc import Iterator

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from guardrails import Guardrails, Outcome, Reason, tool
from guardrails.rules import SessionCeiling
from tests._examples import examples

THREADS = 32


@tool
def ping() -> str:
    return "pong"


@pytest.fixture(autouse=True)
def tiny_switch_interval() -> Iterator[None]:
    # Threads switch as often as the interpreter allows: a read-then-write
    # counter without a lock overshoots within a few hundred calls.
    before = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)
    yield
    sys.setswitchinterval(before)


def hammer(call: object, per_thread: int) -> None:
    start = threading.Barrier(THREADS)

    def work() -> None:
        start.wait()
        for _ in range(per_thread):
            call()  # type: ignore[operator]

    threads = [threading.Thread(target=work) for _ in range(THREADS)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()


@settings(max_examples=examples(50), deadline=None, database=None)
@given(limit=st.integers(0, 600), per_thread=st.integers(20, 40))
def test_a_turn_shared_by_32_threads_never_exceeds_its_ceiling(limit: int, per_thread: int) -> None:
    turn = Guardrails([ping], max_calls_per_turn=limit).turn()
    hammer(lambda: turn.call("ping", {}), per_thread)
    outcomes = [(r.outcome, r.reason) for r in turn.results]
    ran = outcomes.count((Outcome.OK, None))
    assert ran == min(limit, THREADS * per_thread)
    assert outcomes.count((Outcome.LIMIT, Reason.CEILING)) == len(outcomes) - ran
    assert turn.counters.get("calls", 0) == ran


@settings(max_examples=examples(10), deadline=None)
@given(limit=st.integers(0, 300), per_thread=st.integers(1, 20))
def test_a_session_shared_by_32_threads_never_exceeds_its_ceiling(
    limit: int, per_thread: int
) -> None:
    rails = Guardrails([ping], hooks=[SessionCeiling(limit)])
    turn = rails.turn(session="s")
    hammer(lambda: turn.call("ping", {}), per_thread)
    ran = sum(1 for r in turn.results if r.outcome is Outcome.OK)
    assert ran == min(limit, THREADS * per_thread)


@pytest.mark.slow
def test_threads_asking_a_new_turn_for_its_lock_at_once_all_get_the_same_one() -> None:
    """A turn makes its lock the first time it is asked for: 32 threads asking at once
    get one lock between them, every time."""
    rails = Guardrails([ping])
    for _ in range(200):
        turn = rails.turn()
        seen: list[object] = []
        hammer(lambda: seen.append(turn.lock), 1)  # noqa: B023 (called before the next turn)
        assert len(seen) == THREADS
        assert all(lock is seen[0] for lock in seen)
