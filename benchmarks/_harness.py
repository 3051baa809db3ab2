"""Timing helpers shared by the ``bench_*.py`` modules.

The machine these run on is noisy and shared, so a figure alone means little.
Every group of cases is timed in interleaved rounds (case A, B, C, A, B, C,
...) so that a burst of load hits all of them alike; each case reports the
median over rounds of its per-operation time, and its ratio to a floor (a bare
call of the same function) measured in the same rounds.

A case is a zero-argument callable, or an ``async def`` function of no
arguments (timed inside one event loop). Each round runs the callable ``n``
times in a tight loop, with ``n`` calibrated once so that a round lasts about
``Budget.round_s`` seconds.
"""

from __future__ import annotations

import asyncio
import gc
import inspect
import statistics
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from itertools import repeat
from typing import Any

__all__ = [
    "FULL",
    "QUICK",
    "Budget",
    "budget",
    "check_row",
    "compare",
    "per_op_ns",
    "row",
    "throughput",
]

Row = dict[str, Any]
REQUIRED_KEYS = ("group", "name", "median_us")


@dataclass(frozen=True)
class Budget:
    """How long to measure: rounds per case and the target length of one round."""

    rounds: int
    round_s: float
    max_n: int = 1_000_000


FULL = Budget(rounds=201, round_s=0.0005)
QUICK = Budget(rounds=21, round_s=0.0005)


def budget(quick: bool) -> Budget:
    # Looked up at call time so a test can shrink QUICK further.
    return QUICK if quick else FULL


def _loop_sync(fn: Callable[[], Any], n: int) -> int:
    clock = time.perf_counter_ns
    start = clock()
    for _ in repeat(None, n):
        fn()
    return clock() - start


async def _loop_async(fn: Callable[[], Any], n: int) -> int:
    clock = time.perf_counter_ns
    start = clock()
    for _ in repeat(None, n):
        await fn()
    return clock() - start


class _Timer:
    """Runs one case ``n`` times and returns the elapsed nanoseconds."""

    def __init__(self, fn: Callable[[], Any], loop: asyncio.AbstractEventLoop | None) -> None:
        self.fn = fn
        self.is_async = inspect.iscoroutinefunction(fn)
        self.loop = loop

    def __call__(self, n: int) -> int:
        if self.is_async:
            assert self.loop is not None
            return self.loop.run_until_complete(_loop_async(self.fn, n))
        return _loop_sync(self.fn, n)


def _calibrate(timer: _Timer, spec: Budget) -> int:
    """Operations per round, so that a round lasts about ``spec.round_s``.

    Each size is timed three times and the fastest kept: one slow run (the
    first call after another case left the caches cold, a burst of load)
    would otherwise shrink a case's rounds to one or two operations, whose
    time is then mostly that cold start (an audited call measured 2.4x a
    bare INSERT with 2 calls per round, 1.4x with 20).
    """
    n = 1
    while True:
        elapsed = min(timer(n) for _ in range(3))
        if elapsed >= spec.round_s * 1e9 / 4 or n >= spec.max_n:
            break
        n *= 4
    per_op = max(elapsed / n, 1.0)
    return max(1, min(spec.max_n, int(spec.round_s * 1e9 / per_op)))


