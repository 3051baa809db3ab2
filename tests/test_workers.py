"""The worker threads that run sync calls with a deadline."""

from __future__ import annotations

import threading

import pytest

from guardrails import _workers
from guardrails._aio import call_with_timeout


def test_a_hung_job_never_delays_the_next_one() -> None:
    workers = _workers._Workers()
    release, second = threading.Event(), threading.Event()
    workers.submit(lambda: release.wait(60) and None)
    workers.submit(second.set)
    try:
        assert second.wait(60)  # ran on a new worker while the first one hangs
    finally:
        release.set()


def test_sequential_jobs_reuse_at_most_two_workers() -> None:
    workers = _workers._Workers()
    seen: set[int] = set()
    for _ in range(50):
        done = threading.Event()

        def job(done: threading.Event = done) -> None:
            seen.add(threading.get_ident())
            done.set()

        workers.submit(job)
        assert done.wait(60)
    # The worker that just finished may not be idle yet when the next job
    # comes: a second one starts, and from then on the two take turns.
    assert 1 <= len(seen) <= 2


def test_an_idle_worker_ends(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(_workers, "IDLE_SECONDS", 0.01)
    workers = _workers._Workers()
    started: list[threading.Thread] = []
    done = threading.Event()

    def job() -> None:
        started.append(threading.current_thread())
        done.set()

    workers.submit(job)
    assert done.wait(60)
    started[0].join(60)
    assert not started[0].is_alive() and workers.idle == 0
    assert started[0].daemon


def test_call_with_timeout_answers_raises_and_times_out(release: threading.Event) -> None:
    assert call_with_timeout(lambda x: x + 1, 60, 1) == 2
    with pytest.raises(KeyError):
        call_with_timeout(lambda: {}["k"], 60)
    with pytest.raises(TimeoutError):
        call_with_timeout(release.wait, 0.01, 60)


@pytest.fixture
def release() -> object:
    event = threading.Event()
    yield event
    event.set()
