"""The async side of a store: its operations run on the store's own threads, never on the loop.

``off_loop(store)`` gives the ``OffLoop`` of a store (one per store and
process). An async caller awaits ``run(fn, *args)`` (any sync function that
uses the store, run with the caller's context variables) or ``append(row)``;
the event loop goes on serving other tasks meanwhile. Audit rows queued
together are written in one ``append_many`` (one transaction, one commit),
and each caller is answered only after its row is committed. The answers
reach each loop a chunk of callers per iteration, whichever store thread
they come from (``WAKE_CHUNK`` first, then as many as keep the loop's iterations
within its slice), so that the steps of the callers they wake are spread over
iterations, not run back to back. ``drain()`` waits until everything queued so far is done (it runs at
exit, for the operations of tasks cancelled while they waited: those still
complete).

Store work alone (``store_only``: the steps of a reservation or a settlement,
audit rows) runs on one thread per store, pass after pass. PostgreSQL, which
may hold several connections, also gets up to three more threads for the
jobs that are not store work alone (a guard reading the store), so a slow
guard holds up no store work; SQLite runs everything on its one thread (its
writes are serialised by the file lock anyway). One thread for the store
work, not one per connection: the threads of a process share one
interpreter with the event loop's, and four of them running psycopg at once
kept the loop waiting for it for milliseconds. A store that can run
a thread's operations in one transaction (``SQLiteStore.grouped``) runs each
pass's store-only work in one: the thread takes everything queued, runs it,
commits once, then answers; a job that is not store work alone
(``store_only=False``: a guard reading the store) runs outside it. A ``MemoryStore``
answers in microseconds under a lock and runs inline.
"""

from __future__ import annotations

import asyncio
import atexit
import contextlib
import contextvars
import logging
import os
import sys
import threading
import time
import weakref
from collections import deque
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

from .. import _fair
from ._base import AuditRow
from ._group_commit import Batcher
from .memory import MemoryStore

__all__ = ["OffLoop", "off_loop"]

T = TypeVar("T")
log = logging.getLogger("guardrails")

_MAX_BATCH = 128
# Whether the interpreter has a GIL (a free-threaded build may run without one; it can
# enable one later, never drop it, so the answer read at import stays safe).
_GIL: bool = getattr(sys, "_is_gil_enabled", lambda: True)()
ROWS_PER_WRITE = 32
"""The most audit rows one write takes on a store that cannot group a pass (PostgreSQL):
a write seals and encodes its rows while holding the interpreter, about 20 µs a row, so
the event loop's thread may wait that long for it."""
WAKE_CHUNK = 8
"""How many callers the first iteration of a series of answers wakes. Each later one wakes
as many as keep the loop's iterations within its slice, as the admission gate lets callers
in (``_fair.next_burst``: at most twice the last, at most ``_fair.MAX_BURST``, at least one)."""


class _Job:
    __slots__ = ("args", "context", "fn", "future", "loop", "lost", "row", "steps", "store_only")

    def __init__(
        self,
        loop: asyncio.AbstractEventLoop,
        future: asyncio.Future[Any],
        row: AuditRow | None = None,
        fn: Callable[..., Any] | None = None,
        args: tuple[Any, ...] = (),
        context: contextvars.Context | None = None,
        store_only: bool = True,
        lost: Callable[[Any], object] | None = None,
        steps: Any = None,
    ) -> None:
        self.loop = loop
        self.future = future
        self.row = row
        self.fn = fn
        self.args = args
        self.context = context
        self.store_only = store_only  # only store calls and decisions: may share a transaction
        self.lost = lost  # gets the value when its caller had stopped waiting (see ``submit``)
        self.steps = steps  # not None: the job is ``fn(store, steps)`` (``drive``), no ``args``


