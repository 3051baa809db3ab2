"""Many concurrent ``acall``s of an audited, budgeted tool: throughput and event-loop lag.

Groups ``async.bare`` (the floor of the workload itself: as many bare
``async def`` calls gathered the same way), ``async.memory`` (the floor of
the calls: no I/O), ``async.sqlite`` and ``async.postgres`` (when
``GUARDRAILS_POSTGRES_DSN`` is set). The workload: ``CALLS`` concurrent
``acall``s on one event loop of
an async tool whose body is a ``PaidCall`` under a daily cap (a leased
reservation and its settlement), with ``AuditLog`` as hook and recorder (one
``tool_call`` and one ``paid_call`` row per call). Beside it a ticker task
asks to wake every millisecond and records how late it wakes: the loop's
worst lag (and the part of it during which the process ran: a loaded
machine takes the process off the CPU for milliseconds at a time); and the
longest single step the loop ran is timed (a store operation on the loop is
one long step). The same calls one after another through the sync ``call``
on one thread give the sync path's throughput.

Each group has two rows, measured round by round in the same minutes: the
calls all started in one step (``asyncio.gather`` makes the thousand tasks
at once: that step alone holds the loop 3-5 ms on this machine, bare
coroutines included, so the ticker's first wake-up measures ``gather`` more
than the calls), and the calls arriving ``ARRIVING`` per iteration of the
loop, as a server starts a task per request it reads (all of them still in
flight together: a call lasts far longer than the arrival of the others).
The second is the lag the calls themselves cause.

Each concurrent row gives the process's CPU per call (``cpu_us_per_call``) and
the share of it spent on the loop's own thread (``loop_cpu_us_per_call``); the
rest is the store threads' (the two take turns with one interpreter).

``FREEZE=1`` calls ``gc.freeze()`` after each warm-up: the garbage
collector's full collections then scan only the objects made since.
``DIAG=1`` attributes every late wake-up of the ticker to what held the loop
(collections, long steps, waits for the interpreter: ``_loop_diag``) and
prints it per round with the heap's growth between rounds, on stderr; its
timing wrappers slow the loop, so its throughput is not the benchmark's. It
first prints the objects the collector tracks per call in flight, with
``CALLS`` calls waiting for their reservation (the store thread held) and
then in the paid call's body (``in_flight``): what a full collection scans.
``FIRST=1`` measures only the first tick of calls started at once, taken
apart (``first_steps``): the time ``gather`` takes to make their tasks, then
the one iteration in which each takes its first step, for bare coroutines,
coroutines that yield once and the guarded calls.

Only public names are used, so the same file measures an older tree::

    (cd "$tree/benchmarks" && PYTHONPATH="$tree" python bench_async.py)

Run: ``python benchmarks/run.py --only async [--quick]``.
"""

from __future__ import annotations

import asyncio
import contextlib
import gc
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

from _harness import row
from _loop_diag import Diagnosis, heap_growth, heap_types

from guardrails import Guardrails, tool
from guardrails.audit import AuditLog
from guardrails.effects import PaidCall, Usage
from guardrails.store import MemoryStore, PostgresStore, SQLiteStore, Store
from guardrails.store.testing import postgres_dsn, temporary_schema

CALLS = 1000
TICK = 0.001
ARRIVING = 100
"""Calls started per iteration of the loop in the arriving rows (the others start
all in one step: ``gather`` makes every task at once, a floor of its own)."""
# FREEZE=1: the objects alive after each warm-up leave the garbage collector's
# generations (``gc.freeze()``), as a server may do once it has started.
FREEZE = bool(os.environ.get("FREEZE"))
DIAG = bool(os.environ.get("DIAG"))


