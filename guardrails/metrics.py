"""Prometheus metrics: the public names and labels, and the recorder that fills them.

Every label value comes from a closed set: guard names and tool names as
registered in code, and the values of ``Verdict``, ``Outcome``, ``ChokePoint``
and ``EscapeReason``. A tool name the model invented is counted under
``UNKNOWN_TOOL``, so a hostile model cannot create series.

The recorder keeps plain integers behind one lock per recorder and builds the
families when Prometheus scrapes (a prometheus_client ``Collector``): one lock
per call instead of one per counter child keeps the cost of a call with a
guard under a microsecond. The price: prometheus_client's multiprocess mode
does not see these series; run one registry per process.
"""

from __future__ import annotations

import logging
import threading
from bisect import bisect_left
from collections.abc import Iterable, Iterator, Mapping
from typing import Any

from prometheus_client import REGISTRY, CollectorRegistry
from prometheus_client.core import (
    CounterMetricFamily,
    GaugeMetricFamily,
    HistogramMetricFamily,
    Metric,
)
from prometheus_client.registry import Collector

from .context import Escape, ToolResult, VerdictRecord
from .verdicts import ChokePoint, EscapeReason, Outcome, Verdict

__all__ = [
    "BACKSTOP_ACTIONS",
    "DURATION_BUCKETS",
    "EXPORTED",
    "FAIL_OPEN_ESCAPES",
    "GUARD_DURATION",
    "GUARD_EVALUATIONS",
    "GUARD_REGISTERED",
    "TELEMETRY_FAILURES",
    "TOOL_OUTCOMES",
    "UNKNOWN",
    "UNKNOWN_TOOL",
    "PrometheusRecorder",
    "registered_guards",
]

log = logging.getLogger("guardrails")

# -- names and labels (public API) --------------------------------------------

GUARD_EVALUATIONS = "guardrails_guard_evaluations_total"
FAIL_OPEN_ESCAPES = "guardrails_fail_open_escapes_total"
TOOL_OUTCOMES = "guardrails_tool_outcomes_total"
BACKSTOP_ACTIONS = "guardrails_backstop_actions_total"
GUARD_DURATION = "guardrails_guard_duration_seconds"
GUARD_REGISTERED = "guardrails_guard_registered"
TELEMETRY_FAILURES = "guardrails_telemetry_failures_total"

GUARD = "guard"
CHOKE_POINT = "choke_point"
VERDICT = "verdict"
REASON = "reason"
TOOL = "tool"
OUTCOME = "outcome"
RULE = "rule"
RECORDER = "recorder"

# Every family and its labels, as exposed (histograms also expose _bucket with
# ``le``, _sum and _count).
EXPORTED: Mapping[str, tuple[str, ...]] = {
    GUARD_EVALUATIONS: (GUARD, CHOKE_POINT, VERDICT),
    FAIL_OPEN_ESCAPES: (GUARD, CHOKE_POINT, REASON),
    TOOL_OUTCOMES: (TOOL, OUTCOME),
    BACKSTOP_ACTIONS: (RULE, TOOL),
    GUARD_DURATION: (GUARD, CHOKE_POINT),
    GUARD_REGISTERED: (GUARD, CHOKE_POINT),
    TELEMETRY_FAILURES: (RECORDER,),
}

UNKNOWN_TOOL = "_unknown"
"""The ``tool`` label value of every call to a tool that is not registered."""

UNKNOWN = "_unknown"
"""The label value for a backstop rule or tool that the payload did not name."""

# Guards run in microseconds to seconds.
DURATION_BUCKETS = (
    0.00001,
    0.000025,
    0.00005,
    0.0001,
    0.00025,
    0.0005,
    0.001,
    0.0025,
    0.005,
    0.01,
    0.025,
    0.05,
    0.1,
    0.25,
    0.5,
    1.0,
    2.5,
    5.0,
    10.0,
)
_BUCKETS_NS = tuple(round(b * 1e9) for b in DURATION_BUCKETS)