class OffLoop:
    """Runs the operations of one store on its own threads, for async callers."""

    def __init__(self, store: Any, threads: int = 1, *, others: bool = False) -> None:
        self.store = store
        # Store work alone (``store_only``: steps, audit rows; short, with bounded
        # waits) runs on one thread, pass after pass. With more threads allowed, the
        # rest run the jobs that are not store work alone (a guard reading the store)
        # in a lane of their own: a slow guard holds up no store work, and the store
        # work's thread shares the interpreter with no other store thread.
        self.threads = threads if others else 1
        self.others: OffLoop | None = (
            OffLoop(store, threads - 1, others=True) if threads > 1 and not others else None
        )
        # Rows are committed through the store's own group commit when it has
        # one (its sync callers' rows then share the commits), else through ours.
        found = getattr(store, "batcher", None)
        self.batcher: Batcher = found if isinstance(found, Batcher) else Batcher(_writer(store))
        # A store that can run a thread's operations in one transaction (SQLite's
        # ``grouped``) gets each pass's store work in one, committed before any answer.
        self.grouped: Callable[[], contextlib.AbstractContextManager[None]] | None = getattr(
            store, "grouped", None
        )
        # A store that bounds a pass's waits for a lock (SQLite's ``one_pass``:
        # one ``busy_timeout``, then the rest of the pass fails at once) gets each pass in one.
        self.one_pass: Callable[[], contextlib.AbstractContextManager[None]] = getattr(
            store, "one_pass", contextlib.nullcontext
        )
        self._reset()

    def _reset(self) -> None:
        self._pid = os.getpid()
        self._cond = threading.Condition()
        self._queue: deque[_Job] = deque()
        self._workers: list[threading.Thread] = []
        self._busy = 0
        self._waiting = 0  # workers waiting for a job

    # -- for async callers ----------------------------------------------------------

    def run(self, fn: Callable[..., T], /, *args: Any, store_only: bool = False) -> Awaitable[T]:
        """``fn(*args)`` on a store thread, with this task's context variables.

        ``store_only``: ``fn`` does nothing but store calls and quick decisions
        between them (``steps.perform``), so it may share the transaction of
        the other store work of its pass; anything else (a guard) runs alone.
        """
        return self.submit(fn, *args, store_only=store_only)

    def submit(
        self,
        fn: Callable[..., T],
        /,
        *args: Any,
        store_only: bool = False,
        lost: Callable[[T], object] | None = None,
    ) -> asyncio.Future[T]:
        """``run`` as a future of the running loop, queued at once.

        The work runs whether or not the future is still awaited. ``lost``:
        when it succeeded after its future was cancelled (the caller stopped
        waiting), ``lost(value)`` runs on the loop, in the caller's context:
        what ``asyncio.shield`` and a done callback would do, without their
        future, closures and contexts for every call.
        """
        if not store_only and self.others is not None:
            return self.others.submit(fn, *args, lost=lost)
        return self._queued(fn, args, store_only, lost, None)

    def drive(
        self,
        driver: Callable[[Any, Any], T],
        steps: Any,
        /,
        lost: Callable[[T], object] | None = None,
    ) -> asyncio.Future[T]:
        """``submit(driver, self.store, steps, store_only=True, lost=lost)``, the job holding
        ``steps`` itself rather than a tuple of arguments (a call waiting for its store
        work holds one object fewer)."""
        return self._queued(driver, (), True, lost, steps)

    def _queued(
        self,
        fn: Callable[..., T],
        args: tuple[Any, ...],
        store_only: bool,
        lost: Callable[[T], object] | None,
        steps: Any,
    ) -> asyncio.Future[T]:
        """A job of ``fn`` in this task's context, queued; its future, of the running loop."""
        loop = asyncio.get_running_loop()
        future: asyncio.Future[T] = loop.create_future()
        context = contextvars.copy_context()
        self._put(_Job(loop, future, None, fn, args, context, store_only, lost, steps))
        return future

    def append(self, row: AuditRow, /) -> asyncio.Future[None]:
        """Append ``row``: a future done once it is committed (with the rows queued alongside)."""
        loop = asyncio.get_running_loop()
        future: asyncio.Future[None] = loop.create_future()
        self._put(_Job(loop, future, row=row))
        return future

    def drain(self, timeout: float | None = None) -> bool:
        """Wait until every job queued so far is done; False if ``timeout`` passed first."""
        if self._pid != os.getpid():
            return True
        start = time.monotonic()
        with self._cond:
            if not self._cond.wait_for(lambda: not self._queue and not self._busy, timeout):
                return False
        if self.others is None:
            return True
        left = None if timeout is None else max(0.0, timeout - (time.monotonic() - start))
        return self.others.drain(left)

    # -- the store threads --------------------------------------------------------------

    def _put(self, job: _Job) -> None:
        if self._pid != os.getpid():
            self._reset()  # a forked child has neither the threads nor their queue
        queue = self._queue
        queue.append(job)  # (a deque's append is atomic: the workers take under the lock)
        # A busy worker takes it with the rest of its next pass: the lock is needed only
        # to wake a waiting worker or to start one. (Appended first, read second; a worker
        # is counted first, then looks: one counted after this read sees the job.) That
        # order holds under the GIL; a build without one takes the lock every time.
        if _GIL and not self._waiting and len(self._workers) >= self.threads:
            return
        with self._cond:
            # ``_workers`` holds the live workers: one that ends takes itself out.
            if len(self._workers) < self.threads and self._busy + len(queue) > len(self._workers):
                worker = threading.Thread(
                    target=self._work, name="guardrails-store-off-loop", daemon=True
                )
                self._workers.append(worker)
                worker.start()
            self._cond.notify()

    def _work(self) -> None:
        try:
            while True:
                with self._cond:
                    # Counted before it looks at the queue: a put that finds no one
                    # counted was appended before this look, so the job is seen.
                    self._waiting += 1
                    try:
                        while not self._queue:
                            self._cond.wait()
                    finally:
                        self._waiting -= 1
                    taken = self._take()
                    self._busy += 1
                try:
                    with self.one_pass():
                        self._run_all(taken)
                finally:
                    del taken  # a worker keeps nothing of a pass while it waits (futures, rows)
                    with self._cond:
                        self._busy -= 1
                        self._cond.notify_all()
        finally:  # only a stop (KeyboardInterrupt) it passed on ends a worker
            with self._cond, contextlib.suppress(ValueError):
                self._workers.remove(threading.current_thread())

    def _run_all(self, taken: list[list[_Job]]) -> None:
        """Run one pass, then answer its callers: one wake-up of each loop.

        With a store that groups (``grouped``), consecutive store-only
        segments run in one transaction; a segment that is not store-only
        (a guard reading the store) runs on its own between them.
        """
        done: list[tuple[_Job, bool, Any]] = []
        index = 0
        try:
            while index < len(taken):
                end = self._run_end(taken, index)
                done += self._execute_run(taken[index:end])
                index = end
        except BaseException as exc:  # a stop of the process: answer all, then go
            jobs = [job for segment in taken for job in segment]
            _answer(done + [(job, False, exc) for job in jobs[len(done) :]])
            raise
        _answer(done)

    def _run_end(self, taken: list[list[_Job]], index: int) -> int:
        """Where the run of segments from ``index`` that share one transaction ends."""
        end = index + 1
        if self.grouped is not None and _store_only(taken[index]):
            while end < len(taken) and _store_only(taken[end]):
                end += 1
        return end

    def _execute_run(self, run: list[list[_Job]]) -> list[tuple[_Job, bool, Any]]:
        if self.grouped is None or not _store_only(run[0]):
            return [answer for segment in run for answer in self._execute(segment)]
        done: list[tuple[_Job, bool, Any]] = []
        try:
            with self.grouped():
                for segment in run:
                    done += self._execute(segment)
        except Exception as exc:  # not committed: nothing of the run was written
            return [(job, False, exc) for segment in run for job in segment]
        return done

    def _take(self) -> list[list[_Job]]:
        """The next jobs, rows that follow one another as one segment (one commit).

        The store work's thread takes everything queued, up to ``_MAX_BATCH``
        jobs, and answers them together (a segment of rows holds at most
        ``ROWS_PER_WRITE`` of them on a store that cannot group the pass); the
        threads of the other jobs (``others``) each take one segment, so that
        they work in parallel.
        """
        queue = self._queue
        segments: list[list[_Job]] = []
        taken = 0
        while queue and taken < _MAX_BATCH:
            job = queue.popleft()
            taken += 1
            if (
                job.row is not None
                and segments
                and segments[-1][0].row is not None
                and (self.grouped is not None or len(segments[-1]) < ROWS_PER_WRITE)
            ):
                segments[-1].append(job)
                continue
            if segments and self.threads > 1:
                queue.appendleft(job)
                break
            segments.append([job])
        return segments

    def _execute(self, batch: list[_Job]) -> list[tuple[_Job, bool, Any]]:
        first = batch[0]
        try:
            if first.fn is not None:
                assert first.context is not None
                if first.steps is None:
                    value = first.context.run(first.fn, *first.args)
                else:
                    value = first.context.run(first.fn, self.store, first.steps)
            else:
                value = None
                self.batcher.commit([job.row for job in batch if job.row is not None])
        except Exception as exc:
            return [(job, False, exc) for job in batch]
        return [(job, True, value) for job in batch]


