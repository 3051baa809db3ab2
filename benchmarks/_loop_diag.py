"""Why a ticker woke late: every late wake-up attributed to what held the loop.

``DIAG=1 python bench_async.py`` runs each round under a ``Diagnosis``, which
records, for the round:

- every garbage collection (``gc.callbacks``): generation, duration, objects
  collected, and for full collections the objects the collector had to scan
  (counted before the pause is timed, so the count does not lengthen it);
- every step of the loop (``Handle._run``) longer than ``SLOW`` s, named by
  its callback;
- every wait of the loop in its selector that ended later than asked, and of
  that lateness the CPU time the process's other threads used meanwhile
  (time the loop's thread could not run its Python: the interpreter lock
  held by a store thread, or no CPU for it);
- each tick of the ticker (when it was due, when it ran).

``report()`` gives, over the ticks later than ``LATE`` s, how much of their
lateness each cause covered (a cause counts for the part of it inside the
tick's window), the worst tick's breakdown, and the heap after the round.
``heap_growth()`` compares the object counts by type between rounds: what
the process keeps alive across rounds.

Diagnostic only: the timing wrappers cost microseconds per step, so the
throughput of a diagnosed run is not the benchmark's figure.
"""

from __future__ import annotations

import asyncio
import gc
import selectors
import time
from collections import Counter, defaultdict
from typing import Any

__all__ = ["Diagnosis", "heap_growth", "heap_types"]

SLOW = 0.0005
"""Loop steps at least this long are recorded."""

LATE = 0.002
"""Ticks at least this late are attributed."""

_now = time.perf_counter