def registered_guards(engine: Any) -> frozenset[tuple[str, ChokePoint]]:
    """Every (guard name, choke-point) an engine will evaluate."""
    pairs: set[tuple[str, ChokePoint]] = set()
    for g in getattr(engine, "guards", {}).values():
        pairs.update((g.name, ChokePoint(cp)) for cp in g.choke_points)
    for t in getattr(engine, "tools", {}).values():
        for g in (*getattr(t, "guards", ()), *getattr(t, "output_guards", ())):
            pairs.add((g.name, ChokePoint.TOOL_CALL))
    return frozenset(pairs)


class _GuardSeries:
    """The counts of one (guard, choke-point): verdicts, duration histogram, escapes."""

    __slots__ = ("buckets", "escapes", "nanos", "verdicts")

    def __init__(self) -> None:
        self.verdicts: dict[Verdict, int] = dict.fromkeys(Verdict, 0)
        self.buckets = [0] * (len(DURATION_BUCKETS) + 1)  # the last one is +Inf
        self.nanos = 0  # the sum, kept exact in integer nanoseconds
        self.escapes: dict[EscapeReason, int] = {}


class PrometheusRecorder:
    """A recorder that counts verdicts, escapes, outcomes and backstop actions.

    ``registry`` defaults to prometheus_client's default registry. ``bind``
    (or ``engine=``) learns the registered guards and tools: their series are
    exposed at zero, and ``guardrails_guard_registered`` lists the guards, so
    ``guardrails coverage`` can flag the ones that never ran.
    """

    name = "prometheus"

    def __init__(self, registry: CollectorRegistry | None = None, *, engine: Any = None) -> None:
        self.failures = 0
        self._lock = threading.Lock()
        self._guards: dict[tuple[str, ChokePoint], _GuardSeries] = {}
        self._outcomes: dict[tuple[str, Outcome], int] = {}
        self._backstop: dict[tuple[str, str], int] = {}
        self._registered: frozenset[tuple[str, ChokePoint]] = frozenset()
        self._tools: frozenset[str] | None = None
        self._watched: dict[str, list[Any]] = {self.name: [self]}
        self.registry = REGISTRY if registry is None else registry
        self.collector = _Collector(self)
        self.registry.register(self.collector)
        if engine is not None:
            self.bind(engine)

    # -- configuration --------------------------------------------------------

    def bind(self, engine: Any) -> PrometheusRecorder:
        """Learn an engine's guards and tools, and count its recorders' failures.

        Several engines may share one recorder: their guards and tools add up.
        """
        pairs = registered_guards(engine)
        tools = frozenset(getattr(engine, "tools", {}))
        with self._lock:
            self._registered |= pairs
            self._tools = tools if self._tools is None else self._tools | tools
            for guard, point in pairs:
                self._series(guard, point)
            for tool in tools:
                for outcome in Outcome:
                    self._outcomes.setdefault((tool, outcome), 0)
        fanout = getattr(engine, "recorder", None)
        if fanout is not None:
            self.watch(fanout, "recorders")
            for rec in getattr(fanout, "recorders", ()):
                name, failures = getattr(rec, "name", None), getattr(rec, "failures", None)
                if rec is not self and isinstance(name, str) and isinstance(failures, int):
                    self.watch(rec, name)
        return self

    def watch(self, recorder: Any, name: str) -> None:
        """Export ``recorder.failures`` as ``guardrails_telemetry_failures_total{recorder=name}``.

        Several recorders watched under one name are summed.
        """
        with self._lock:
            watched = self._watched.setdefault(name, [])
            if not any(r is recorder for r in watched):
                watched.append(recorder)

    # -- the Recorder protocol ------------------------------------------------

    def on_tool_result(self, result: ToolResult, /) -> None:
        try:
            key = (result.tool if result.known_tool else UNKNOWN_TOOL, result.outcome)
            verdicts, escapes = result.verdicts, result.escapes
            lock = self._lock
            lock.acquire()  # cheaper than ``with`` on the hot path
            try:
                outcomes = self._outcomes
                count = outcomes.get(key)
                if count is None:  # first of its kind: check it once
                    key, count = self._outcome_key(*key), 0
                outcomes[key] = count + 1
                if verdicts:
                    self._count_verdicts(verdicts)
                if escapes:
                    self._count_escapes(escapes)
            finally:
                lock.release()
        except Exception:  # telemetry never breaks a call
            self._failed()

    def on_event(self, kind: str, payload: Any, /) -> None:
        try:
            if kind == "backstop":
                if not _performed(payload):
                    return
                key = self._backstop_key(payload)
                with self._lock:
                    self._backstop[key] = self._backstop.get(key, 0) + 1
                return
            verdicts = tuple(getattr(payload, "verdicts", ()))
            escapes = tuple(getattr(payload, "escapes", ()))
            with self._lock:
                self._count_verdicts(verdicts)
                self._count_escapes(escapes)
        except Exception:  # telemetry never breaks a call
            self._failed()

    # -- counting (under the lock) ----------------------------------------------

    def _count_verdicts(self, records: Iterable[VerdictRecord]) -> None:
        guards = self._guards
        for record in records:
            series = guards.get((record.guard, record.choke_point))
            if series is None:
                series = self._series(record.guard, record.choke_point)
            series.verdicts[record.verdict] += 1  # KeyError for a non-verdict: counted
            nanos = record.duration_ns
            series.buckets[bisect_left(_BUCKETS_NS, nanos)] += 1
            series.nanos += nanos

    def _count_escapes(self, escapes: Iterable[Escape]) -> None:
        guards = self._guards
        for escape in escapes:
            series = guards.get((escape.guard, escape.choke_point))
            if series is None:
                series = self._series(escape.guard, escape.choke_point)
            reason = escape.reason
            count = series.escapes.get(reason)
            if count is None:
                reason, count = EscapeReason(reason), 0
            series.escapes[reason] = count + 1

    def _series(self, guard: str, point: ChokePoint | str) -> _GuardSeries:
        if type(guard) is not str:
            raise TypeError(f"guard name must be a str, not {type(guard).__name__}")
        key = (guard, ChokePoint(point))
        series = self._guards.get(key)
        if series is None:
            series = self._guards[key] = _GuardSeries()
        return series

    def _outcome_key(self, tool: str, outcome: Outcome | str) -> tuple[str, Outcome]:
        if type(tool) is not str:
            raise TypeError(f"tool name must be a str, not {type(tool).__name__}")
        if self._tools is not None and tool not in self._tools:
            tool = UNKNOWN_TOOL  # bound: only registered names are label values
        return tool, Outcome(outcome)

    def _backstop_key(self, action: Any) -> tuple[str, str]:
        rule = _backstop_rule(action)
        tool = _field(action, "tool")
        tool = getattr(tool, "name", tool)
        if not isinstance(tool, str) or (self._tools is not None and tool not in self._tools):
            tool = UNKNOWN_TOOL
        return rule, tool

    def _failed(self) -> None:
        self.failures += 1
        _log_failure(self.name, self.failures)

    # -- scrape ---------------------------------------------------------------------

    def families(self) -> list[Metric]:
        """The metric families as of now (what a scrape of the registry returns)."""
        with self._lock:
            guards = [
                (key, s.verdicts.copy(), s.buckets.copy(), s.nanos / 1e9, s.escapes.copy())
                for key, s in sorted(self._guards.items())
            ]
            outcomes = sorted(self._outcomes.items())
            backstop = sorted(self._backstop.items())
            registered = sorted(self._registered)
            watched = sorted((k, tuple(v)) for k, v in self._watched.items())
        evaluations = _counter(
            GUARD_EVALUATIONS, "Guard evaluations by guard, choke-point and verdict."
        )
        escapes = _counter(
            FAIL_OPEN_ESCAPES,
            "Actions that went on without a guard's decision, by guard, choke-point and reason.",
        )
        duration = HistogramMetricFamily(
            GUARD_DURATION,
            "Time one guard took to decide, by guard and choke-point.",
            labels=EXPORTED[GUARD_DURATION],
        )
        for (guard, point), verdicts, buckets, seconds, reasons in guards:
            for verdict, count in verdicts.items():
                evaluations.add_metric((guard, point.value, verdict.value), count)
            for reason, count in sorted(reasons.items()):
                escapes.add_metric((guard, point.value, reason.value), count)
            cumulative, total = [], 0
            for bound, count in zip((*DURATION_BUCKETS, float("inf")), buckets, strict=True):
                total += count
                cumulative.append((_le(bound), total))
            duration.add_metric((guard, point.value), cumulative, seconds)
        tool_outcomes = _counter(TOOL_OUTCOMES, "Tool calls by tool and the outcome the model saw.")
        for (tool, outcome), count in outcomes:
            tool_outcomes.add_metric((tool, outcome.value), count)
        actions = _counter(
            BACKSTOP_ACTIONS, "Tools the post_run backstop invoked, by rule and tool."
        )
        for labels, count in backstop:
            actions.add_metric(labels, count)
        listed = GaugeMetricFamily(
            GUARD_REGISTERED,
            "1 for every guard registered at a choke-point.",
            labels=EXPORTED[GUARD_REGISTERED],
        )
        for guard, point in registered:
            listed.add_metric((guard, point.value), 1)
        failures = _counter(
            TELEMETRY_FAILURES,
            "Recorder failures: logged and counted, never raised into a tool call.",
        )
        for name, recorders in watched:
            failures.add_metric((name,), sum(getattr(r, "failures", 0) for r in recorders))
        return [evaluations, escapes, tool_outcomes, actions, duration, listed, failures]