def _store_only(segment: list[_Job]) -> bool:
    first = segment[0]
    return first.row is not None or first.store_only


def _writer(store: Any) -> Callable[[list[AuditRow]], None]:
    def write(rows: list[AuditRow]) -> None:
        if len(rows) == 1:
            store.append(rows[0])
        else:
            store.append_many(rows)

    return write


def _answer(done: list[tuple[_Job, bool, Any]]) -> None:
    """Hand the answers of ``done`` to their loops (``_Waking.post``: a loop already
    due to take answers is not woken again)."""
    by_loop: dict[asyncio.AbstractEventLoop, list[tuple[_Job, bool, Any]]] = {}
    for answer in done:
        by_loop.setdefault(answer[0].loop, []).append(answer)
    for loop, answers in by_loop.items():
        _waking(loop).post(loop, answers)


class _Waking:
    """The answers waiting for one event loop, from every store thread.

    A store thread ``post``s its answers to the inbox and wakes the loop only
    when no wake-up is already due: under load, answers that arrive while the
    loop has not yet taken the last ones ride along, instead of each pass of
    each thread writing to the loop's wake-up pipe (and its thread competing
    for the interpreter to read it). The loop then sets the results itself,
    a chunk of callers per iteration, so that their steps are spread over
    iterations, not run back to back: ``WAKE_CHUNK`` in the first iteration
    of a series, then as many as keep the iterations within the loop's
    slice (the steps of cheap calls share fewer iterations, and costly ones
    more).
    """

    __slots__ = ("__weakref__", "chunk", "clock", "drained", "due", "inbox", "lock")

    def __init__(self) -> None:
        self.inbox: deque[tuple[_Job, bool, Any]] = deque()
        self.lock = threading.Lock()
        self.due = False  # a drain is scheduled on the loop and will see the inbox
        self.chunk = WAKE_CHUNK  # how many callers this drain wakes
        self.clock = time.perf_counter
        self.drained: float | None = None  # when the last drain of this series ran

    def post(self, loop: asyncio.AbstractEventLoop, answers: list[tuple[_Job, bool, Any]]) -> None:
        """From any thread: queue ``answers``; wake the loop unless a drain is due."""
        self.inbox.extend(answers)  # before the check: a drain that ends re-checks under the lock
        with self.lock:
            if self.due:
                return
            self.due = True
        try:
            loop.call_soon_threadsafe(self.drain)
        except RuntimeError:  # the loop closed meanwhile: nobody waits for these any more
            with self.lock:
                self.due = False
            self.inbox.clear()

    def drain(self) -> None:
        """On the loop: settle a chunk of callers, and come back while any wait."""
        now = self.clock()
        if self.drained is not None:  # the last iteration ran the steps of the last chunk
            self.chunk = _fair.next_burst(self.chunk, now - self.drained, _fair.gate().slice)
        inbox = self.inbox
        chunk = self.chunk
        woken = 0
        while inbox and woken < chunk:
            job, ok, value = inbox.popleft()
            future = job.future
            if future.done():  # the waiting task was cancelled: the work was done anyway
                if ok and job.lost is not None:  # (a callback: nothing it raises stops the drain)
                    job.loop.call_soon(job.lost, value, context=job.context)
                continue
            woken += 1
            if ok:
                future.set_result(value)
            else:
                future.set_exception(value)
        if not inbox:
            with self.lock:
                if not inbox:  # (a thread that posted meanwhile saw ``due`` and left it to us)
                    self.due = False
                    self.chunk, self.drained = WAKE_CHUNK, None  # the series ends
                    return
        self.drained = now
        asyncio.get_running_loop().call_soon(self.drain)


