"""Store work written once for sync and async callers: a generator of store calls, two drivers.

A caller that needs several store operations and decisions between them
(a paid call's reservations, an idempotency key's settlement) writes them as
a generator that yields ``call(method, *args)`` and receives each answer; a
failed call is raised at its ``yield``. ``perform(store, steps)`` drives it
in the calling thread; ``await aperform(store, steps)`` drives it for async
callers: on the event loop through the store's async path when it has one
(``PostgresStore(async_pool=True)``), else all of it on the store's threads
(``offloop.run``). Either way nothing blocks the loop, and the logic is the
same text. ``asubmit(store, steps)`` starts the same at once as a future that
runs to its end whether or not its caller still awaits it (work that must be
finished, or undone, after a cancellation); ``akept(store, steps, lost)``
is awaited like ``aperform``, and when its caller stops waiting the work
goes on and ``lost`` gets its result (a reservation given back).
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Generator
from functools import partial
from typing import Any, NamedTuple, TypeVar

from ..native._tuples import make
from . import offloop

__all__ = [
    "Call",
    "Steps",
    "akept",
    "aperform",
    "arun",
    "asubmit",
    "call",
    "finish_started",
    "perform",
]

T = TypeVar("T")


class Call(NamedTuple):
    """One store method to call, with its arguments."""

    method: str
    args: tuple[Any, ...]


Steps = Generator[Call, Any, T]


def call(method: str, /, *args: Any) -> Call:
    return make(Call, (method, args))  # a NamedTuple's __new__ is a Python function


def perform(store: Any, steps: Steps[T], /) -> T:
    """Drive ``steps`` here: each call on ``store``, its answer or error sent back."""
    answer: Any = None
    error: Exception | None = None
    try:
        while True:
            step = steps.send(answer) if error is None else steps.throw(error)
            error = None
            try:
                answer = getattr(store, step.method)(*step.args)
            except Exception as exc:
                answer, error = None, exc
    except StopIteration as done:
        return done.value  # type: ignore[no-any-return]


def aperform(store: Any, steps: Steps[T], /) -> Awaitable[T]:
    """Drive ``steps`` for an async caller, without blocking the event loop.

    Returns the store thread's future itself (or the async path's coroutine),
    not a coroutine around it: a call waiting on it holds no frame of ours.
    """
    path = offloop.async_path(store)
    if path is None:
        return offloop.drive(store, perform, steps)
    return _adrive(path, steps)


async def _adrive(path: Any, steps: Steps[T]) -> T:
    """Drive ``steps`` on the store's async path (on the loop, without blocking it)."""
    answer: Any = None
    error: Exception | None = None
    try:
        while True:
            step = steps.send(answer) if error is None else steps.throw(error)
            error = None
            try:
                if step.method == "append":  # batched with the rows of other tasks
                    answer = await path.append(*step.args)
                else:
                    answer = await path.call(step.method, *step.args)
            except Exception as exc:
                answer, error = None, exc
    except StopIteration as done:
        return done.value  # type: ignore[no-any-return]


def akept(store: Any, steps: Steps[T], /, lost: Callable[[T], object]) -> Awaitable[T]:
    """``aperform`` of work that must not be lost when its caller stops waiting.

    A caller cancelled while it awaits leaves the work going; once it has
    ended, ``lost(value)`` runs on the loop with what it returned (a
    reservation made for nobody is given back that way). On the store's
    threads that is ``offloop.drive(..., lost)``: no shield, no extra
    future or closure per call.
    """
    if offloop.async_path(store) is None:
        return offloop.drive(store, perform, steps, lost)
    return _shielded(asubmit(store, steps), lost)


async def _shielded(started: asyncio.Future[T], lost: Callable[[T], object]) -> T:
    try:
        return await asyncio.shield(started)
    except asyncio.CancelledError:
        started.add_done_callback(partial(_hand_over, lost))
        raise


def _hand_over(lost: Callable[[T], object], started: asyncio.Future[T]) -> None:
    if not started.cancelled() and started.exception() is None:
        lost(started.result())


def asubmit(store: Any, steps: Steps[T], /) -> asyncio.Future[T]:
    """``aperform`` as a future of the running loop, started at once.

    Cancelling an ``await`` of it (under ``asyncio.shield``) leaves the work
    going: on the store's threads (``offloop.drive``), or in a task of the
    loop that is kept until it ends.
    """
    if offloop.async_path(store) is None:
        return offloop.drive(store, perform, steps)
    task = asyncio.ensure_future(_adrive(offloop.async_path(store), steps))
    _started[task] = store
    task.add_done_callback(_forget)
    return task


_started: dict[asyncio.Future[Any], Any] = {}  # the tasks of ``asubmit`` and their stores


def _forget(task: asyncio.Future[Any]) -> None:
    _started.pop(task, None)


async def finish_started(store: Any, /) -> None:
    """Wait until the work ``asubmit`` started on ``store`` from this loop has ended,
    with the work it started in turn (a reservation given back once made)."""
    loop = asyncio.get_running_loop()
    while True:
        mine = [t for t, s in list(_started.items()) if s is store and t.get_loop() is loop]
        if not mine:
            return
        await asyncio.wait(mine)
        await asyncio.sleep(0)  # their done callbacks may start more


async def arun(store: Any, method: str, /, *args: Any) -> Any:
    """One store method for an async caller (``aperform`` of a single call)."""
    return await aperform(store, _only(call(method, *args)))


def _only(step: Call) -> Steps[Any]:
    return (yield step)