def _rails(store: Store, reply: Any = None) -> tuple[Guardrails, Guardrails]:
    """The async rails and the sync rails of the same tool, store and audit log
    (``reply``: the paid call's body, by default one that answers at once)."""
    paid = PaidCall(store, usage=lambda _: Usage(10, 20, 0.000001), daily_cap=1e6, scope="bench")

    async def _reply(order_id: str) -> str:
        return order_id if reply is None else await reply(order_id)

    @tool
    async def lookup(order_id: str) -> str:
        return str(await paid.acall(_reply, order_id))

    @tool(name="lookup")
    def lookup_sync(order_id: str) -> str:
        return str(paid(lambda o: o, order_id))

    audit = AuditLog(store)
    return (
        Guardrails([lookup], hooks=[audit], recorder=[audit]),
        Guardrails([lookup_sync], hooks=[audit], recorder=[audit]),
    )


class _LongestStep:
    """The longest single step the loop ran (a callback or a task's step between awaits).

    A store operation run on the loop is one long step; many short steps
    that happen to be ready at once (a thousand calls started together) are
    not, though they delay the ticker all the same.
    """

    def __init__(self) -> None:
        self.worst = 0.0
        self._run = asyncio.events.Handle._run

    def __enter__(self) -> _LongestStep:
        original = self._run
        longest = self

        def timed(handle: asyncio.Handle) -> None:
            start = time.perf_counter()
            try:
                original(handle)
            finally:
                longest.worst = max(longest.worst, time.perf_counter() - start)

        setattr(asyncio.events.Handle, "_run", timed)  # noqa: B010 (mypy checks an assignment)
        return self

    def __exit__(self, *exc: object) -> None:
        setattr(asyncio.events.Handle, "_run", self._run)  # noqa: B010


# The neighbour: a process of its own that only waits a millisecond at a time (on its
# stdin, as a sleep would) and keeps each wake-up later than 0.2 ms (when, on the
# monotonic clock every process shares, and how late). Asked with a line "start end",
# it answers with its worst lateness in that window. Nothing of ours runs in it, and
# nothing of it runs in the benchmark's process while a round is measured.
_NEIGHBOUR = """
import select, sys, time
clock, wait, stdin = time.monotonic, select.select, sys.stdin
late_wakes = []
while True:
    before = clock()
    asked, _, _ = wait([stdin], [], [], 0.001)
    now = clock()
    if asked:
        line = stdin.readline()
        if not line:
            break
        start, end = map(float, line.split())
        print(max((late for when, late in late_wakes if start <= when <= end), default=0.0))
        sys.stdout.flush()
        late_wakes = [wake for wake in late_wakes if wake[0] > end]
        continue
    late = now - before - 0.001
    if late > 0.0002:
        late_wakes.append((now, late))
"""


class _Neighbour:
    """A process beside the benchmark that only waits, and how late the machine wakes it.

    The ticker's lateness has two parts: what our process did (the loop's own
    steps, the interpreter held by a store thread) and how long the machine
    took to give a core to a thread that was ready (its two cores shared with
    the database server and the store thread; what the host took). A process
    that does nothing but wake every millisecond sees only the second. Its
    worst lateness in a round is the machine's floor in that round.
    """

    def __init__(self) -> None:
        self.process = subprocess.Popen(
            [sys.executable, "-c", _NEIGHBOUR],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            text=True,
        )

    def worst(self, start: float, end: float) -> float:
        """The neighbour's worst lateness between two readings of ``time.monotonic()``."""
        assert self.process.stdin is not None and self.process.stdout is not None
        self.process.stdin.write(f"{start!r} {end!r}\n")
        self.process.stdin.flush()
        return float(self.process.stdout.readline())

    def close(self) -> None:
        """End the neighbour (its stdin closed, it leaves) and close its pipes."""
        assert self.process.stdin is not None and self.process.stdout is not None
        with contextlib.suppress(OSError):
            self.process.stdin.close()
        try:
            self.process.wait(timeout=5)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()
        self.process.stdout.close()


_neighbour: _Neighbour | None = None


@contextlib.contextmanager
def neighbour() -> Iterator[_Neighbour]:
    """A neighbour beside the rounds measured inside the block (``run`` starts one)."""
    global _neighbour
    started = _neighbour = _Neighbour()
    try:
        yield started
    finally:
        _neighbour = None
        started.close()