def per_op_ns(
    cases: Mapping[str, Callable[[], Any]],
    spec: Budget,
    between_rounds: Callable[[], Any] | None = None,
    collect_garbage: bool = False,
) -> dict[str, list[float]]:
    """Per-operation nanoseconds of each case, one sample per round, interleaved.

    ``between_rounds`` runs untimed after every round (for example to empty a
    list of recorded results that would otherwise grow for the whole run).
    The garbage collector is off during rounds (as in ``timeit``) unless
    ``collect_garbage``: then the collections a case's allocations cause are
    part of its time.
    """
    loop = (
        asyncio.new_event_loop() if any(map(inspect.iscoroutinefunction, cases.values())) else None
    )
    try:
        timers = {name: _Timer(fn, loop) for name, fn in cases.items()}
        for timer in timers.values():  # warm-up: caches, lazy imports, branch predictors
            timer(1)
        counts = {name: _calibrate(timer, spec) for name, timer in timers.items()}
        samples: dict[str, list[float]] = {name: [] for name in cases}
        names = list(cases)
        gc_was_enabled = gc.isenabled()
        gc.collect()
        if not collect_garbage:
            gc.disable()  # collections land at random in one case's round otherwise
        try:
            for r in range(spec.rounds):
                # Rotate the order each round: no case is always first after a pause.
                shift = r % len(names)
                for name in names[shift:] + names[:shift]:
                    samples[name].append(timers[name](counts[name]) / counts[name])
                    if between_rounds is not None:
                        between_rounds()
                gc.collect(1)  # the young generations only: a full pass over a big heap takes long
        finally:
            if gc_was_enabled:
                gc.enable()
        return samples
    finally:
        if loop is not None:
            loop.close()


def row(group: str, name: str, median_us: float, **extra: Any) -> Row:
    """A result row: ``group``, ``name``, ``median_us`` and anything else."""
    return {"group": group, "name": name, "median_us": round(median_us, 4), **extra}


def compare(
    group: str,
    cases: Mapping[str, Callable[[], Any]],
    *,
    floor: str,
    quick: bool,
    notes: Mapping[str, str] | None = None,
    between_rounds: Callable[[], Any] | None = None,
    collect_garbage: bool = False,
) -> list[Row]:
    """Time ``cases`` together; each row gets its ratio to, and time added over, ``floor``.

    Rows carry ``median_us``, ``ratio`` (median / floor median), ``added_us``
    (median - floor median), ``best_us`` (the fastest round: the least
    disturbed by other load), ``p25_us`` / ``p75_us`` across rounds, ``rounds``
    and ``floor``.
    """
    if floor not in cases:
        raise ValueError(f"floor {floor!r} is not one of the cases")
    samples = per_op_ns(cases, budget(quick), between_rounds, collect_garbage)
    floor_ns = statistics.median(samples[floor])
    rows = []
    for name, values in samples.items():
        median_ns = statistics.median(values)
        quartiles = statistics.quantiles(values, n=4) if len(values) > 1 else [median_ns] * 3
        rows.append(
            row(
                group,
                name,
                median_ns / 1e3,
                ratio=round(median_ns / floor_ns, 2),
                added_us=round((median_ns - floor_ns) / 1e3, 3),
                best_us=round(min(values) / 1e3, 4),
                p25_us=round(quartiles[0] / 1e3, 4),
                p75_us=round(quartiles[2] / 1e3, 4),
                rounds=len(values),
                floor=floor,
                **({"note": notes[name]} if notes and name in notes else {}),
            )
        )
    return rows


def throughput(work: Callable[[int], Any], ops: int, repeats: int) -> float:
    """Median operations per second of ``work(ops)`` (which performs ``ops`` operations)."""
    rates = []
    for _ in range(repeats):
        start = time.perf_counter()
        work(ops)
        rates.append(ops / (time.perf_counter() - start))
    return statistics.median(rates)


def check_row(r: Mapping[str, Any]) -> None:
    """Raise ``ValueError`` if ``r`` is not a well-formed result row."""
    for key in REQUIRED_KEYS:
        if key not in r:
            raise ValueError(f"row {r!r} lacks {key!r}")
    if not isinstance(r["group"], str) or not isinstance(r["name"], str):
        raise ValueError(f"row {r!r}: group and name must be strings")
    if r["median_us"] is not None and not (
        isinstance(r["median_us"], int | float) and r["median_us"] >= 0
    ):
        raise ValueError(f"row {r!r}: median_us must be a non-negative number or None")
    for key in ("ratio", "mb_per_s", "ops_per_s"):
        if key in r and r[key] is not None and not isinstance(r[key], int | float):
            raise ValueError(f"row {r!r}: {key} must be a number")
