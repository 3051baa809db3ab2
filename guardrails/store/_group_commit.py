"""Group commit: audit rows queued by many callers are committed together, one write for all.

``Pending`` holds the rows waiting for a commit and whether a write is under
way; it does no I/O and takes no lock, so both writers below share it:

- ``Batcher`` serves threads: the sync callers of
  ``PostgresStore(group_commit=True)`` and the store threads of ``offloop``
  (the rows of async callers). It has no thread of its own: a caller whose
  rows are queued while nobody writes takes everything queued (its rows and
  the others') and writes it; the others wait until their rows are written.
- ``AsyncBatcher`` serves the tasks of one event loop (the async PostgreSQL
  path): a writer task, started when rows arrive and none runs, writes
  everything queued until the queue is empty.

Either way a caller returns only once its rows are committed, and a failed
write fails every caller whose rows were in it.
"""

from __future__ import annotations

import asyncio
import os
import threading
import weakref
from collections.abc import Awaitable, Callable
from typing import Any, Generic, TypeVar

from ._base import AuditRow

__all__ = ["AsyncBatcher", "Batcher", "Pending"]

Waiter = Callable[[BaseException | None], None]
"""Told the outcome of the write its row was in: ``None``, or the error."""
W = TypeVar("W", bound=Waiter)


class Pending(Generic[W]):
    """Rows waiting to be committed, their waiters, and whether a write is under way."""

    __slots__ = ("rows", "sizes", "waiters", "writing")

    def __init__(self) -> None:
        self.rows: list[AuditRow] = []
        self.waiters: list[W] = []
        self.sizes: list[int] = []  # how many of ``rows`` each waiter queued
        self.writing = False

    def put(self, rows: list[AuditRow], waiter: W) -> None:
        self.rows += rows
        self.waiters.append(waiter)
        self.sizes.append(len(rows))

    def take(self, most: int | None = None) -> tuple[list[AuditRow], list[W]] | None:
        """What is queued, for the caller to write; None if a write is under way or nothing
        waits. ``most``: the rows of the first waiters only, as many as fit in ``most``
        rows (a waiter's rows are never split; the first waiter's always go)."""
        if self.writing or not self.rows:
            return None
        self.writing = True
        if most is None or len(self.rows) <= most:
            taken = self.rows, self.waiters
            self.rows, self.waiters, self.sizes = [], [], []
            return taken
        count, waiters = self.sizes[0], 1
        for size in self.sizes[1:]:
            if count + size > most:
                break
            count, waiters = count + size, waiters + 1
        taken = self.rows[:count], self.waiters[:waiters]
        self.rows, self.waiters = self.rows[count:], self.waiters[waiters:]
        del self.sizes[:waiters]
        return taken

    def written(self, waiters: list[W], error: BaseException | None) -> None:
        self.writing = False
        for waiter in waiters:
            waiter(error)


class _Thread:
    """One waiting thread: its lock is released once, when its rows are written
    (``error`` then says how) or when the next write is handed to it (``heir``);
    who releases it is decided under the batcher's lock, and never for a
    thread that was interrupted (``gone``): its wait is over."""

    __slots__ = ("error", "gone", "heir", "leaving", "lock")

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.lock.acquire()
        self.error: BaseException | None = None
        self.heir = False
        self.gone = False  # interrupted while waiting: never handed a write
        self.leaving = False  # woken by the write of its rows, not yet out of ``commit``

    def __call__(self, error: BaseException | None) -> None:
        self.error = error


Batch = tuple[list[AuditRow], list[_Thread]]