def _counter(name: str, documentation: str) -> CounterMetricFamily:
    return CounterMetricFamily(name, documentation, labels=EXPORTED[name])


def _le(bound: float) -> str:
    return "+Inf" if bound == float("inf") else repr(float(bound))


def _backstop_rule(action: Any) -> str:
    """The rule (or guard) that asked for a backstop action; ``UNKNOWN`` if none is named."""
    rule = _field(action, "rule") or _field(action, "guard")
    rule = getattr(rule, "name", rule)
    return rule if isinstance(rule, str) and rule else UNKNOWN


def _performed(action: Any) -> bool:
    """False for a backstop action that declined to call its tool again (``result`` None)."""
    missing = object()
    result = (
        action.get("result", missing)
        if isinstance(action, Mapping)
        else getattr(action, "result", missing)
    )
    return result is not None


def _field(payload: Any, name: str) -> Any:
    if isinstance(payload, Mapping):
        return payload.get(name)
    return getattr(payload, name, None)


def _log_failure(recorder: str, failures: int) -> None:
    # Logged with the traceback at the 1st, 10th, 100th, ... failure: a broken
    # exporter must not flood the log at the rate of tool calls.
    if str(failures).rstrip("0") == "1":
        log.warning("%s recorder failed (%d failures so far)", recorder, failures, exc_info=True)
    else:
        log.debug("%s recorder failed", recorder, exc_info=True)


class _Collector(Collector):
    """Hands a recorder's families to the registry at scrape time."""

    def __init__(self, recorder: PrometheusRecorder) -> None:
        self._recorder = recorder

    def collect(self) -> Iterator[Metric]:
        return iter(self._recorder.families())

    def describe(self) -> Iterator[Metric]:
        # The registry reads the names from here and refuses a second recorder
        # on the same registry.
        return iter(self._recorder.families())
