"""The approval metrics: counts and decision times by tool, and the age of the oldest waiting request.

Counted in place by the recorder (``metrics.py``), under its lock, from the
approval gate's events (``_approval_event.py``). The oldest pending request is
read from the gates' stores when Prometheus scrapes: the store is shared by
every process and replica, so one scrape sees every request, and a decision
taken elsewhere (the CLI, the HTTP endpoint) shows at the next scrape.
"""

from __future__ import annotations

from bisect import bisect_left
from collections.abc import Iterable, Mapping
from typing import Any

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, HistogramMetricFamily
from prometheus_client.metrics_core import Metric

from ._metric_names import (
    APPROVAL_DECISION_TIME,
    APPROVAL_EVENT_VALUES,
    APPROVAL_EVENTS,
    APPROVAL_OLDEST_PENDING,
    DECISION_BUCKETS,
    EXPORTED,
    HELP,
)

__all__ = [
    "PENDING_LIMIT",
    "ApprovalSeries",
    "approval_books",
    "approval_families",
    "oldest_pending",
    "pending_family",
]

PENDING_LIMIT = 10_000
"""How many of the newest pending requests a scrape reads from each store."""


class ApprovalSeries:
    """One tool's approval counts and decision times."""

    __slots__ = ("buckets", "events", "seconds")

    def __init__(self) -> None:
        self.events = dict.fromkeys(APPROVAL_EVENT_VALUES, 0)
        self.buckets = [0] * (len(DECISION_BUCKETS) + 1)  # the last one is +Inf
        self.seconds = 0.0

    def count(self, events: Iterable[str], decision_seconds: float | None) -> None:
        """Count ``events`` (a ``KeyError`` for a value outside the closed set, before any count)."""
        events = tuple(events)
        counts = self.events
        for event in events:
            counts[event]
        for event in events:
            counts[event] += 1
        if decision_seconds is not None:
            self.buckets[bisect_left(DECISION_BUCKETS, decision_seconds)] += 1
            self.seconds += decision_seconds

    def copy(self) -> ApprovalSeries:
        new = ApprovalSeries()
        new.events, new.buckets, new.seconds = dict(self.events), self.buckets.copy(), self.seconds
        return new


def approval_families(series: Iterable[tuple[str, ApprovalSeries]]) -> list[Metric]:
    """The event counter and the decision-time histogram, every tool's series included."""
    events = CounterMetricFamily(
        APPROVAL_EVENTS, HELP[APPROVAL_EVENTS], labels=EXPORTED[APPROVAL_EVENTS]
    )
    decisions = HistogramMetricFamily(
        APPROVAL_DECISION_TIME,
        HELP[APPROVAL_DECISION_TIME],
        labels=EXPORTED[APPROVAL_DECISION_TIME],
    )
    for tool, s in series:
        for event, count in s.events.items():
            events.add_metric((tool, event), count)
        cumulative, total = [], 0
        for bound, count in zip((*DECISION_BUCKETS, float("inf")), s.buckets, strict=True):
            total += count
            cumulative.append(("+Inf" if bound == float("inf") else repr(bound), total))
        decisions.add_metric((tool,), cumulative, s.seconds)
    return [events, decisions]


def approval_books(engines: Iterable[Any]) -> list[Any]:
    """The stores of the bound engines' approval gates, each once."""
    books: list[Any] = []
    for engine in engines:
        for hook in getattr(getattr(engine, "_pipeline", None), "hooks", ()):
            book = getattr(hook, "book", None)
            gate = getattr(hook, "grants_approval", False) is True and book is not None
            if gate and not any(book is b for b in books):
                books.append(book)
    return books


def oldest_pending(
    books: Iterable[Any], tools: set[str], unknown: str, now: float
) -> dict[str, float]:
    """Seconds the oldest pending request of each tool has waited (0 for a tool with none).

    A tool outside ``tools`` counts under ``unknown``. A store that cannot
    answer raises: the scrape counts a recorder failure.
    """
    ages = dict.fromkeys(tools, 0.0)
    for book in books:
        for record in book.approvals("pending", now, PENDING_LIMIT):
            tool = record.tool if record.tool in tools else unknown
            ages[tool] = max(ages.get(tool, 0.0), now - float(record.requested_at))
    return ages


def pending_family(ages: Mapping[str, float]) -> GaugeMetricFamily:
    family = GaugeMetricFamily(
        APPROVAL_OLDEST_PENDING,
        HELP[APPROVAL_OLDEST_PENDING],
        labels=EXPORTED[APPROVAL_OLDEST_PENDING],
    )
    for tool, age in sorted(ages.items()):
        family.add_metric((tool,), max(0.0, age))
    return family
