"""The counts of one guard, and the metric families built from a snapshot of all counts.

Every registered guard gets all its series at zero: 3 verdicts in its mode,
every escape reason, every fault reason, the histogram and the registered
gauge (``SERIES_PER_GUARD``), so ``increase()`` sees the first event.
"""

from __future__ import annotations

from dataclasses import dataclass

from prometheus_client.core import (
    CounterMetricFamily,
    GaugeMetricFamily,
    HistogramMetricFamily,
    Metric,
)
from prometheus_client.samples import Exemplar

from ..verdicts import ChokePoint, EscapeReason, Outcome, Verdict
from ._metric_names import (
    BACKSTOP_ACTIONS,
    CALL_BUCKETS,
    DURATION_BUCKETS,
    ENFORCE,
    EXPORTED,
    FAIL_CLOSED_FAULTS,
    FAIL_OPEN_ESCAPES,
    FAULT_REASONS,
    GUARD_DURATION,
    GUARD_EVALUATIONS,
    GUARD_REGISTERED,
    HELP,
    LAST_ESCAPE,
    LAST_FAULT,
    OBSERVE,
    POLICY_REVISION,
    TELEMETRY_FAILURES,
    TOOL_CALL_DURATION,
    TOOL_CALL_GUARD_TIME,
    TOOL_OUTCOMES,
)

# 3 verdicts + 9 escape reasons + 5 fault reasons + the histogram's 20 buckets,
# _sum and _count + 1 registered gauge.
SERIES_PER_GUARD = len(Verdict) + len(EscapeReason) + len(FAULT_REASONS) + 22 + 1


class GuardSeries:
    """The counts of one (guard, choke-point): verdicts by mode, duration, escapes, faults."""

    __slots__ = (
        "buckets",
        "enforced",
        "escape_last",
        "escapes",
        "exemplars",
        "fault_last",
        "faults",
        "modes",
        "nanos",
        "observed",
    )

    def __init__(self) -> None:
        self.enforced = dict.fromkeys(Verdict, 0)
        self.observed = dict.fromkeys(Verdict, 0)
        self.modes: set[str] = set()  # the modes whose verdicts are exposed even at zero
        self.buckets = [0] * (len(DURATION_BUCKETS) + 1)  # the last one is +Inf
        self.nanos = 0  # the sum, kept exact in integer nanoseconds
        self.escapes: dict[EscapeReason, int] = {}
        self.faults: dict[EscapeReason, int] = {}
        # Unix time of the latest escape and fault by reason (no entry: none yet).
        self.escape_last: dict[EscapeReason, float] = {}
        self.fault_last: dict[EscapeReason, float] = {}
        # The trace id of the latest escape or fault by (fault?, reason), if traced.
        self.exemplars: dict[tuple[bool, EscapeReason], str] = {}

    @property
    def verdicts(self) -> dict[str, dict[Verdict, int]]:
        """The verdict counts by mode."""
        return {ENFORCE: self.enforced, OBSERVE: self.observed}

    def copy(self) -> GuardSeries:
        new = GuardSeries()
        new.enforced = self.enforced.copy()
        new.observed = self.observed.copy()
        new.modes = set(self.modes)
        new.buckets = self.buckets.copy()
        new.nanos = self.nanos
        new.escapes = self.escapes.copy()
        new.faults = self.faults.copy()
        new.escape_last = self.escape_last.copy()
        new.fault_last = self.fault_last.copy()
        new.exemplars = self.exemplars.copy()
        return new


class ToolSeries:
    """The latency of one tool's calls: the whole call and the time in its guards.

    Counted in place by the recorder (``metrics.py``), under its lock.
    """

    __slots__ = ("call_buckets", "call_nanos", "guard_buckets", "guard_nanos")

    def __init__(self) -> None:
        self.call_buckets = [0] * (len(CALL_BUCKETS) + 1)  # the last one is +Inf
        self.guard_buckets = [0] * (len(CALL_BUCKETS) + 1)
        self.call_nanos = 0
        self.guard_nanos = 0

    def copy(self) -> ToolSeries:
        new = ToolSeries()
        new.call_buckets, new.guard_buckets = self.call_buckets.copy(), self.guard_buckets.copy()
        new.call_nanos, new.guard_nanos = self.call_nanos, self.guard_nanos
        return new


@dataclass(frozen=True, slots=True)
class Snapshot:
    guards: list[tuple[tuple[str, ChokePoint], GuardSeries]]
    outcomes: list[tuple[tuple[str, Outcome], int]]
    backstop: list[tuple[tuple[str, str], int]]
    registered: list[tuple[str, ChokePoint]]
    failures: list[tuple[str, int]]
    calls: list[tuple[str, ToolSeries]]
    revisions: list[str]


