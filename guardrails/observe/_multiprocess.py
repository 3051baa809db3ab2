"""prometheus_client's multiprocess mode: the counts written through to its files.

With ``PROMETHEUS_MULTIPROC_DIR`` set before prometheus_client is imported,
every worker process writes its counts to its own file in that directory and
one scrape (``multiprocess_registry()``) sums them. Counters and the histogram
sum across processes. The gauges use the ``max`` mode: the last-escape and
last-fault times read the latest of any worker, and a guard registered in
any worker reads 1 in ``guardrails_guard_registered``, never the number of
workers, so "registered guards that never ran" counts guards, not
processes (``livesum`` or ``all`` would count or list workers).
"""

from __future__ import annotations

import os
import weakref
from functools import cache
from typing import Any

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, values

from ..errors import ConfigurationError
from ._metric_names import (
    APPROVAL_DECISION_TIME,
    APPROVAL_EVENTS,
    BACKSTOP_ACTIONS,
    CALL_BUCKETS,
    DECISION_BUCKETS,
    DURATION_BUCKETS,
    EXPORTED,
    FAIL_CLOSED_FAULTS,
    FAIL_OPEN_ESCAPES,
    GUARD_DURATION,
    GUARD_EVALUATIONS,
    GUARD_REGISTERED,
    HELP,
    LAST_ESCAPE,
    LAST_FAULT,
    POLICY_REVISION,
    TELEMETRY_FAILURES,
    TOOL_CALL_DURATION,
    TOOL_CALL_GUARD_TIME,
    TOOL_OUTCOMES,
)

ENV = "PROMETHEUS_MULTIPROC_DIR"

# The mode of every gauge, chosen for what the panels and alerts ask.
GAUGE_MODES = {
    GUARD_REGISTERED: "max",
    LAST_ESCAPE: "max",
    LAST_FAULT: "max",
    POLICY_REVISION: "max",
}


def multiprocess_enabled() -> bool:
    """Whether ``PROMETHEUS_MULTIPROC_DIR`` is set (and usable)."""
    path = os.environ.get(ENV)
    if not path:
        return False
    _check(path)
    return True


def _check(path: str | None) -> None:
    if not path or not os.path.isdir(path):
        raise ConfigurationError(f"{ENV}={path!r}: not a directory; create it before the workers")
    if not getattr(values.ValueClass, "_multiprocess", False):
        raise ConfigurationError(
            f"{ENV} was set after prometheus_client was imported; "
            "set it in the environment before the process starts"
        )


_COLLECTING: weakref.WeakSet[CollectorRegistry] = weakref.WeakSet()


def collect_into(registry: CollectorRegistry) -> None:
    """Give ``registry`` (once) the collector that sums every worker's file."""
    from prometheus_client import multiprocess

    if registry in _COLLECTING:
        return
    path = os.environ.get(ENV)
    _check(path)
    multiprocess.MultiProcessCollector(registry, path=path)  # type: ignore[no-untyped-call]
    _COLLECTING.add(registry)


def collecting_registry() -> CollectorRegistry:
    """A fresh registry whose only collector sums every worker's file."""
    from prometheus_client import multiprocess

    path = os.environ.get(ENV)
    if not path or not os.path.isdir(path):
        raise ConfigurationError(f"{ENV}={path!r}: not a directory")
    registry = CollectorRegistry()
    multiprocess.MultiProcessCollector(registry, path=path)  # type: ignore[no-untyped-call]
    return registry


@cache
def _metrics() -> dict[str, Any]:
    # One set per process: two sets of the same names would overwrite each
    # other's values in this process's file.
    def counter(name: str) -> Counter:
        return Counter(name, HELP[name], EXPORTED[name], registry=None)

    return {
        GUARD_EVALUATIONS: counter(GUARD_EVALUATIONS),
        FAIL_OPEN_ESCAPES: counter(FAIL_OPEN_ESCAPES),
        FAIL_CLOSED_FAULTS: counter(FAIL_CLOSED_FAULTS),
        TOOL_OUTCOMES: counter(TOOL_OUTCOMES),
        BACKSTOP_ACTIONS: counter(BACKSTOP_ACTIONS),
        TELEMETRY_FAILURES: counter(TELEMETRY_FAILURES),
        GUARD_DURATION: Histogram(
            GUARD_DURATION,
            HELP[GUARD_DURATION],
            EXPORTED[GUARD_DURATION],
            buckets=DURATION_BUCKETS,
            registry=None,
        ),
        GUARD_REGISTERED: Gauge(
            GUARD_REGISTERED,
            HELP[GUARD_REGISTERED],
            EXPORTED[GUARD_REGISTERED],
            multiprocess_mode="max",  # GAUGE_MODES
            registry=None,
        ),
        **{
            name: Gauge(name, HELP[name], EXPORTED[name], multiprocess_mode="max", registry=None)
            for name in (LAST_ESCAPE, LAST_FAULT, POLICY_REVISION)
        },
        **{
            name: Histogram(name, HELP[name], EXPORTED[name], buckets=CALL_BUCKETS, registry=None)
            for name in (TOOL_CALL_DURATION, TOOL_CALL_GUARD_TIME)
        },
        APPROVAL_EVENTS: counter(APPROVAL_EVENTS),
        APPROVAL_DECISION_TIME: Histogram(
            APPROVAL_DECISION_TIME,
            HELP[APPROVAL_DECISION_TIME],
            EXPORTED[APPROVAL_DECISION_TIME],
            buckets=DECISION_BUCKETS,
            registry=None,
        ),
    }