class _Ticker:
    """A task that asks to wake every ``TICK`` s and records how late it wakes.

    ``worst`` is the worst lateness. ``worst_running`` counts only the part of
    each lateness during which this process ran (its CPU time over the same
    interval, all threads): a process the operating system took off the CPU
    (a loaded machine) is late by that much too, through no work of its own.
    ``first`` is the lateness of the first tick, the one that spans the start
    of the burst: with every call started at once, mostly ``gather`` making
    its tasks in one step of the loop (the ticker wakes in that iteration,
    after it; the floor's bare coroutines pay it too), the calls' first steps
    coming in the next; ``worst_later`` the worst of every later tick.
    """

    def __init__(self, diagnosis: Diagnosis | None = None) -> None:
        self.worst = 0.0
        self.worst_running = 0.0
        self.first: float | None = None
        self.worst_later = 0.0
        self.done = False
        self.diagnosis = diagnosis

    async def tick(self) -> None:
        while not self.done:
            before, cpu = time.perf_counter(), time.process_time()
            await asyncio.sleep(TICK)
            ran = time.perf_counter()
            late = ran - before - TICK
            if self.diagnosis is not None:
                self.diagnosis.tick(before + TICK, ran)
            self.worst = max(self.worst, late)
            self.worst_running = max(self.worst_running, min(late, time.process_time() - cpu))
            if self.first is None:
                self.first = late
            else:
                self.worst_later = max(self.worst_later, late)


async def _concurrent(
    rails: Guardrails, calls: int, arriving: int | None = None
) -> tuple[float, ...]:
    """Seconds for ``calls`` concurrent acalls, the ticker's worst lateness (all of
    it, and while the process ran) and the longest single step of the loop (s);
    ``arriving``: started that many per iteration of the loop, else all at once."""
    results, *measured = await _gathered(_acalls(rails, calls), arriving)
    bad = [r for r in results if r.outcome != "ok" or r.escapes]
    if bad:
        raise RuntimeError(f"{len(bad)} calls did not pass cleanly: {bad[0]}")
    return tuple(measured)


def _acalls(rails: Guardrails, calls: int) -> list[Any]:
    """``calls`` coroutines of the workload's call, each in a turn of its own."""
    turns = [rails.turn(tenant="acme", session=f"s-{i}") for i in range(calls)]
    return [t.acall("lookup", {"order_id": "o-1"}) for t in turns]


async def _bare(calls: int, arriving: int | None = None) -> tuple[float, ...]:
    """The same measure of ``calls`` bare ``async def`` calls: the floor of the workload."""

    async def bare(order_id: str) -> str:
        return order_id

    _, *measured = await _gathered([bare("o-1") for _ in range(calls)], arriving)
    return tuple(measured)


async def _arriving(coros: list[Any], per_step: int) -> list[Any]:
    """Every coroutine's result, the tasks started ``per_step`` per iteration of the
    loop (as a server starts one per request read), then awaited one by one (no
    step of the loop adds a callback to every task, as ``gather`` does)."""
    tasks = []
    for start in range(0, len(coros), per_step):
        tasks += [asyncio.ensure_future(c) for c in coros[start : start + per_step]]
        await asyncio.sleep(0)
    return [await task for task in tasks]


async def _gathered(coros: list[Any], arriving: int | None) -> tuple[Any, ...]:
    diagnosis = Diagnosis() if DIAG else None
    ticker = _Ticker(diagnosis)
    ticking = asyncio.create_task(ticker.tick())
    await asyncio.sleep(TICK)
    with _LongestStep() as longest, diagnosis or contextlib.nullcontext():
        began = time.monotonic()
        start, cpu, machine = time.perf_counter(), time.process_time(), _machine()
        loop_cpu = time.thread_time()
        if arriving is None:
            results = await asyncio.gather(*coros)
        else:
            results = await _arriving(coros, arriving)
        elapsed, cpu = time.perf_counter() - start, time.process_time() - cpu
        loop_cpu = time.thread_time() - loop_cpu
        stolen = _stolen(machine, _machine())
        ended = time.monotonic()
        ticker.done = True
        await ticking
    if diagnosis is not None:
        print(f"  round: {elapsed * 1e3:.0f} ms, {diagnosis.report()}", file=sys.stderr)
    first = ticker.first or 0.0
    return (
        results,
        elapsed,
        ticker.worst,
        ticker.worst_running,
        longest.worst,
        cpu,
        first,
        ticker.worst_later,
        stolen,
        None if _neighbour is None else _neighbour.worst(began, ended),
        loop_cpu,
    )


