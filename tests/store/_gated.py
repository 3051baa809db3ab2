"""A store whose one method waits for the caller's event loop: proof that a call is off the loop.

Each gated method waits on a ``threading.Event`` that only a coroutine of the
caller's loop sets, once the method has started. Run on the loop, the method
would wait for a coroutine that cannot run: it gives up after a generous
timeout and fails the store call, which the test sees.
"""

from __future__ import annotations

import asyncio
import threading
from typing import Any

from guardrails.store import StoreUnavailable

GENEROUS = 20.0


class Gated:
    """A store whose ``method`` waits until a coroutine of the caller's loop opens the gate."""

    def __init__(self, inner: Any, method: str) -> None:
        self.inner = inner
        self.method = method
        self.started = threading.Event()
        self.gate = threading.Event()
        self.threads: set[int] = set()

    def __getattr__(self, name: str) -> Any:
        attr = getattr(self.inner, name)
        if name != self.method:
            return attr

        def gated(*args: Any, **kwargs: Any) -> Any:
            self.threads.add(threading.get_ident())
            self.started.set()
            if not self.gate.wait(GENEROUS):
                raise StoreUnavailable("the gate never opened: the event loop was blocked")
            return attr(*args, **kwargs)

        return gated


async def open_when_started(gated: Gated) -> None:
    while not gated.started.is_set():
        await asyncio.sleep(0.001)
    gated.gate.set()


async def opened(gated: Gated, coro: Any) -> Any:
    """Await ``coro`` while a task of this loop opens the gate once the method started."""
    task = asyncio.create_task(open_when_started(gated))
    try:
        return await coro
    finally:
        task.cancel()


def check(gated: Gated) -> None:
    """The gated method ran, and not on this (the loop's) thread."""
    assert gated.started.is_set(), f"the scenario never called {gated.method}"
    assert threading.get_ident() not in gated.threads
