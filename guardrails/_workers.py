"""Daemon threads for sync calls that have a deadline.

A sync function cannot be interrupted, so one with a deadline runs on a
worker thread and the caller stops waiting when the time is up. Starting a
thread per call costs about 80 µs; the workers here are kept for reuse. A new
worker starts whenever none is idle, so a call that hangs holds only its own
thread and never delays the calls after it; workers are daemon threads, so
none holds up the interpreter's exit; an idle worker ends after
``IDLE_SECONDS``. After ``os.fork`` the child starts with no workers.
"""

from __future__ import annotations

import os
import queue
import threading
from collections.abc import Callable

__all__ = ["IDLE_SECONDS", "submit"]

IDLE_SECONDS = 30.0

Job = Callable[[], None]


class _Workers:
    __slots__ = ("idle", "jobs", "lock")

    def __init__(self) -> None:
        self.idle = 0
        self.jobs: queue.SimpleQueue[Job] = queue.SimpleQueue()
        self.lock = threading.Lock()

    def submit(self, job: Job) -> None:
        """Run ``job`` (which must not raise) on an idle worker, or on a new one."""
        with self.lock:
            if self.idle:
                self.idle -= 1  # that worker is spoken for
                self.jobs.put(job)
                return
        threading.Thread(
            target=self._work, args=(job,), name="guardrails-timeout", daemon=True
        ).start()

    def _work(self, job: Job) -> None:
        while True:
            job()
            with self.lock:
                self.idle += 1
            next_job = self._next()
            if next_job is None:
                return
            job = next_job

    def _next(self) -> Job | None:
        while True:
            try:
                return self.jobs.get(timeout=IDLE_SECONDS)
            except queue.Empty:
                with self.lock:
                    # A job put while this worker was timing out is still taken.
                    if self.jobs.empty():
                        self.idle -= 1
                        return None


_workers = _Workers()


def submit(job: Job) -> None:
    _workers.submit(job)


def _reset_after_fork() -> None:
    global _workers
    _workers = _Workers()


os.register_at_fork(after_in_child=_reset_after_fork)
