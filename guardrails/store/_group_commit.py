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
import threading
from collections.abc import Awaitable, Callable
from typing import Any

from ._base import AuditRow

__all__ = ["AsyncBatcher", "Batcher", "Pending"]

Waiter = Callable[[BaseException | None], None]
"""Told the outcome of the write its row was in: ``None``, or the error."""


class Pending:
    """Rows waiting to be committed, their waiters, and whether a write is under way."""

    __slots__ = ("rows", "waiters", "writing")

    def __init__(self) -> None:
        self.rows: list[AuditRow] = []
        self.waiters: list[Waiter] = []
        self.writing = False

    def put(self, rows: list[AuditRow], waiter: Waiter) -> None:
        self.rows += rows
        self.waiters.append(waiter)

    def take(self) -> tuple[list[AuditRow], list[Waiter]] | None:
        """Everything queued, for the caller to write; None if a write is under way or nothing waits."""
        if self.writing or not self.rows:
            return None
        taken = self.rows, self.waiters
        self.rows, self.waiters = [], []
        self.writing = True
        return taken

    def written(self, waiters: list[Waiter], error: BaseException | None) -> None:
        self.writing = False
        for waiter in waiters:
            waiter(error)


class _Outcome:
    __slots__ = ("done", "error")

    def __init__(self) -> None:
        self.done = False
        self.error: BaseException | None = None

    def __call__(self, error: BaseException | None) -> None:
        self.done, self.error = True, error


class Batcher:
    """Group commit for threads: the callers take turns to write what all of them queued."""

    def __init__(self, write: Callable[[list[AuditRow]], Any]) -> None:
        self._write = write
        self._cond = threading.Condition()
        self._pending = Pending()

    def submit(self, row: AuditRow) -> None:
        """Append ``row``; returns once it is committed."""
        self.commit([row])

    def commit(self, rows: list[AuditRow]) -> None:
        """Append ``rows`` (with whatever else is queued); raises the write's error."""
        outcome = _Outcome()
        with self._cond:
            self._pending.put(rows, outcome)
            taken = self._pending.take()
            while taken is None and not outcome.done:
                self._cond.wait()
                taken = self._pending.take()
        if taken is not None:  # our rows are among those taken: write them all
            error: BaseException | None = None
            try:
                self._write(taken[0])
            except BaseException as exc:  # every waiter learns it; a stop goes on
                error = exc
            with self._cond:
                self._pending.written(taken[1], error)
                self._cond.notify_all()
            if error is not None and not isinstance(error, Exception):
                raise error
        if outcome.error is not None:
            raise outcome.error


class AsyncBatcher:
    """Group commit for the tasks of one event loop: a writer task writes what they queued."""

    def __init__(self, write: Callable[[list[AuditRow]], Awaitable[Any]]) -> None:
        self._write = write
        self._pending = Pending()
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
            while (taken := self._pending.take()) is not None:
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
