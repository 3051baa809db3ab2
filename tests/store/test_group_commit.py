"""One group commit for threads and for the tasks of a loop: rows queued together, one write."""

from __future__ import annotations

import asyncio
import itertools
import multiprocessing
import os
import random
import signal
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any, ClassVar

import pytest
from hypothesis import given
from hypothesis import strategies as st

from guardrails.store import AuditRow, StoreUnavailable
from guardrails.store._group_commit import AsyncBatcher, Batcher, Pending, _Thread


def _row(i: int) -> AuditRow:
    return AuditRow("tool_call", float(i), call_id=f"c{i}")


def _until(condition: Callable[[], bool]) -> None:
    deadline = time.monotonic() + 30
    while not condition():
        assert time.monotonic() < deadline, "never happened"
        time.sleep(0.001)


class Writer:
    """Records each write; the first waits for ``gate``; writes whose rows ``fail`` raise."""

    def __init__(self, fail: set[str] = frozenset()) -> None:  # type: ignore[assignment]
        self.batches: list[list[str | None]] = []
        self.gate = threading.Event()
        self.fail = fail

    def __call__(self, rows: list[AuditRow]) -> None:
        if not self.batches:
            assert self.gate.wait(30)
        self.batches.append([r.call_id for r in rows])
        if self.fail & {r.call_id for r in rows}:
            raise StoreUnavailable("refused")

    def written(self) -> set[str | None]:
        return {c for batch in self.batches for c in batch}


def _threads(batcher: Batcher, writer: Writer, count: int) -> dict[int, BaseException | None]:
    outcomes: dict[int, BaseException | None] = {}

    def commit(i: int) -> None:
        try:
            batcher.submit(_row(i))
        except BaseException as exc:
            outcomes[i] = exc
        else:
            assert f"c{i}" in writer.written()  # returned only once its row is written
            outcomes[i] = None

    first = threading.Thread(target=commit, args=(0,))
    first.start()
    _until(lambda: bool(batcher._pending.writing))  # the first caller writes, held by the gate
    others = [threading.Thread(target=commit, args=(i,)) for i in range(1, count)]
    for t in others:
        t.start()
    _until(lambda: len(batcher._pending.rows) == count - 1)
    writer.gate.set()
    for t in [first, *others]:
        t.join()
    return outcomes


def test_rows_queued_while_a_thread_writes_are_written_together_by_one_of_them() -> None:
    writer = Writer()
    outcomes = _threads(Batcher(writer), writer, 12)
    assert outcomes == dict.fromkeys(range(12))
    assert len(writer.batches) == 2 and sorted(map(len, writer.batches)) == [1, 11]


def test_a_failed_write_fails_every_thread_whose_row_was_in_it_and_no_other() -> None:
    writer = Writer(fail={"c5"})
    batcher = Batcher(writer)
    outcomes = _threads(batcher, writer, 12)
    assert outcomes[0] is None
    assert all(isinstance(outcomes[i], StoreUnavailable) for i in range(1, 12))
    batcher.submit(_row(99))  # the next write goes on
    assert writer.batches[-1] == ["c99"]


async def test_tasks_of_a_loop_share_one_write_and_a_cancelled_one_still_has_its_row() -> None:
    batches: list[list[str | None]] = []
    gate = asyncio.Event()

    async def write(rows: list[AuditRow]) -> None:
        if not batches:
            await gate.wait()
        batches.append([r.call_id for r in rows])

    batcher = AsyncBatcher(write)
    tasks = [asyncio.create_task(batcher.commit([_row(i)])) for i in range(3)]
    while not batcher._pending.writing:  # the writer took the first rows, held by the gate
        await asyncio.sleep(0)
    tasks += [asyncio.create_task(batcher.commit([_row(i)])) for i in range(3, 10)]
    while len(batcher._pending.rows) < 7:
        await asyncio.sleep(0)
    tasks[7].cancel()
    gate.set()
    results = await asyncio.gather(*tasks, return_exceptions=True)
    assert isinstance(results[7], asyncio.CancelledError)
    assert [r for i, r in enumerate(results) if i != 7] == [None] * 9
    assert batches == [["c0", "c1", "c2"], [f"c{i}" for i in range(3, 10)]]