def _machine() -> list[int] | None:
    """The machine's CPU time so far, in ticks, by kind (``/proc/stat``'s first line)."""
    try:
        with open("/proc/stat") as stat:
            return [int(field) for field in stat.readline().split()[1:]]
    except (OSError, ValueError):
        return None


def _stolen(before: list[int] | None, after: list[int] | None) -> float | None:
    """The share of the machine's CPU time the hypervisor took between the two readings
    (``steal``, the 8th field): the cores ran something else, and every thread waited.
    None where there is no ``/proc/stat``, or no tick (10 ms) passed between them."""
    if before is None or after is None or len(after) < 8:
        return None
    spent = [b - a for a, b in zip(before, after, strict=False)]
    total = sum(spent[:8])
    return spent[7] / total if total > 0 else None


def _sequential(rails: Guardrails, calls: int) -> tuple[float, float]:
    """Seconds for ``calls`` sync calls one after another, and the process's CPU time."""
    turn = rails.turn(tenant="acme", session="s-sync")
    start, cpu = time.perf_counter(), time.process_time()
    for _ in range(calls):
        result = turn.call("lookup", {"order_id": "o-1"})
        if result.outcome != "ok" or result.escapes:
            raise RuntimeError(f"a sync call did not pass cleanly: {result}")
    turn.results.clear()
    return time.perf_counter() - start, time.process_time() - cpu


def _measure(group: str, make: Callable[[], Store], quick: bool) -> list[dict[str, Any]]:
    calls = 200 if quick else CALLS
    rounds = 1 if quick else 3
    store = make()
    try:
        async_rails, sync_rails = _rails(store)
        asyncio.run(_concurrent(async_rails, 50))  # warm up: threads, connections
        if FREEZE:
            gc.freeze()
        concurrent = _both_ways(
            group,
            f"{calls} concurrent acall (audited, budgeted)",
            calls,
            rounds,
            lambda arriving: asyncio.run(_concurrent(async_rails, calls, arriving)),
        )
        spans, cpus = zip(*(_sequential(sync_rails, calls) for _ in range(rounds)), strict=True)
    finally:
        store.close()
    sync = statistics.median(spans)
    return [
        *concurrent,
        row(
            group,
            f"{calls} sequential sync call (one thread)",
            sync / calls * 1e6,
            calls_per_s=round(calls / sync),
            cpu_us_per_call=round(statistics.median(cpus) / calls * 1e6, 1),
        ),
    ]


def _floor(quick: bool) -> list[dict[str, Any]]:
    calls = 200 if quick else CALLS
    rounds = 1 if quick else 3
    asyncio.run(_bare(50))
    if FREEZE:
        gc.freeze()
    return _both_ways(
        "async.bare",
        f"{calls} concurrent bare async def calls",
        calls,
        rounds,
        lambda arriving: asyncio.run(_bare(calls, arriving)),
    )


def _both_ways(
    group: str, name: str, calls: int, rounds: int, one: Callable[[int | None], Any]
) -> list[dict[str, Any]]:
    """The rows of ``rounds`` rounds, each ``one(None)`` (every call started at once)
    then ``one(ARRIVING)`` (the same calls arriving), so both see the same minutes."""
    both = _rounds(group, lambda: (one(None), one(ARRIVING)), rounds)
    at_once, arriving = (list(mode) for mode in zip(*both, strict=True))
    return [
        _row(group, name, calls, at_once),
        _row(group, f"{name}, arriving {ARRIVING} per iteration", calls, arriving),
    ]


