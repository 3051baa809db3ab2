"""Prometheus metrics: the public names and labels, and the recorder that fills them.

Every label value comes from a closed set: guard, tool and rule names as
registered in code, and the values of ``Verdict``, ``Outcome``, ``ChokePoint``,
``EscapeReason`` and ``MODES``. A tool name the model invented is counted under
``UNKNOWN_TOOL``, so a hostile model cannot create series.

The recorder keeps plain integers behind one lock per recorder and builds the
families when Prometheus scrapes (a prometheus_client ``Collector``): one lock
per call instead of one per counter child keeps the cost of a call with a
guard under a microsecond. Under prometheus_client's multiprocess mode
(``PROMETHEUS_MULTIPROC_DIR``) every count is also written through to
prometheus_client's own metrics (``_multiprocess.py``), so that one scrape
sums all the worker processes.
"""

from __future__ import annotations

import threading
from bisect import bisect_left
from collections.abc import Callable, Iterable, Iterator
from time import monotonic_ns, time
from typing import Any

from prometheus_client import REGISTRY, CollectorRegistry
from prometheus_client.core import Metric
from prometheus_client.registry import Collector

from ..context import Escape, ToolResult, VerdictRecord
from ..verdicts import ChokePoint, EscapeReason, Outcome
from ._approval_event import APPROVAL
from ._faults import fault_escapes
from ._metric_approvals import (
    ApprovalSeries,
    approval_books,
    approval_families,
    oldest_pending,
    pending_family,
)
from ._metric_names import (
    APPROVAL_DECISION_TIME,
    APPROVAL_EVENT_VALUES,
    APPROVAL_EVENTS,
    APPROVAL_OLDEST_PENDING,
    BACKSTOP_ACTIONS,
    CALL_BUCKETS,
    CHOKE_POINT,
    DECISION_BUCKETS,
    DURATION_BUCKETS,
    ENFORCE,
    EVENT,
    EXPORTED,
    FAIL_CLOSED_FAULTS,
    FAIL_OPEN_ESCAPES,
    FAULT_REASONS,
    GUARD,
    GUARD_DURATION,
    GUARD_EVALUATIONS,
    GUARD_REGISTERED,
    HELP,
    LAST_ESCAPE,
    LAST_FAULT,
    MODE,
    MODES,
    OBSERVE,
    OUTCOME,
    POLICY_REVISION,
    REASON,
    RECORDER,
    RULE,
    TELEMETRY_FAILURES,
    TOOL,
    TOOL_CALL_DURATION,
    TOOL_CALL_GUARD_TIME,
    TOOL_OUTCOMES,
    UNKNOWN,
    UNKNOWN_TOOL,
    VERDICT,
)
from ._metric_registry import Registration, registered, registered_guards
from ._metric_snapshot import GuardSeries, Snapshot, ToolSeries, build_families
from ._payload import backstop_rule as _backstop_rule
from ._payload import field as _field
from ._payload import performed as _performed
from .recorder import log_failure

__all__ = [
    "APPROVAL_DECISION_TIME",
    "APPROVAL_EVENTS",
    "APPROVAL_EVENT_VALUES",
    "APPROVAL_OLDEST_PENDING",
    "BACKSTOP_ACTIONS",
    "CHOKE_POINT",
    "DECISION_BUCKETS",
    "DURATION_BUCKETS",
    "ENFORCE",
    "EVENT",
    "EXPORTED",
    "FAIL_CLOSED_FAULTS",
    "FAIL_OPEN_ESCAPES",
    "FAULT_REASONS",
    "GUARD",
    "GUARD_DURATION",
    "GUARD_EVALUATIONS",
    "GUARD_REGISTERED",
    "HELP",
    "LAST_ESCAPE",
    "LAST_FAULT",
    "MODE",
    "MODES",
    "OBSERVE",
    "OUTCOME",
    "POLICY_REVISION",
    "REASON",
    "RECORDER",
    "RULE",
    "TELEMETRY_FAILURES",
    "TOOL",
    "TOOL_CALL_DURATION",
    "TOOL_CALL_GUARD_TIME",
    "TOOL_OUTCOMES",
    "UNKNOWN",
    "UNKNOWN_TOOL",
    "VERDICT",
    "PrometheusRecorder",
    "multiprocess_registry",
    "registered_guards",
]

