"""Jobs of concurrent callers made into one pass of a store thread."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Callable
from typing import Any

from guardrails.store import StoreUnavailable
from guardrails.store.offloop import OffLoop
from guardrails.store.steps import Steps, call


async def one_pass(
    runner: OffLoop, make_jobs: Callable[[], list[Any]], before: Callable[[], None] = lambda: None
) -> list[Any]:
    """The jobs ``make_jobs`` makes, queued while the store thread is held, so that
    they make one pass; what each gave (its result or its exception).

    The jobs are made only once the thread is held, since some queue their job
    when called (``offloop.append``, ``aperform``, ``runner.run``); ``before``
    runs just before the pass starts.
    """
    started, gate = threading.Event(), threading.Event()

    def hold() -> None:
        started.set()
        gate.wait()

    held = asyncio.ensure_future(runner.run(hold))
    while not started.is_set():
        await asyncio.sleep(0.001)
    jobs = make_jobs()
    tasks = [asyncio.ensure_future(job) for job in jobs]
    while len(runner._queue) < len(jobs):
        await asyncio.sleep(0.001)
    before()
    gate.set()
    await held
    return await asyncio.gather(*tasks, return_exceptions=True)


def counted() -> Steps[str]:
    """A job that answers a failed operation itself, as a fail-open hook does."""
    try:
        yield call("incr", "counted")
    except StoreUnavailable:
        return "escape"
    return "counted"