def _rounds(group: str, one: Callable[[], Any], rounds: int) -> list[Any]:
    """``rounds`` runs of ``one``; with ``DIAG``, the heap's growth between them too."""
    if not DIAG:
        return [one() for _ in range(rounds)]
    print(f"{group}:", file=sys.stderr)
    measured, before = [], heap_types()
    for _ in range(rounds):
        measured.append(one())
        after = heap_types()
        print(f"  kept since the last round: {heap_growth(before, after)}", file=sys.stderr)
        before = after
    return measured


def _row(group: str, name: str, calls: int, measured: list[tuple[float, ...]]) -> dict[str, Any]:
    spans, lags, running, steps, cpus, firsts, laters, stolen, neighbours, loop_cpus = (
        list(column) for column in zip(*measured, strict=True)
    )
    span = statistics.median(spans)
    return row(
        group,
        name,
        span / calls * 1e6,
        calls_per_s=round(calls / span),
        cpu_us_per_call=round(statistics.median(cpus) / calls * 1e6, 1),
        loop_cpu_us_per_call=round(statistics.median(loop_cpus) / calls * 1e6, 1),
        worst_loop_lag_ms=round(max(lags) * 1e3, 2),
        median_worst_loop_lag_ms=round(statistics.median(lags) * 1e3, 2),
        worst_lag_while_running_ms=round(max(running) * 1e3, 2),
        longest_step_ms=round(max(steps) * 1e3, 2),
        first_tick_lag_ms=round(max(firsts) * 1e3, 2),
        worst_lag_after_first_tick_ms=round(max(laters) * 1e3, 2),
        cpu_stolen_share=max((round(x, 3) for x in stolen if x is not None), default=None),
        neighbour_worst_lag_ms=None if None in neighbours else round(max(neighbours) * 1e3, 2),
    )


class _HeldSQLite(SQLiteStore):
    """A SQLite store whose reservations wait until ``opened`` is set (on its store thread)."""

    opened = threading.Event()

    def reserve_leased(self, *args: Any) -> bool:
        self.opened.wait()
        return bool(super().reserve_leased(*args))


async def _tracked_in_flight(store: _HeldSQLite, calls: int) -> dict[str, float]:
    """Objects the collector tracks per call in flight, ``calls`` of them, at two waits:
    for the reservation (the store thread held), and in the paid call's body."""
    in_body: list[str] = []
    release = asyncio.Event()

    async def reply(order_id: str) -> str:
        in_body.append(order_id)
        await release.wait()
        return order_id

    rails, _ = _rails(store, reply)
    turns = [rails.turn(tenant="acme", session=f"s-{i}") for i in range(calls)]
    counted: dict[str, float] = {}
    gc.collect()
    before = len(gc.get_objects())
    tasks = [asyncio.create_task(t.acall("lookup", {"order_id": "o-1"})) for t in turns]
    while not all(_innermost(t) == "PaidCall.acall" for t in tasks):
        await asyncio.sleep(0.01)
    gc.collect()
    counted["waiting for the reservation"] = (len(gc.get_objects()) - before) / calls
    store.opened.set()
    while len(in_body) < calls:
        await asyncio.sleep(0.01)
    gc.collect()
    counted["waiting in the tool"] = (len(gc.get_objects()) - before) / calls
    release.set()
    await asyncio.gather(*tasks)
    return counted


def _innermost(task: asyncio.Task[Any]) -> str:
    """The qualified name of the innermost coroutine the task is suspended in."""
    coro: Any = task.get_coro()
    while getattr(coro, "cr_await", None) is not None and hasattr(coro.cr_await, "cr_code"):
        coro = coro.cr_await
    return str(getattr(coro, "__qualname__", ""))