_BUCKETS_NS = tuple(round(b * 1e9) for b in DURATION_BUCKETS)
_CALL_NS = tuple(round(b * 1e9) for b in CALL_BUCKETS)
_REFRESH_NS = 1_000_000_000


class PrometheusRecorder:
    """A recorder that counts verdicts, escapes, faults, outcomes and backstop actions.

    ``registry`` defaults to prometheus_client's default registry. ``bind``
    (or ``engine=``) learns the registered guards, tools and backstop rules:
    their series are exposed at zero, and so are those of guards and tools the
    engine gets later. ``multiprocess`` defaults to whether
    ``PROMETHEUS_MULTIPROC_DIR`` is set; then the counts are also written to
    that directory, to be scraped through ``multiprocess_registry()``, or
    through ``registry`` when one is given (it gets the collector that sums
    every worker's file).
    ``clock`` gives the Unix time written to the last-escape and last-fault
    gauges (``time.time`` unless a test fixes it).
    """

    name = "prometheus"

    def __init__(
        self,
        registry: CollectorRegistry | None = None,
        *,
        engine: Any = None,
        multiprocess: bool | None = None,
        clock: Callable[[], float] = time,
    ) -> None:
        from ._multiprocess import Mirror, multiprocess_enabled

        self.failures = 0
        self._clock = clock
        # Reentrant: a tool added after bind() is read from the engines at its
        # first call, under the lock.
        self._lock = threading.RLock()
        self._guards: dict[tuple[str, ChokePoint], GuardSeries] = {}
        self._outcomes: dict[tuple[str, Outcome], int] = {}
        self._calls: dict[str, ToolSeries] = {}  # latency by tool
        self._backstop: dict[tuple[str, str], int] = {}
        self._approvals: dict[str, ApprovalSeries] = {}
        self._known = Registration()
        self._engines: list[Any] = []
        self._watched: dict[str, list[Any]] = {self.name: [self]}
        self._next_refresh = 0
        enabled = multiprocess_enabled() if multiprocess is None else multiprocess
        self._mirror: Mirror | None = Mirror() if enabled else None
        self.registry = REGISTRY if registry is None else registry
        self.collector = _Collector(self)
        if self._mirror is None:  # in multiprocess mode the scrape reads the files
            self.registry.register(self.collector)
        else:
            self._mirror.failures(self.name, 0)  # its own failure series, from zero
            if registry is not None:  # asked for: it serves the sum of every worker
                from ._multiprocess import collect_into

                collect_into(registry)
                # The pending requests are in the shared store, not in the files.
                registry.register(_PendingCollector(self))
        if engine is not None:
            self.bind(engine)

    # -- configuration --------------------------------------------------------

    def bind(self, engine: Any) -> PrometheusRecorder:
        """Learn an engine's guards, tools and backstop rules, and count its recorders' failures.

        Several engines may share one recorder: their guards and tools add up.
        Guards and tools the engine gets after ``bind`` are picked up at the
        next scrape (or, in multiprocess mode, within a second of the next call).
        """
        if not any(e is engine for e in self._engines):
            self._engines.append(engine)
        self.refresh()
        fanout = getattr(engine, "recorder", None)
        if fanout is not None:
            self.watch(fanout, "recorders")
            for rec in getattr(fanout, "recorders", ()):
                name, failures = getattr(rec, "name", None), getattr(rec, "failures", None)
                if rec is not self and isinstance(name, str) and isinstance(failures, int):
                    self.watch(rec, name)
        return self

    def unbind(self, engine: Any) -> PrometheusRecorder:
        """Stop reading ``engine`` (one that was replaced); what it counted stays counted."""
        self._engines = [e for e in self._engines if e is not engine]
        return self

    def _revisions(self) -> list[str]:
        """The revisions of the bound engines (``Guardrails.revision``)."""
        found = set()
        for engine in tuple(self._engines):
            revision = getattr(engine, "revision", None)
            if type(revision) is str:
                found.add(revision)
                if self._mirror is not None:
                    self._mirror.revision(revision)
        return sorted(found)

    def refresh(self) -> None:
        """Read the bound engines' registrations again; new ones are exposed at zero."""
        found = Registration()
        for engine in tuple(self._engines):
            found.add(registered(engine))
        with self._lock:
            self._register(found)
            if self._mirror is not None:
                self._revisions()  # written to this process's file

    def watch(self, recorder: Any, name: str) -> None:
        """Export ``recorder.failures`` as ``guardrails_telemetry_failures_total{recorder=name}``.

        Several recorders watched under one name are summed.
        """
        with self._lock:
            watched = self._watched.setdefault(name, [])
            if not any(r is recorder for r in watched):
                watched.append(recorder)
            if self._mirror is not None:
                self._mirror.failures(name, 0)

    def _register(self, found: Registration) -> None:
        # Under the lock. Every series an alert or panel reads, at zero.
        known = self._known
        for (guard, point), mode in found.guards.items():
            if known.guards.get((guard, point)) is None:
                known.guards[(guard, point)] = mode
            series = self._series(guard, point)
            series.modes.add(mode)
            if self._mirror is not None:
                self._mirror.guard(guard, point.value, mode)
        if self._engines and UNKNOWN_TOOL not in known.tools:
            found.tools.add(UNKNOWN_TOOL)  # calls of invented tools, from zero
        for tool in found.tools - known.tools:
            known.tools.add(tool)
            self._calls.setdefault(tool, ToolSeries())
            self._approvals.setdefault(tool, ApprovalSeries())
            if self._mirror is not None:
                self._mirror.call_time(tool)
                self._mirror.approval(tool, (), None)
            for outcome in Outcome:
                self._outcomes.setdefault((tool, outcome), 0)
                if self._mirror is not None:
                    self._mirror.outcome(tool, outcome.value, 0)
        for rule_tool in found.backstop:
            key = (rule_tool[0], rule_tool[1] if rule_tool[1] in known.tools else UNKNOWN_TOOL)
            self._backstop.setdefault(key, 0)
            if self._mirror is not None:
                self._mirror.backstop(*key, 0)

    # -- the Recorder protocol ------------------------------------------------

    def on_tool_result(self, result: ToolResult, /) -> None:
        try:
            key = (result.tool if result.known_tool else UNKNOWN_TOOL, result.outcome)
            verdicts, escapes = result.verdicts, result.escapes
            mirror = self._mirror
            if mirror is not None:
                self._maybe_refresh()
            lock = self._lock
            lock.acquire()  # cheaper than ``with`` on the hot path
            try:
                outcomes = self._outcomes
                count = outcomes.get(key)
                if count is None:  # first of its kind: check it once
                    key = self._outcome_key(*key)
                    count = outcomes.get(key, 0)
                outcomes[key] = count + 1
                guard_ns = self._count_verdicts(verdicts) if verdicts else 0
                call_ns = result.duration_ns
                calls = self._calls.get(key[0])
                if calls is None:
                    calls = self._calls[key[0]] = ToolSeries()
                calls.call_buckets[bisect_left(_CALL_NS, call_ns)] += 1
                calls.call_nanos += call_ns
                calls.guard_buckets[bisect_left(_CALL_NS, guard_ns)] += 1
                calls.guard_nanos += guard_ns
                if mirror is not None:
                    mirror.outcome(key[0], key[1].value, 1)
                    mirror.call_time(key[0], call_ns / 1e9, guard_ns / 1e9)
                if escapes:
                    self._count_escapes(escapes, verdicts, result.reason)
            finally:
                lock.release()
        except Exception:  # telemetry never breaks a call
            self._failed()
        if self._mirror is not None:
            self._sync_failures()

    def on_event(self, kind: str, payload: Any, /) -> None:
        try:
            if kind == "backstop":
                if not _performed(payload):
                    return
                with self._lock:
                    key = self._backstop_key(payload)
                    self._backstop[key] = self._backstop.get(key, 0) + 1
                    if self._mirror is not None:
                        self._mirror.backstop(*key, 1)
                return
            if kind == APPROVAL:
                self._count_approval(payload)
                return
            verdicts = tuple(getattr(payload, "verdicts", ()))
            escapes = tuple(getattr(payload, "escapes", ()))
            with self._lock:
                self._count_verdicts(verdicts)
                self._count_escapes(escapes, verdicts)
        except Exception:  # telemetry never breaks a call
            self._failed()
        if self._mirror is not None:
            self._sync_failures()

    # -- counting (under the lock) ----------------------------------------------

    def _count_approval(self, event: Any) -> None:
        tool = event.tool if event.known_tool is True else UNKNOWN_TOOL
        events = tuple(event.events)
        waited = event.decision_seconds
        if waited is not None and not (type(waited) is float and 0.0 <= waited < float("inf")):
            raise ValueError("decision_seconds must be a finite float >= 0")
        with self._lock:
            tool = self._outcome_key(tool, Outcome.OK)[0]  # registered, or _unknown
            series = self._approvals.get(tool)
            if series is None:
                series = self._approvals[tool] = ApprovalSeries()
            series.count(events, waited)
            if self._mirror is not None:
                self._mirror.approval(tool, events, waited)

    def _count_verdicts(self, records: Iterable[VerdictRecord]) -> int:
        """Count the verdicts; return the nanoseconds their guards took together."""
        guards = self._guards
        mirror = self._mirror
        spent = 0
        for record in records:
            series = guards.get((record.guard, record.choke_point))
            if series is None:
                series = self._series(record.guard, record.choke_point)
            counts = series.enforced if record.enforced is True else series.observed
            counts[record.verdict] += 1  # KeyError for a non-verdict: counted as a failure
            nanos = record.duration_ns
            series.buckets[bisect_left(_BUCKETS_NS, nanos)] += 1
            series.nanos += nanos
            spent += nanos
            if mirror is not None:
                mode = ENFORCE if record.enforced is True else OBSERVE
                mirror.verdict(record.guard, record.choke_point.value, record.verdict.value, mode)
                mirror.duration(record.guard, record.choke_point.value, nanos / 1e9)
        return spent

    def _count_escapes(
        self,
        escapes: Iterable[Escape],
        verdicts: Iterable[VerdictRecord],
        stopped_by: object = None,
    ) -> None:
        # An escape whose action was stopped (a fail-closed guard that could
        # not decide, a call stopped because its audit log or store was down)
        # is a fault, not an escape (``_faults``).
        faults = fault_escapes(verdicts, escapes, stopped_by)
        guards = self._guards
        now = self._clock()
        trace_id = _current_trace_id()
        for escape in escapes:
            point = ChokePoint(escape.choke_point)
            series = guards.get((escape.guard, point))
            if series is None:
                series = self._series(escape.guard, point)
            reason = EscapeReason(escape.reason)
            fault = any(escape is f for f in faults)
            counts = series.faults if fault else series.escapes
            counts[reason] = counts.get(reason, 0) + 1
            (series.fault_last if fault else series.escape_last)[reason] = now
            if trace_id is not None:
                series.exemplars[(fault, reason)] = trace_id
            if self._mirror is not None:
                self._mirror.escape(escape.guard, point.value, reason.value, fault, now)

    def _series(self, guard: str, point: ChokePoint | str) -> GuardSeries:
        if type(guard) is not str:
            raise TypeError(f"guard name must be a str, not {type(guard).__name__}")
        key = (guard, ChokePoint(point))
        series = self._guards.get(key)
        if series is None:
            series = self._guards[key] = GuardSeries()
        return series

    def _outcome_key(self, tool: str, outcome: Outcome | str) -> tuple[str, Outcome]:
        if type(tool) is not str:
            raise TypeError(f"tool name must be a str, not {type(tool).__name__}")
        if self._engines and tool != UNKNOWN_TOOL and tool not in self._known.tools:
            self.refresh()  # a tool added after bind(), at its first call
        if self._engines and tool not in self._known.tools:
            tool = UNKNOWN_TOOL  # bound: only registered names are label values
        return tool, Outcome(outcome)

    def _backstop_key(self, action: Any) -> tuple[str, str]:
        rule = _backstop_rule(action)
        tool = _field(action, "tool")
        tool = getattr(tool, "name", tool)
        if not isinstance(tool, str) or (self._engines and tool not in self._known.tools):
            tool = UNKNOWN_TOOL
        return rule, tool

    def _maybe_refresh(self) -> None:
        now = monotonic_ns()
        if now >= self._next_refresh and self._engines:
            self._next_refresh = now + _REFRESH_NS
            self.refresh()

    def _sync_failures(self) -> None:
        try:
            with self._lock:
                totals = {k: _failures_of(v) for k, v in self._watched.items()}
                assert self._mirror is not None
                self._mirror.sync_failures(totals)
        except Exception:
            self.failures += 1

    def _failed(self) -> None:
        self.failures += 1
        log_failure(self.name, self.failures)

    # -- scrape ---------------------------------------------------------------------

    def families(self) -> list[Metric]:
        """The metric families as of now (what a scrape of the registry returns)."""
        if self._engines:
            try:
                self.refresh()
            except Exception:  # a scrape still returns what was counted
                self._failed()
        with self._lock:
            snapshot = Snapshot(
                guards=[(key, s.copy()) for key, s in sorted(self._guards.items())],
                outcomes=sorted(self._outcomes.items()),
                backstop=sorted(self._backstop.items()),
                registered=sorted(self._known.guards),
                failures=sorted((k, _failures_of(v)) for k, v in self._watched.items()),
                calls=[(tool, c.copy()) for tool, c in sorted(self._calls.items())],
                revisions=self._revisions(),
            )
            approvals = [(tool, s.copy()) for tool, s in sorted(self._approvals.items())]
        families = [*build_families(snapshot), *approval_families(approvals)]
        if self._mirror is None:  # in multiprocess mode, _PendingCollector
            families.extend(self.pending())
        return families

    def pending(self) -> list[Metric]:
        """The age of the oldest pending request by tool, read from the gates' stores now."""
        try:
            books = approval_books(tuple(self._engines))
            with self._lock:
                tools = set(self._known.tools)
            return [pending_family(oldest_pending(books, tools, UNKNOWN_TOOL, self._clock()))]
        except Exception:  # a store that cannot answer: the scrape goes on without it
            self._failed()
            return []


def multiprocess_registry() -> CollectorRegistry:
    """A registry that sums the files of every worker in ``PROMETHEUS_MULTIPROC_DIR``.

    Serve it from one ``/metrics`` endpoint (any worker, or a sidecar).
    """
    from ._multiprocess import collecting_registry

    return collecting_registry()


def _current_trace_id() -> str | None:
    """The trace id of the span current at the call (W3C hex), or None: no trace."""
    from opentelemetry import trace

    ids = trace.get_current_span().get_span_context()
    return format(ids.trace_id, "032x") if ids.is_valid else None


def _failures_of(recorders: Iterable[Any]) -> int:
    total = 0
    for r in recorders:
        value = getattr(r, "failures", 0)
        total += value if type(value) is int and value >= 0 else 0
    return total


class _PendingCollector(Collector):
    """The pending-request gauge on a multiprocess registry (read from the store at scrape)."""

    def __init__(self, recorder: PrometheusRecorder) -> None:
        self._recorder = recorder

    def collect(self) -> Iterator[Metric]:
        return iter(self._recorder.pending())


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
