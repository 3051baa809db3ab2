"""Running a coroutine from sync code, for async guards and tools on the sync path."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Coroutine
from typing import Any, TypeVar

from .errors import UsageError

T = TypeVar("T")

_local = threading.local()


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
    loop: asyncio.AbstractEventLoop | None = getattr(_local, "loop", None)
    if loop is None or loop.is_closed():
        loop = asyncio.new_event_loop()
        _local.loop = loop
    if timeout is not None:
        return loop.run_until_complete(asyncio.wait_for(coro, timeout))
    return loop.run_until_complete(coro)