async def test_a_failed_async_write_fails_every_task_in_it() -> None:
    async def write(rows: list[AuditRow]) -> None:
        if len(rows) > 1:
            raise StoreUnavailable("refused")

    batcher = AsyncBatcher(write)
    results = await asyncio.gather(
        *(batcher.commit([_row(i)]) for i in range(5)), return_exceptions=True
    )
    assert all(isinstance(r, StoreUnavailable) for r in results)  # queued together: one write
    await batcher.commit([_row(9)])  # alone, it is written


@given(
    sizes=st.lists(st.integers(min_value=1, max_value=12), min_size=1, max_size=40),
    most=st.integers(min_value=1, max_value=30),
)
def test_bounded_takes_keep_order_never_split_a_caller_and_take_everything(
    sizes: list[int], most: int
) -> None:
    pending: Pending[Any] = Pending()
    queued: list[tuple[int, list[AuditRow]]] = []
    n = 0
    for waiter, size in enumerate(sizes):
        rows = [_row(n + i) for i in range(size)]
        n += size
        queued.append((waiter, rows))
        pending.put(rows, waiter)
    takes: list[tuple[list[AuditRow], list[Any]]] = []
    while (taken := pending.take(most)) is not None:
        assert pending.take(most) is None  # one write at a time
        takes.append(taken)
        pending.written([], None)
    bounded = sum(1 for rows, _ in takes if len(rows) > most)
    assert bounded == sum(1 for rows, waiters in takes if len(waiters) == 1 and len(rows) > most)
    # Every take that could hold one more caller's rows within ``most`` did.
    for (rows, _), (_, following) in itertools.pairwise(takes):
        assert len(rows) + sizes[following[0]] > most
    assert [w for _, waiters in takes for w in waiters] == list(range(len(sizes)))
    assert [r for rows, _ in takes for r in rows] == [r for _, rows in queued for r in rows]
    for rows, waiters in takes:  # a caller's rows all in its take
        assert len(rows) == sum(sizes[w] for w in waiters)
    assert pending.sizes == [] and pending.rows == [] and pending.waiters == []


async def test_the_async_writer_takes_at_most_its_bound_and_serves_the_loop_between() -> None:
    batches: list[int] = []
    ticks = 0

    async def write(rows: list[AuditRow]) -> None:
        batches.append(len(rows))
        await asyncio.sleep(0)

    async def ticker() -> None:
        nonlocal ticks
        while True:
            ticks += 1
            await asyncio.sleep(0)

    batcher = AsyncBatcher(write, most=16)
    ticking = asyncio.create_task(ticker())
    await asyncio.gather(*(batcher.commit([_row(i)]) for i in range(100)))
    await asyncio.gather(*(batcher.commit([_row(i), _row(i + 1)]) for i in range(0, 40, 2)))
    ticking.cancel()
    assert sum(batches) == 140 and max(batches) == 16
    assert ticks >= len(batches)  # the loop ran other tasks between the writes


# -- who wakes, and who writes next -----------------------------------------------------------


class Recorder:
    """Records each write's rows and the thread that wrote it; the first (in the
    process that made it) waits for ``gate``."""

    def __init__(self) -> None:
        self.writes: list[tuple[list[str | None], str]] = []
        self.gate = threading.Event()
        self.lock = threading.Lock()
        self.pid = os.getpid()

    def __call__(self, rows: list[AuditRow]) -> None:
        if not self.writes and os.getpid() == self.pid:
            assert self.gate.wait(30)
        with self.lock:
            self.writes.append(([r.call_id for r in rows], threading.current_thread().name))


def test_the_next_write_goes_to_the_first_thread_queued_and_holds_every_row_queued() -> None:
    recorder = Recorder()
    batcher = Batcher(recorder)
    first = threading.Thread(target=batcher.submit, args=(_row(0),), name="t0")
    first.start()
    _until(lambda: batcher._pending.writing)
    others = []
    for i in range(1, 9):  # queued one after the other, in order
        others.append(threading.Thread(target=batcher.submit, args=(_row(i),), name=f"t{i}"))
        others[-1].start()
        _until(lambda i=i: len(batcher._pending.rows) == i)
    recorder.gate.set()
    for t in [first, *others]:
        t.join(30)
    assert recorder.writes == [(["c0"], "t0"), ([f"c{i}" for i in range(1, 9)], "t1")]