_wakings: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, _Waking] = (
    weakref.WeakKeyDictionary()
)
_wakings_lock = threading.Lock()


def _waking(loop: asyncio.AbstractEventLoop) -> _Waking:
    with _wakings_lock:
        found = _wakings.get(loop)
        if found is None:
            found = _wakings[loop] = _Waking()
        return found


_lock = threading.Lock()
_by_store: weakref.WeakKeyDictionary[Any, OffLoop] = weakref.WeakKeyDictionary()
_unweakable: dict[int, tuple[Any, OffLoop]] = {}
# The store asked for last and its OffLoop: an async call asks three times for the same
# store, and a lookup in ``_by_store`` makes a weak reference each time. (The OffLoop
# holds its store anyway: keeping it here keeps nothing alive that was not.)
_last: tuple[Any, OffLoop] | None = None


def off_loop(store: Any) -> OffLoop | None:
    """The ``OffLoop`` of ``store``, or ``None`` for a store that never blocks (memory)."""
    global _last
    last = _last
    if last is not None and last[0] is store:
        return last[1]
    if type(store) is MemoryStore:
        return None
    found = _registered(store)
    _last = (store, found)
    return found


def _registered(store: Any) -> OffLoop:
    try:
        found = _by_store.get(store)
    except TypeError:  # not weakly referenceable: kept for the life of the process
        held = _unweakable.get(id(store))
        found = held[1] if held is not None and held[0] is store else None
    if found is not None:
        return found
    with _lock:
        made = OffLoop(store, _threads(store))
        try:
            found = _by_store.setdefault(store, made)
        except TypeError:
            found = _unweakable.setdefault(id(store), (store, made))[1]
    return found


