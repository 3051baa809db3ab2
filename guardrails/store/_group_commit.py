"""Group commit for ``PostgresStore``: one writer thread commits the rows many threads queued."""

from __future__ import annotations

import os
import threading
from typing import Any, Protocol

from ._base import AuditRow, StoreUnavailable

__all__ = ["Batcher"]


class _Appender(Protocol):
    def append_many(self, rows: list[AuditRow], /) -> None: ...


class Batcher:
    """Group commit: one writer thread commits the rows queued by many callers at once."""

    def __init__(self, store: _Appender) -> None:
        self._store = store
        self._reset()

    def _reset(self) -> None:
        self._pid = os.getpid()
        self._cond = threading.Condition()
        self._queue: list[tuple[AuditRow, list[Any]]] = []
        self._thread: threading.Thread | None = None
        self._stopping = False

    def submit(self, row: AuditRow) -> None:
        if self._pid != os.getpid():
            self._reset()  # a forked child has neither the writer thread nor its queue
        waiter: list[Any] = [threading.Event(), None]
        with self._cond:
            if self._thread is None or not self._thread.is_alive():
                self._stopping = False
                self._thread = threading.Thread(
                    target=self._loop, name="guardrails-audit-writer", daemon=True
                )
                self._thread.start()
            self._queue.append((row, waiter))
            self._cond.notify()
        waiter[0].wait()
        if waiter[1] is not None:
            raise waiter[1]

    def _loop(self) -> None:
        while True:
            with self._cond:
                while not self._queue and not self._stopping:
                    self._cond.wait()
                if not self._queue:
                    return
                batch, self._queue = self._queue, []
            error: BaseException | None = None
            try:
                self._store.append_many([row for row, _ in batch])
            except StoreUnavailable as exc:
                error = exc
            for _, waiter in batch:
                waiter[1] = error
                waiter[0].set()

    def stop(self) -> None:
        with self._cond:
            self._stopping = True
            self._cond.notify_all()
        thread = self._thread
        if thread is not None:
            thread.join(timeout=5)