class Diagnosis:
    """Records what held the loop during one round (see the module's docstring)."""

    def __init__(self) -> None:
        self.collections: list[
            tuple[float, float, int, int, int]
        ] = []  # start, end, gen, collected, scanned
        self.steps: list[tuple[float, float, str]] = []
        self.selects: list[tuple[float, float, float]] = []  # due, returned, others' CPU meanwhile
        self.ticks: list[tuple[float, float]] = []  # due, ran
        self._gc_start = (0.0, 0)

    # -- installing the probes --------------------------------------------------------

    def __enter__(self) -> Diagnosis:
        # The methods as they are now (another probe may have wrapped them): put back on exit.
        self._run = asyncio.events.Handle._run
        self._select = selectors.DefaultSelector.select
        gc.callbacks.append(self._on_gc)
        steps, original_run = self.steps, self._run

        def timed_run(handle: asyncio.Handle) -> None:
            start = _now()
            try:
                original_run(handle)
            finally:
                end = _now()
                if end - start >= SLOW:
                    steps.append((start, end, _name(handle)))

        selects, original_select = self.selects, self._select

        def timed_select(selector: Any, timeout: float | None = None) -> Any:
            start, process, thread = _now(), time.process_time(), time.thread_time()
            events = original_select(selector, timeout)
            end = _now()
            if timeout is not None and end - start - timeout > SLOW:
                others = (time.process_time() - process) - (time.thread_time() - thread)
                selects.append((start + timeout, end, max(0.0, others)))
            return events

        # setattr: the probes replace the methods (mypy checks their signatures otherwise)
        setattr(asyncio.events.Handle, "_run", timed_run)  # noqa: B010
        setattr(selectors.DefaultSelector, "select", timed_select)  # noqa: B010
        return self

    def __exit__(self, *exc: object) -> None:
        gc.callbacks.remove(self._on_gc)
        setattr(asyncio.events.Handle, "_run", self._run)  # noqa: B010
        setattr(selectors.DefaultSelector, "select", self._select)  # noqa: B010

    def _on_gc(self, phase: str, info: dict[str, int]) -> None:
        generation = info["generation"]
        if phase == "start":
            scanned = len(gc.get_objects()) if generation == 2 else 0  # frozen ones excluded
            self._gc_start = (_now(), scanned)
        else:
            start, scanned = self._gc_start
            self.collections.append((start, _now(), generation, info["collected"], scanned))

    def tick(self, due: float, ran: float) -> None:
        self.ticks.append((due, ran))

    # -- the attribution ------------------------------------------------------------------

    def report(self) -> dict[str, Any]:
        late = [(due, ran) for due, ran in self.ticks if ran - due >= LATE]
        totals: Counter[str] = Counter()
        worst: dict[str, float] = {}
        worst_late = 0.0
        for due, ran in late:
            parts = self._causes(due, ran)
            totals.update(parts)
            if ran - due > worst_late:
                worst_late, worst = ran - due, parts
        full = [c for c in self.collections if c[2] == 2]
        return {
            "late_ticks": len(late),
            "lateness_ms": round(sum(ran - due for due, ran in late) * 1e3, 1),
            "by_cause_ms": {k: round(v * 1e3, 1) for k, v in totals.most_common()},
            "worst_tick_ms": round(worst_late * 1e3, 2),
            "worst_tick_causes_ms": {k: round(v * 1e3, 2) for k, v in worst.items()},
            "collections": dict(Counter(f"gen{c[2]}" for c in self.collections)),
            "full_collections_ms": [round((c[1] - c[0]) * 1e3, 1) for c in full],
            "full_collection_scanned": [c[4] for c in full],
            "slowest_steps": [
                (round((end - start) * 1e3, 2), name)
                for start, end, name in sorted(self.steps, key=lambda s: s[0] - s[1])[:5]
            ],
            "tracked_objects": len(gc.get_objects()),
            "frozen_objects": gc.get_freeze_count(),
        }

    def _causes(self, due: float, ran: float) -> dict[str, float]:
        """The tick's lateness by cause; a collection counts first (it may run in
        a step, or in a store thread while the loop waits), then steps, then waits."""
        parts: defaultdict[str, float] = defaultdict(float)
        collected: list[tuple[float, float]] = []
        for start, end, generation, _, _ in self.collections:
            if _overlap(start, end, due, ran):
                parts[f"gc gen{generation}"] += _overlap(start, end, due, ran)
                collected.append((max(start, due), min(end, ran)))
        for start, end, name in self.steps:
            inside = _overlap(start, end, due, ran) - _covered(collected, start, end)
            parts[f"step {name}"] += max(0.0, inside)
        for wanted, returned, others in self.selects:
            waited = _overlap(wanted, returned, due, ran) - _covered(collected, wanted, returned)
            if waited > 0:
                share = min(waited, others)
                parts["select: other threads ran"] += share
                parts["select: late, process idle"] += waited - share
        explained = sum(parts.values())
        parts["the loop's own steps (each < 0.5 ms)"] = max(0.0, ran - due - explained)
        return {k: v for k, v in parts.items() if v > 0}


def _overlap(start: float, end: float, low: float, high: float) -> float:
    return max(0.0, min(end, high) - max(start, low))


def _covered(spans: list[tuple[float, float]], low: float, high: float) -> float:
    return sum(_overlap(start, end, low, high) for start, end in spans)


def _name(handle: asyncio.Handle) -> str:
    callback = getattr(handle, "_callback", None)
    owner = getattr(callback, "__self__", None)
    if isinstance(owner, asyncio.Task):
        coro = owner.get_coro()
        return f"task {getattr(coro, '__qualname__', coro)}"
    return str(getattr(callback, "__qualname__", callback))


def heap_types() -> Counter[str]:
    """The objects the collector tracks, by type name."""
    return Counter(type(o).__qualname__ for o in gc.get_objects())


def heap_growth(before: Counter[str], after: Counter[str], top: int = 8) -> list[tuple[str, int]]:
    """The types whose tracked objects grew most from ``before`` to ``after``."""
    grown = after.copy()
    grown.subtract(before)
    return [(name, n) for name, n in grown.most_common(top) if n > 0]
