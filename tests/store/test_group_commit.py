"""One group commit for threads and for the tasks of a loop: rows queued together, one write."""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Callable

from guardrails.store import AuditRow, StoreUnavailable
from guardrails.store._group_commit import AsyncBatcher, Batcher


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