class CountingLock:
    """A lock that counts its releases: every wake-up of a waiting thread is one."""

    releases: ClassVar[list[int]] = []

    def __init__(self) -> None:
        self._lock = threading.Lock()

    def acquire(self) -> bool:
        return self._lock.acquire()

    def release(self) -> None:
        CountingLock.releases.append(id(self))
        self._lock.release()


def test_a_write_wakes_only_the_threads_whose_rows_it_held_and_one_heir(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    recorder = Recorder()
    batcher = Batcher(recorder)
    real_init = _Thread.__init__

    def counted_init(self: _Thread) -> None:
        real_init(self)
        self.lock = CountingLock()  # type: ignore[assignment]
        self.lock.acquire()

    monkeypatch.setattr(_Thread, "__init__", counted_init)
    monkeypatch.setattr(CountingLock, "releases", [])
    threads = [threading.Thread(target=batcher.submit, args=(_row(i),)) for i in range(10)]
    threads[0].start()
    _until(lambda: batcher._pending.writing)
    for t in threads[1:]:
        t.start()
    _until(lambda: len(batcher._pending.rows) == 9)
    recorder.gate.set()
    for t in threads:
        t.join(30)
    assert [len(rows) for rows, _ in recorder.writes] == [1, 9]
    # Nine threads waited: each was woken once (the first of them to write
    # the next batch, the other eight once it was written); none for nothing.
    assert len(CountingLock.releases) == 9 == len(set(CountingLock.releases))
    assert batcher._pending.writing is False and batcher._pending.waiters == []


def test_many_threads_each_return_after_their_rows_are_written_once_by_a_thread_among_them() -> (
    None
):
    recorder = Recorder()
    recorder.gate.set()
    batcher = Batcher(recorder)
    returned: list[str] = []

    def work(n: int) -> None:
        for i in range(200):
            call_id = f"w{n}-{i}"
            batcher.commit([AuditRow("tool_call", 1.0, call_id=call_id)])
            with recorder.lock:
                assert any(call_id in rows for rows, _ in recorder.writes)
                returned.append(call_id)

    threads = [threading.Thread(target=work, args=(n,), name=f"w{n}") for n in range(16)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    written = [c for rows, _ in recorder.writes for c in rows]
    assert sorted(written) == sorted(returned) and len(written) == 16 * 200
    # Every write was made by a thread whose own row was in it.
    assert all(any(c.startswith(f"{who}-") for c in rows) for rows, who in recorder.writes)
    grouped = sum(len(rows) > 1 for rows, _ in recorder.writes)
    assert grouped > 0, "no write ever held more than one row: nothing was grouped"


def test_a_failed_write_fails_its_threads_and_the_threads_queued_behind_it_are_written() -> None:
    writes: list[list[str | None]] = []
    gate = threading.Event()

    def write(rows: list[AuditRow]) -> None:
        if not writes:
            assert gate.wait(30)
        writes.append([r.call_id for r in rows])
        if len(writes) == 2:
            raise StoreUnavailable("refused")

    batcher = Batcher(write)
    outcomes: dict[int, BaseException | None] = {}

    def commit(i: int) -> None:
        try:
            batcher.submit(_row(i))
            outcomes[i] = None
        except StoreUnavailable as exc:
            outcomes[i] = exc

    threads = [threading.Thread(target=commit, args=(i,)) for i in range(9)]
    threads[0].start()
    _until(lambda: batcher._pending.writing)
    for t in threads[1:5]:  # the second write, which fails
        t.start()
    _until(lambda: len(batcher._pending.rows) == 4)
    gate.set()
    _until(lambda: len(writes) >= 2)
    for t in threads[5:]:  # queued after it: a third write
        t.start()
    for t in threads:
        t.join(30)
    failed = {i for i, e in outcomes.items() if e is not None}
    assert failed == {int(c[1:]) for c in writes[1] if c}  # exactly the failed write's threads
    assert sorted(c for batch in writes[2:] for c in batch if c) == sorted(
        f"c{i}" for i in range(9) if i not in failed and i != 0
    )


@pytest.fixture
def interruptible() -> Iterator[None]:
    """SIGINT raises ``KeyboardInterrupt`` in the main thread, even in a process started
    with SIGINT ignored (a shell's background job inherits that)."""
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, previous)


def _interrupt_main_while_it_waits(batcher: Batcher, queued: int) -> None:
    _until(lambda: len(batcher._pending.rows) == queued)
    signal.pthread_kill(threading.main_thread().ident or 0, signal.SIGINT)


def test_a_thread_interrupted_while_it_waits_raises_and_its_row_is_written_all_the_same(
    interruptible: None,
) -> None:
    recorder = Recorder()
    batcher = Batcher(recorder)
    first = threading.Thread(target=batcher.submit, args=(_row(0),), name="t0")
    first.start()
    _until(lambda: batcher._pending.writing)
    interrupter = threading.Thread(target=_interrupt_main_while_it_waits, args=(batcher, 1))
    interrupter.start()
    with pytest.raises(KeyboardInterrupt):
        batcher.submit(_row(1))  # the main thread waits behind t0's write
    interrupter.join()
    recorder.gate.set()
    first.join(30)
    # Nobody else was queued: the thread that wrote also wrote the interrupted row.
    assert recorder.writes == [(["c0"], "t0"), (["c1"], "t0")]
    batcher.submit(_row(2))
    assert recorder.writes[-1] == (["c2"], threading.current_thread().name)


def test_an_interrupted_thread_is_never_handed_the_next_write(interruptible: None) -> None:
    recorder = Recorder()
    batcher = Batcher(recorder)
    first = threading.Thread(target=batcher.submit, args=(_row(0),), name="t0")
    first.start()
    _until(lambda: batcher._pending.writing)
    interrupter = threading.Thread(target=_interrupt_main_while_it_waits, args=(batcher, 1))
    interrupter.start()
    with pytest.raises(KeyboardInterrupt):
        batcher.submit(_row(1))  # queued first: it would have been the heir
    interrupter.join()
    later = threading.Thread(target=batcher.submit, args=(_row(2),), name="t2")
    later.start()
    _until(lambda: len(batcher._pending.rows) == 2)
    recorder.gate.set()
    for t in (first, later):
        t.join(30)
    assert recorder.writes == [(["c0"], "t0"), (["c1", "c2"], "t2")]


_fork = multiprocessing.get_context("fork")


def _child_submits(batcher: Batcher, written: Any) -> None:
    batcher.submit(_row(7))  # the parent's write under way is not this process's
    written.put("ok")


def test_a_child_forked_while_a_parent_thread_writes_has_a_batcher_of_its_own() -> None:
    recorder = Recorder()
    batcher = Batcher(recorder)
    first = threading.Thread(target=batcher.submit, args=(_row(0),))
    first.start()
    _until(lambda: batcher._pending.writing)
    answers = _fork.Queue()
    child = _fork.Process(target=_child_submits, args=(batcher, answers))
    child.start()
    assert answers.get(timeout=30) == "ok"
    child.join(30)
    assert child.exitcode == 0
    recorder.gate.set()
    first.join(30)
    assert recorder.writes == [(["c0"], first.name)]  # the child's write stayed in the child


def test_a_lone_row_waits_for_the_threads_the_last_write_woke_and_goes_with_what_they_queue(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    recorder = Recorder()
    batcher = Batcher(recorder)
    held = threading.Event()
    leaving: list[str] = []
    real_left = Batcher._left

    def slow_left(self: Batcher) -> None:  # "b" is slow to get out of commit
        if threading.current_thread().name == "b":
            leaving.append("b")
            assert held.wait(30)
        real_left(self)

    monkeypatch.setattr(Batcher, "_left", slow_left)
    t0 = threading.Thread(target=batcher.submit, args=(_row(0),), name="t0")
    t0.start()
    _until(lambda: batcher._pending.writing)
    a = threading.Thread(target=batcher.submit, args=(_row(1),), name="a")
    a.start()
    _until(lambda: len(batcher._pending.rows) == 1)
    b = threading.Thread(target=batcher.submit, args=(_row(2),), name="b")
    b.start()
    _until(lambda: len(batcher._pending.rows) == 2)
    recorder.gate.set()  # t0's write ends; a writes [c1, c2] and wakes b, slow to leave
    _until(lambda: leaving == ["b"])
    t0.join(30)
    a.join(30)
    m = threading.Thread(target=batcher.submit, args=(_row(3),), name="m")
    m.start()
    _until(lambda: len(batcher._pending.rows) == 1)
    c = threading.Thread(target=batcher.submit, args=(_row(4),), name="c")
    c.start()
    _until(lambda: len(batcher._pending.rows) == 2)
    assert len(recorder.writes) == 2  # m waits for b rather than write its row alone
    held.set()
    for t in (b, m, c):
        t.join(30)
    assert recorder.writes == [(["c0"], "t0"), (["c1", "c2"], "a"), (["c3", "c4"], "m")]
    assert batcher._leaving == 0 and batcher._pending.writing is False


def test_a_thread_interrupted_while_it_gathers_writes_its_row_then_raises(
    monkeypatch: pytest.MonkeyPatch, interruptible: None
) -> None:
    recorder = Recorder()
    batcher = Batcher(recorder)
    held = threading.Event()
    real_left = Batcher._left

    def slow_left(self: Batcher) -> None:  # "b" is slow to get out of commit
        if threading.current_thread().name == "b":
            assert held.wait(30)
        real_left(self)

    monkeypatch.setattr(Batcher, "_left", slow_left)
    threads = []
    for i, name in enumerate(["t0", "a", "b"]):
        threads.append(threading.Thread(target=batcher.submit, args=(_row(i),), name=name))
        threads[-1].start()
        _until(lambda i=i: batcher._pending.writing and len(batcher._pending.rows) == i)
    recorder.gate.set()  # t0 writes [c0]; a writes [c1, c2] and wakes b, slow to leave
    _until(lambda: len(recorder.writes) == 2 and batcher._leaving == 1)

    def interrupt_the_gatherer() -> None:
        _until(lambda: batcher._gatherer is not None)
        signal.pthread_kill(threading.main_thread().ident or 0, signal.SIGINT)

    interrupter = threading.Thread(target=interrupt_the_gatherer)
    interrupter.start()
    with pytest.raises(KeyboardInterrupt):
        batcher.submit(_row(3))  # waits for b to leave, and is interrupted
    interrupter.join()
    main = threading.current_thread().name
    assert recorder.writes == [(["c0"], "t0"), (["c1", "c2"], "a"), (["c3"], main)]
    held.set()
    for t in threads:
        t.join(30)
    batcher.submit(_row(4))
    assert recorder.writes[-1] == (["c4"], main)
    assert batcher._leaving == 0 and batcher._gatherer is None


def test_every_thread_learns_the_outcome_of_the_write_its_row_was_in_under_load() -> None:
    lock = threading.Lock()
    outcomes: dict[str, bool] = {}  # call id -> whether the write it was in went in

    def write(rows: list[AuditRow]) -> None:
        failed = random.random() < 0.3
        with lock:
            for r in rows:
                assert r.call_id is not None and r.call_id not in outcomes
                outcomes[r.call_id] = not failed
        if failed:
            raise StoreUnavailable("refused")

    batcher = Batcher(write)
    seen: dict[str, bool] = {}

    def work(n: int) -> None:
        for i in range(150):
            call_id = f"w{n}-{i}"
            try:
                batcher.submit(AuditRow("tool_call", 1.0, call_id=call_id))
                seen[call_id] = True
            except StoreUnavailable:
                seen[call_id] = False

    threads = [threading.Thread(target=work, args=(n,)) for n in range(12)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert seen == outcomes and len(seen) == 12 * 150
    assert 0 < sum(seen.values()) < len(seen)  # both outcomes happened
    assert batcher._leaving == 0 and not batcher._pending.writing