class Batcher:
    """Group commit for threads: the callers take turns to write what all of them queued.

    A write wakes exactly the threads whose rows it held, and hands the next
    write to one thread whose rows are queued, so no other thread wakes up for
    nothing: a commit costs one wake-up per row written, not one per thread
    waiting. A row that would start a write of its own while threads of the
    last write are still getting out waits for them (they are already awake:
    no timer, no user code), so what they queue next goes into the same write.
    """

    def __init__(self, write: Callable[[list[AuditRow]], Any]) -> None:
        self._write = write
        self._reset()
        _batchers.add(self)

    def _reset(self) -> None:
        self._lock = threading.Lock()
        self._pending: Pending[_Thread] = Pending()
        self._leaving = 0  # threads woken by the last writes, still on their way out
        self._gatherer: _Thread | None = None  # the next writer, waiting for them

    def submit(self, row: AuditRow) -> None:
        """Append ``row``; returns once it is committed."""
        self.commit([row])

    def commit(self, rows: list[AuditRow]) -> None:
        """Append ``rows`` (with whatever else is queued); raises the write's error.

        A thread interrupted while it waits (``KeyboardInterrupt``) leaves its
        rows queued: they are written all the same, by itself if the next write
        was already handed to it, before the interruption goes on.
        """
        me = _Thread()
        with self._lock:
            self._pending.put(rows, me)
            if self._leaving and not self._pending.writing:
                # The threads the last write woke often come straight back: the
                # next write waits until they are out of here, so that what they
                # queue goes with it rather than into a write of its own.
                self._pending.writing = me.heir = True
                self._gatherer = me
                taken = None
            else:
                taken = self._pending.take()
        try:
            if taken is None:
                taken = self._wait(me)
            while taken is not None:
                taken = self._write_batch(taken, me)
        finally:
            if me.leaving:
                self._left()
        if me.error is not None:
            raise me.error

    def _left(self) -> None:
        with self._lock:
            self._leaving -= 1
            gatherer = self._gatherer if self._leaving == 0 else None
            if gatherer is not None:
                self._gatherer = None
        if gatherer is not None:
            gatherer.lock.release()  # an interrupted gatherer is no longer ``_gatherer``

    def _wait(self, me: _Thread) -> Batch | None:
        """Wait until ``me``'s rows are written (None) or the next write is ``me``'s (the batch)."""
        try:
            me.lock.acquire()
        except BaseException:
            with self._lock:
                me.gone = True
                if self._gatherer is me:
                    self._gatherer = None
                taken = self._inherit() if me.heir else None
            while taken is not None:
                taken = self._write_batch(taken, me)
            raise
        if not me.heir:
            return None
        with self._lock:
            return self._inherit()

    def _inherit(self) -> Batch | None:
        # The heir takes everything queued by now, its own rows among them.
        self._pending.writing = False
        return self._pending.take()

    def _write_batch(self, taken: Batch, me: _Thread) -> Batch | None:
        """Write ``taken``, wake its threads, hand the next write on; returns it if nobody can take it."""
        rows, waiters = taken
        error: BaseException | None = None
        try:
            self._write(rows)
        except BaseException as exc:  # every waiter learns it; a stop goes on
            error = exc
        stop = error is not None and not isinstance(error, Exception)
        with self._lock:
            heir = next((w for w in self._pending.waiters if not w.gone), None)
            if heir is None:
                self._pending.writing = False
            else:  # the write stays under way, handed on
                heir.heir = True
            # The threads to wake: not this one (awake), not the interrupted.
            woken = [w for w in waiters if w is not me and not w.gone]
            for waiter in woken:
                waiter.leaving = True
            self._leaving += len(woken)
            # Nobody to hand it to: only interrupted threads' rows are queued
            # (a stopped writer leaves them to the next caller).
            after = None if stop or heir is not None else self._pending.take()
        for waiter in waiters:
            waiter(error)
        for waiter in woken:
            waiter.lock.release()
        if heir is not None:
            heir.lock.release()
        if stop:
            raise error  # type: ignore[misc]
        return after


_batchers: weakref.WeakSet[Batcher] = weakref.WeakSet()


def _after_fork() -> None:
    # A thread of the parent may have been writing or holding the lock: in the
    # child it never will finish, so every batcher starts empty.
    for batcher in list(_batchers):
        batcher._reset()


os.register_at_fork(after_in_child=_after_fork)


ASYNC_WRITE_ROWS = 64
"""The most rows one write of an ``AsyncBatcher`` takes: it seals and encodes them on the
loop's thread, about 20 µs a row, so a larger write would hold the loop for milliseconds."""


class AsyncBatcher:
    """Group commit for the tasks of one event loop: a writer task writes what they queued,
    ``most`` rows at a time (the rest go in the next write, the loop served in between)."""

    def __init__(
        self, write: Callable[[list[AuditRow]], Awaitable[Any]], most: int = ASYNC_WRITE_ROWS
    ) -> None:
        self._write = write
        self._most = most
        self._pending: Pending[Waiter] = Pending()
        self._writer: asyncio.Task[None] | None = None

    async def commit(self, rows: list[AuditRow]) -> None:
        """Append ``rows``; returns once they are committed, raises the write's error.

        A caller cancelled while it waits does not take its rows back: the
        writer still commits them.
        """
        future: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._pending.put(rows, lambda error: _settle(future, error))
        if self._writer is None:
            self._writer = asyncio.create_task(self._write_all())
        await future

    async def _write_all(self) -> None:
        try:
            while (taken := self._pending.take(self._most)) is not None:
                error: BaseException | None = None
                try:
                    await self._write(taken[0])
                except Exception as exc:
                    error = exc
                except BaseException as exc:  # cancelled with its loop: tell them, then go
                    self._pending.written(taken[1], exc)
                    raise
                self._pending.written(taken[1], error)
        finally:
            self._writer = None


def _settle(future: asyncio.Future[None], error: BaseException | None) -> None:
    if future.done():  # the waiting task was cancelled: the rows were written anyway
        return
    if error is None:
        future.set_result(None)
    elif isinstance(error, asyncio.CancelledError):
        future.cancel()
    else:
        future.set_exception(error)