def in_flight(calls: int = CALLS) -> dict[str, float]:
    """``_tracked_in_flight`` on a fresh SQLite store, after a warm-up."""
    folder = tempfile.mkdtemp(prefix="guardrails-bench-async-")
    store = _HeldSQLite(os.path.join(folder, "a.db"))
    try:
        store.opened.set()
        asyncio.run(_concurrent(_rails(store)[0], 50))  # warm up: threads, connections
        store.opened.clear()
        return asyncio.run(_tracked_in_flight(store, calls))
    finally:
        store.opened.set()
        store.close()
        shutil.rmtree(folder, ignore_errors=True)


async def _first_steps_once(coros: list[Any]) -> tuple[float, float]:
    """Seconds to make a task of each coroutine (what ``gather`` does in its one step),
    then for one iteration of the loop, in which every task takes its first step."""
    start = time.perf_counter()
    tasks = [asyncio.ensure_future(c) for c in coros]
    made = time.perf_counter()
    await asyncio.sleep(0)  # the tasks' first steps were scheduled before this one's
    stepped = time.perf_counter()
    await asyncio.gather(*tasks)
    return made - start, stepped - made


def first_steps(quick: bool = False) -> list[dict[str, Any]]:
    """Where the first tick of ``calls`` started at once goes: making their tasks, then
    their first steps, for bare coroutines (each runs to its end), coroutines that
    yield once, and guarded calls (the gate lets in a slice of them, the rest queue)."""
    calls, rounds = (200, 3) if quick else (CALLS, 15)
    folder = tempfile.mkdtemp(prefix="guardrails-bench-async-")
    store = SQLiteStore(os.path.join(folder, "a.db"))

    async def bare() -> int:
        return 1

    async def yields_once() -> int:
        await asyncio.sleep(0)
        return 1

    try:
        rails = _rails(store)[0]
        asyncio.run(_concurrent(rails, 50))  # warm up: threads, connections
        kinds: dict[str, Callable[[], list[Any]]] = {
            "bare async def (runs to its end)": lambda: [bare() for _ in range(calls)],
            "async def that yields once": lambda: [yields_once() for _ in range(calls)],
            "guarded acall (SQLite, audited, budgeted)": lambda: _acalls(rails, calls),
        }
        if FREEZE:
            gc.freeze()
        rows = []
        for name, make in kinds.items():
            made, stepped = zip(
                *(asyncio.run(_first_steps_once(make())) for _ in range(rounds)), strict=True
            )
            rows.append(
                row(
                    "async.first_steps",
                    f"{calls} tasks made at once, then their first steps: {name}",
                    statistics.median(stepped) * 1e6 / calls,
                    tasks_made_ms=round(statistics.median(made) * 1e3, 2),
                    first_steps_ms=round(statistics.median(stepped) * 1e3, 2),
                    worst_first_steps_ms=round(max(stepped) * 1e3, 2),
                    rounds=rounds,
                )
            )
        return rows
    finally:
        store.close()
        shutil.rmtree(folder, ignore_errors=True)


def run(quick: bool = False) -> list[dict[str, Any]]:
    with neighbour():
        return _groups(quick)


def _groups(quick: bool) -> list[dict[str, Any]]:
    # The floors: bare coroutines gathered the same way (the workload's own
    # lag), then the same calls on a MemoryStore (no I/O at all).
    if DIAG:
        print(f"tracked objects per call in flight: {in_flight()}", file=sys.stderr)
    rows = _floor(quick)
    rows += _measure("async.memory", MemoryStore, quick)
    folder = tempfile.mkdtemp(prefix="guardrails-bench-async-")
    try:
        rows += _measure("async.sqlite", lambda: SQLiteStore(os.path.join(folder, "a.db")), quick)
    finally:
        shutil.rmtree(folder, ignore_errors=True)
    dsn = postgres_dsn()
    if dsn is not None:
        with temporary_schema(dsn) as scoped:
            rows += _measure("async.postgres", lambda: PostgresStore(scoped), quick)
    return rows


if __name__ == "__main__":
    # FIRST=1: only where the first tick of the calls started at once goes (``first_steps``).
    measure = first_steps if os.environ.get("FIRST") else run
    for found in measure(quick=bool(os.environ.get("QUICK"))):
        print(found)
