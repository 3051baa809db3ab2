"""Running a coroutine from sync code, for async guards and tools on the sync path."""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import threading
from collections.abc import Callable, Coroutine
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


# -- sync callables with a timeout ---------------------------------------------------
#
# A sync function cannot be interrupted, so one with a timeout runs on a thread of
# its own and the caller stops waiting when the time is up. Each call gets a new
# daemon thread rather than a place in a shared pool: calls that hang can then
# neither starve the calls after them nor hold up the interpreter's exit.


def call_with_timeout(fn: Callable[..., T], timeout: float, *args: Any) -> T:
    """``fn(*args)`` on a daemon thread; ``TimeoutError`` after ``timeout`` seconds."""
    box: list[tuple[bool, Any]] = []
    done = threading.Event()
    # The thread sees the caller's context variables, as with asyncio.to_thread.
    run = contextvars.copy_context().run

    def target() -> None:
        try:
            box.append((True, run(fn, *args)))
        except BaseException as exc:
            box.append((False, exc))
        finally:
            done.set()

    threading.Thread(target=target, name="guardrails-timeout", daemon=True).start()
    if not done.wait(timeout):
        raise TimeoutError(f"no answer within {timeout} s")
    ok, value = box[0]
    if ok:
        return value  # type: ignore[no-any-return]
    raise value


async def acall_with_timeout(fn: Callable[..., T], timeout: float, *args: Any) -> T:
    """``call_with_timeout`` for async callers: the loop is never blocked."""
    loop = asyncio.get_running_loop()
    future: asyncio.Future[T] = loop.create_future()

    def settle(ok: bool, value: Any) -> None:
        if not future.done():
            if ok:
                future.set_result(value)
            else:
                future.set_exception(value)

    run = contextvars.copy_context().run

    def target() -> None:
        try:
            outcome: tuple[bool, Any] = (True, run(fn, *args))
        except BaseException as exc:
            outcome = (False, exc)
        with contextlib.suppress(RuntimeError):  # the loop closed while the call ran
            loop.call_soon_threadsafe(settle, *outcome)

    threading.Thread(target=target, name="guardrails-timeout", daemon=True).start()
    return await asyncio.wait_for(future, timeout)
