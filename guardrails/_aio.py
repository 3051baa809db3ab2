"""Running a coroutine from sync code, for async guards and tools on the sync path."""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import threading
from collections.abc import Awaitable, Callable, Coroutine
from time import perf_counter_ns
from typing import Any, TypeVar

from ._workers import submit
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
    if timeout is None:
        return loop.run_until_complete(coro)
    task = loop.create_task(coro)
    loop.run_until_complete(asyncio.wait((task,), timeout=timeout))
    if task.done():
        return task.result()
    # Past the deadline: cancel, and give the task one pass to see it. A task
    # that swallows the cancellation is left behind, never waited for.
    task.cancel()
    loop.run_until_complete(asyncio.sleep(0))
    _abandon(task)
    raise TimeoutError(f"no answer within {timeout} s")


async def await_with_timeout(coro: Coroutine[Any, Any, T], timeout: float) -> T:
    """Await ``coro`` for at most ``timeout`` seconds of the loop's time.

    Unlike ``asyncio.wait_for``, the caller is released at the deadline even
    when the coroutine swallows its cancellation (it is left to finish on its
    own). A coroutine that blocks the loop cannot be pre-empted at all: the
    caller measures how long it took (see ``late``).
    """
    task = asyncio.ensure_future(coro)
    try:
        await asyncio.wait((task,), timeout=timeout)
    except asyncio.CancelledError:  # the caller's own cancellation: pass it on
        task.cancel()
        _abandon(task)
        raise
    if task.done():
        return task.result()
    task.cancel()
    _abandon(task)
    raise TimeoutError(f"no answer within {timeout} s")


async def to_the_end(coro: Awaitable[T]) -> T:
    """Await ``coro``, which runs to its end even if the caller is cancelled meanwhile.

    For what a call owes after its caller's cancellation (its hooks' ``after``,
    its audit row): a second cancellation releases the caller, not the record.
    """
    task = asyncio.ensure_future(coro)
    try:
        return await asyncio.shield(task)
    except asyncio.CancelledError:
        if not task.done():
            _abandon(task)
        raise


def owes_record(exc: BaseException) -> bool:
    """An exception after which a coroutine may still await its records: an
    ``Exception`` (misuse) or a cancellation. A stop of the process, or the
    coroutine being closed, is recorded at once instead."""
    return isinstance(exc, Exception | asyncio.CancelledError)


def _abandon(task: asyncio.Future[Any]) -> None:
    # Whatever the task ends with later is read here, so that nothing is logged
    # as "exception never retrieved".
    task.add_done_callback(consume)


def consume(task: asyncio.Future[Any]) -> None:
    if not task.cancelled():
        task.exception()


def late(start_ns: int, deadline_ns: int | None) -> bool:
    """True when more than ``deadline_ns`` passed since ``start_ns``."""
    return deadline_ns is not None and perf_counter_ns() - start_ns > deadline_ns


def stops(exc: BaseException) -> bool:
    """A ``BaseException`` that must reach the caller: a stop of the process, or the
    caller's own cancellation (the current task was asked to cancel).

    Anything else (an ``Exception``, or a ``CancelledError`` or other
    ``BaseException`` that a guard or tool raised of its own accord) is that
    callable's failure.
    """
    if isinstance(exc, KeyboardInterrupt | SystemExit):
        return True
    if isinstance(exc, asyncio.CancelledError):
        return cancel_requested()
    return False


def cancel_requested() -> bool:
    """True when the running task (if any) has been asked to cancel."""
    try:
        task = asyncio.current_task()
    except RuntimeError:  # no running loop
        return False
    return task is not None and task.cancelling() > 0


# -- sync callables with a timeout ---------------------------------------------------
#
# A sync function cannot be interrupted, so one with a timeout runs on a worker
# thread (``_workers``: reused, and a new one whenever none is idle, so calls
# that hang neither starve the calls after them nor hold up the interpreter's
# exit) and the caller stops waiting when the time is up.


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

    submit(target)
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

    submit(target)
    return await asyncio.wait_for(future, timeout)