def build_families(s: Snapshot) -> list[Metric]:
    """The families of one scrape, every registered guard's series included at zero."""
    evaluations, escapes, faults, duration, last_escape, last_fault = _guard_families(s)
    outcomes = _counter(TOOL_OUTCOMES)
    for (tool, outcome), count in s.outcomes:
        outcomes.add_metric((tool, outcome.value), count)
    actions = _counter(BACKSTOP_ACTIONS)
    for labels, count in s.backstop:
        actions.add_metric(labels, count)
    listed = GaugeMetricFamily(
        GUARD_REGISTERED, HELP[GUARD_REGISTERED], labels=EXPORTED[GUARD_REGISTERED]
    )
    for guard, point in s.registered:
        listed.add_metric((guard, point.value), 1)
    failures = _counter(TELEMETRY_FAILURES)
    for name, count in s.failures:
        failures.add_metric((name,), count)
    call_time = _histogram(TOOL_CALL_DURATION)
    guard_time = _histogram(TOOL_CALL_GUARD_TIME)
    for tool, calls in s.calls:
        call_time.add_metric((tool,), *_cumulative(calls.call_buckets, calls.call_nanos))
        guard_time.add_metric((tool,), *_cumulative(calls.guard_buckets, calls.guard_nanos))
    revisions = _gauge(POLICY_REVISION)
    for revision in s.revisions:
        revisions.add_metric((revision,), 1)
    return [
        evaluations,
        escapes,
        faults,
        outcomes,
        actions,
        duration,
        listed,
        failures,
        last_escape,
        last_fault,
        call_time,
        guard_time,
        revisions,
    ]


def _guard_families(s: Snapshot) -> tuple[Metric, ...]:
    """The per-guard families: evaluations, escapes, faults, durations, last escape and
    fault times."""
    evaluations = _counter(GUARD_EVALUATIONS)
    escapes = _counter(FAIL_OPEN_ESCAPES)
    faults = _counter(FAIL_CLOSED_FAULTS)
    duration = HistogramMetricFamily(
        GUARD_DURATION, HELP[GUARD_DURATION], labels=EXPORTED[GUARD_DURATION]
    )
    last_escape, last_fault = _gauge(LAST_ESCAPE), _gauge(LAST_FAULT)
    registered = set(s.registered)
    for (guard, point), series in s.guards:
        cp = point.value
        for mode, counts in series.verdicts.items():
            if mode in series.modes or any(counts.values()):
                for verdict, count in counts.items():
                    evaluations.add_metric((guard, cp, verdict.value, mode), count)
        zero = (guard, point) in registered
        for reason in EscapeReason:
            count = series.escapes.get(reason, 0)
            if zero or count:
                exemplar = _exemplar(series, False, reason, series.escape_last)
                escapes.add_metric((guard, cp, reason.value), count, exemplar=exemplar)
        for reason in sorted(FAULT_REASONS | series.faults.keys()):
            count = series.faults.get(reason, 0)
            if zero or count:
                exemplar = _exemplar(series, True, reason, series.fault_last)
                faults.add_metric((guard, cp, reason.value), count, exemplar=exemplar)
        for family, latest in ((last_escape, series.escape_last), (last_fault, series.fault_last)):
            for reason, at in sorted(latest.items()):
                family.add_metric((guard, cp, reason.value), at)
        cumulative, total = [], 0
        for bound, count in zip((*DURATION_BUCKETS, float("inf")), series.buckets, strict=True):
            total += count
            cumulative.append((_le(bound), total))
        duration.add_metric((guard, cp), cumulative, series.nanos / 1e9)
    return evaluations, escapes, faults, duration, last_escape, last_fault


def _counter(name: str) -> CounterMetricFamily:
    return CounterMetricFamily(name, HELP[name], labels=EXPORTED[name])


def _exemplar(
    series: GuardSeries, fault: bool, reason: EscapeReason, last: dict[EscapeReason, float]
) -> Exemplar | None:
    """The latest event's trace id, as an OpenMetrics exemplar (None when it was not traced)."""
    trace_id = series.exemplars.get((fault, reason))
    if trace_id is None:
        return None
    return Exemplar({"trace_id": trace_id}, 1.0, last.get(reason))


def _histogram(name: str) -> HistogramMetricFamily:
    return HistogramMetricFamily(name, HELP[name], labels=EXPORTED[name])


def _cumulative(buckets: list[int], nanos: int) -> tuple[list[tuple[str, float]], float]:
    cumulative: list[tuple[str, float]] = []
    total = 0
    for bound, count in zip((*CALL_BUCKETS, float("inf")), buckets, strict=True):
        total += count
        cumulative.append((_le(bound), total))
    return cumulative, nanos / 1e9


def _gauge(name: str) -> GaugeMetricFamily:
    return GaugeMetricFamily(name, HELP[name], labels=EXPORTED[name])


def _le(bound: float) -> str:
    return "+Inf" if bound == float("inf") else repr(float(bound))
