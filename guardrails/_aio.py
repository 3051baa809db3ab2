"""Running a coroutine from sync code, for async guards and tools on the sync path."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Coroutine
from typing import Any, TypeVar

from .errors import UsageError

T = TypeVar("T")

_local = threading.local()


class _ThreadLoop:
    """This thread's private loop; closed when the thread ends and drops it."""

    __slots__ = ("loop",)

    def __init__(self) -> None:
        self.loop = asyncio.new_event_loop()

    def __del__(self) -> None:
        if not self.loop.is_closed() and not self.loop.is_running():
            self.loop.close()


def run_coroutine(coro: Coroutine[Any, Any, T], timeout: float | None = None) -> T:
    """Run ``coro`` to completion on this thread's private event loop.

    Raises ``UsageError`` when called from inside a running event loop: async
    code must use the ``a``-prefixed entry points instead.
    """
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        pass
    else:
        coro.close()
        raise UsageError(
            "an async guard or tool was reached from a sync entry point inside a running "
            "event loop; use the async entry point (acall) instead"
        )
    holder: _ThreadLoop | None = getattr(_local, "holder", None)
    if holder is None or holder.loop.is_closed():
        holder = _local.holder = _ThreadLoop()
    loop = holder.loop
    if timeout is not None:
        return loop.run_until_complete(asyncio.wait_for(coro, timeout))
    return loop.run_until_complete(coro)