class Mirror:
    """Writes each count to prometheus_client's metrics (called under the recorder's lock)."""

    def __init__(self) -> None:
        _check(os.environ.get(ENV))
        self._m = _metrics()
        self._synced: dict[str, int] = {}
        # Children by (metric, labels): prometheus_client's labels() takes a
        # lock and checks the values on every call.
        self._children: dict[tuple[str, ...], Any] = {}

    def _child(self, name: str, *labels: str) -> Any:
        key = (name, *labels)
        child = self._children.get(key)
        if child is None:
            child = self._children[key] = self._m[name].labels(*labels)
        return child

    def guard(self, guard: str, point: str, mode: str) -> None:
        """A registered guard: its gauge at 1 and every series it can have, at zero."""
        from ..verdicts import EscapeReason, Verdict
        from ._metric_names import FAULT_REASONS

        child = self._child
        child(GUARD_REGISTERED, guard, point).set(1)
        for verdict in Verdict:
            child(GUARD_EVALUATIONS, guard, point, verdict.value, mode)
        for reason in EscapeReason:
            child(FAIL_OPEN_ESCAPES, guard, point, reason.value)
        for reason in FAULT_REASONS:
            child(FAIL_CLOSED_FAULTS, guard, point, reason.value)
        child(GUARD_DURATION, guard, point)

    def verdict(self, guard: str, point: str, verdict: str, mode: str) -> None:
        self._child(GUARD_EVALUATIONS, guard, point, verdict, mode).inc()

    def duration(self, guard: str, point: str, seconds: float) -> None:
        self._child(GUARD_DURATION, guard, point).observe(seconds)

    def escape(self, guard: str, point: str, reason: str, fault: bool, at: float) -> None:
        self._child(FAIL_CLOSED_FAULTS if fault else FAIL_OPEN_ESCAPES, guard, point, reason).inc()
        self._child(LAST_FAULT if fault else LAST_ESCAPE, guard, point, reason).set(at)

    def call_time(self, tool: str, call: float | None = None, guards: float = 0.0) -> None:
        """A tool call's latency (or, without ``call``, the tool's histograms at zero)."""
        whole, in_guards = (
            self._child(TOOL_CALL_DURATION, tool),
            self._child(TOOL_CALL_GUARD_TIME, tool),
        )
        if call is not None:
            whole.observe(call)
            in_guards.observe(guards)

    def approval(self, tool: str, events: tuple[str, ...], waited: float | None) -> None:
        """A call the approval gate held or ran (or, with no events, the tool's series at zero)."""
        from ._metric_names import APPROVAL_EVENT_VALUES

        for event in APPROVAL_EVENT_VALUES:
            self._child(APPROVAL_EVENTS, tool, event)
        for event in events:
            self._child(APPROVAL_EVENTS, tool, event).inc()
        decisions = self._child(APPROVAL_DECISION_TIME, tool)
        if waited is not None:
            decisions.observe(waited)

    def revision(self, revision: str) -> None:
        """A revision this process runs (it stays listed until the process ends)."""
        self._child(POLICY_REVISION, revision).set(1)

    def outcome(self, tool: str, outcome: str, n: int) -> None:
        self._child(TOOL_OUTCOMES, tool, outcome).inc(n)

    def backstop(self, rule: str, tool: str, n: int) -> None:
        self._child(BACKSTOP_ACTIONS, rule, tool).inc(n)

    def failures(self, recorder: str, n: int) -> None:
        self._child(TELEMETRY_FAILURES, recorder).inc(n)

    def sync_failures(self, totals: dict[str, int]) -> None:
        """Add what each watched recorder failed since the last sync."""
        for name, total in totals.items():
            delta = total - self._synced.get(name, 0)
            if delta > 0:
                self.failures(name, delta)
                self._synced[name] = total