def _threads(store: Any) -> int:
    inner = getattr(store, "store", store)  # through WithDeadline
    size = getattr(inner, "off_loop_threads", 1)
    return size if type(size) is int and size > 0 else 1


# The functions below return the awaitable itself, not a coroutine that awaits
# it: a call waiting on the store then holds no frame of ours (the garbage
# collector scans every object a call in flight holds, and a thousand calls
# hold thousands).


def run(store: Any, fn: Callable[..., T], /, *args: Any, store_only: bool = False) -> Awaitable[T]:
    """``fn(*args)`` off the loop when ``store`` may block, inline when it cannot
    (``store_only``: see ``OffLoop.run``)."""
    return submit(store, fn, *args, store_only=store_only)


def submit(
    store: Any,
    fn: Callable[..., T],
    /,
    *args: Any,
    store_only: bool = False,
    lost: Callable[[T], object] | None = None,
) -> asyncio.Future[T]:
    """``run`` as a future, queued at once (done at once for a store that cannot block;
    ``lost``: see ``OffLoop.submit``)."""
    runner = off_loop(store)
    if runner is not None:
        return runner.submit(fn, *args, store_only=store_only, lost=lost)
    return _inline(fn, *args)


def drive(
    store: Any,
    driver: Callable[[Any, Any], T],
    steps: Any,
    /,
    lost: Callable[[T], object] | None = None,
) -> asyncio.Future[T]:
    """``submit(store, driver, store, steps, store_only=True, lost=lost)`` (``OffLoop.drive``)."""
    runner = off_loop(store)
    if runner is not None:
        return runner.drive(driver, steps, lost)
    return _inline(driver, store, steps)


def append(store: Any, row: AuditRow, /) -> Awaitable[None]:
    """``store.append(row)`` off the loop when ``store`` may block, inline when it cannot.

    A store with an async path (``async_path()``: PostgreSQL's async pool)
    writes it on the loop, without blocking it.
    """
    found = async_path(store)
    if found is not None:
        return found.append(row)  # type: ignore[no-any-return]
    runner = off_loop(store)
    return _inline(store.append, row) if runner is None else runner.append(row)


def _inline(fn: Callable[..., Any], /, *args: Any) -> asyncio.Future[Any]:
    """``fn(*args)`` now, as a done future (a store that never blocks)."""
    future: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
    try:
        future.set_result(fn(*args))
    except Exception as exc:
        future.set_exception(exc)
    return future


def async_path(store: Any) -> Any:
    """The store's own path for async callers (``PostgresStore(async_pool=True)``), or None."""
    method = getattr(type(store), "async_path", None)
    return None if method is None else method(store)


def _drain_all() -> None:
    for runner in [*_by_store.values(), *(held[1] for held in _unweakable.values())]:
        if not runner.drain(timeout=10):
            log.warning("audit rows still queued at exit were not written")


atexit.register(_drain_all)
