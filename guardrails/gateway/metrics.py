"""The gateway's own Prometheus series: refused clients and upstream failures.

Names and labels are public API. Label values come from closed sets: the
transport, the upstream names of the configuration, and ``FAILURES``.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator

from prometheus_client import CollectorRegistry
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

__all__ = [
    "AUTH_REFUSALS",
    "CHANGES",
    "FAILURES",
    "GatewayCounters",
    "PinCounters",
    "TOOL_CHANGES",
    "TOOLS_WITHHELD",
    "HTTP_REFUSALS",
    "LIMITS",
    "REFUSED_REQUESTS",
    "TENANT_REFUSALS",
    "TOOL_CLASHES",
    "UPSTREAM_FAILURES",
    "UPSTREAM_RESTARTS",
    "UPSTREAM_UP",
]

AUTH_REFUSALS = "guardrails_gateway_auth_refusals_total"
UPSTREAM_FAILURES = "guardrails_gateway_upstream_failures_total"
UPSTREAM_RESTARTS = "guardrails_gateway_upstream_restarts_total"
UPSTREAM_UP = "guardrails_gateway_upstream_up"
TENANT_REFUSALS = "guardrails_gateway_tenant_limit_refusals_total"
HTTP_REFUSALS = "guardrails_gateway_http_refusals_total"
TOOL_CLASHES = "guardrails_gateway_tool_name_clashes_total"

FAILURES = ("disconnected", "timeout", "unavailable", "too_large")
"""Why an upstream failed: its connection broke or it exited; a call or a health
check outlived its timeout; a call came while it was down (answered
``unavailable``); an answer was longer than its bound (discarded unread)."""

LIMITS = ("sessions", "calls_per_second", "tool_calls_per_second", "in_flight")
"""Which per-tenant limit refused a request."""

REFUSED_REQUESTS = ("host", "origin")
"""Why an HTTP request was refused before its token was read: its Host, its Origin."""


class GatewayCounters(Collector):
    """Plain counters behind one lock, exposed when Prometheus scrapes."""

    def __init__(self, upstreams: tuple[str, ...], registry: CollectorRegistry | None = None):
        self._lock = threading.Lock()
        self.refusals = 0
        self.failures = {(u, f): 0 for u in upstreams for f in FAILURES}
        self.restarts = dict.fromkeys(upstreams, 0)
        self.up = dict.fromkeys(upstreams, 0)
        self.limited = dict.fromkeys(LIMITS, 0)
        self.requests = dict.fromkeys(REFUSED_REQUESTS, 0)
        self.clashes = dict.fromkeys(upstreams, 0)
        if registry is not None:
            registry.register(self)

    def refused(self) -> None:
        with self._lock:
            self.refusals += 1

    def failed(self, upstream: str, failure: str) -> None:
        with self._lock:
            self.failures[upstream, failure] += 1

    def restarted(self, upstream: str) -> None:
        with self._lock:
            self.restarts[upstream] += 1

    def limit(self, limit: str) -> None:
        with self._lock:
            self.limited[limit] += 1

    def refused_request(self, reason: str) -> None:
        with self._lock:
            self.requests[reason] += 1

    def clash(self, upstream: str) -> None:
        with self._lock:
            self.clashes[upstream] += 1

    def set_up(self, upstream: str, up: bool) -> None:
        with self._lock:
            self.up[upstream] = int(up)

    def collect(self) -> Iterator[Metric]:
        with self._lock:
            refusals = self.refusals
            failures = dict(self.failures)
            restarts = dict(self.restarts)
            up = dict(self.up)
            limited = dict(self.limited)
            requests = dict(self.requests)
            clashes = dict(self.clashes)
        refused = CounterMetricFamily(
            AUTH_REFUSALS[: -len("_total")], "HTTP clients refused for a missing or unknown token"
        )
        refused.add_metric([], refusals)
        yield refused
        failed = CounterMetricFamily(
            UPSTREAM_FAILURES[: -len("_total")], "Upstream failures", labels=["upstream", "reason"]
        )
        for (upstream, reason), value in sorted(failures.items()):
            failed.add_metric([upstream, reason], value)
        yield failed
        restarted = CounterMetricFamily(
            UPSTREAM_RESTARTS[: -len("_total")], "Upstream restarts", labels=["upstream"]
        )
        for upstream, value in sorted(restarts.items()):
            restarted.add_metric([upstream], value)
        yield restarted
        live = GaugeMetricFamily(
            UPSTREAM_UP, "1 while the upstream is connected", labels=["upstream"]
        )
        for upstream, value in sorted(up.items()):
            live.add_metric([upstream], value)
        yield live
        yield _family(TENANT_REFUSALS, "Requests refused by a tenant's limit", "limit", limited)
        yield _family(
            HTTP_REFUSALS, "HTTP requests refused for their Host or Origin", "reason", requests
        )
        yield _family(
            TOOL_CLASHES,
            "Listed tools refused for a name another upstream publishes",
            "upstream",
            clashes,
        )

    def describe(self) -> Iterator[Metric]:
        return self.collect()


TOOL_CHANGES = "guardrails_gateway_tool_changes_total"
TOOLS_WITHHELD = "guardrails_gateway_tools_withheld"

CHANGES = ("withheld", "updated")
"""What became of a changed tool definition: withheld until approved (``pin = "strict"``),
or published as the new pin (``pin = "auto"``)."""


class PinCounters(Collector):
    """Changed tool definitions per upstream, and how many tools are withheld now."""

    def __init__(self, upstreams: tuple[str, ...], registry: CollectorRegistry | None = None):
        self._lock = threading.Lock()
        self.changes = {(u, c): 0 for u in upstreams for c in CHANGES}
        self.withheld = dict.fromkeys(upstreams, 0)
        if registry is not None:
            registry.register(self)

    def changed(self, upstream: str, change: str) -> None:
        with self._lock:
            self.changes[upstream, change] += 1

    def set_withheld(self, counts: dict[str, int]) -> None:
        with self._lock:
            for upstream in self.withheld:
                self.withheld[upstream] = counts.get(upstream, 0)

    def collect(self) -> Iterator[Metric]:
        with self._lock:
            changes = dict(self.changes)
            withheld = dict(self.withheld)
        changed = CounterMetricFamily(
            TOOL_CHANGES[: -len("_total")],
            "Upstream tools whose definition changed from its pin",
            labels=["upstream", "action"],
        )
        for (upstream, action), value in sorted(changes.items()):
            changed.add_metric([upstream, action], value)
        yield changed
        held = GaugeMetricFamily(
            TOOLS_WITHHELD, "Tools withheld until a change is approved", labels=["upstream"]
        )
        for upstream, value in sorted(withheld.items()):
            held.add_metric([upstream], value)
        yield held

    def describe(self) -> Iterator[Metric]:
        return self.collect()


def _family(name: str, doc: str, label: str, values: dict[str, int]) -> Metric:
    family = CounterMetricFamily(name[: -len("_total")], doc, labels=[label])
    for key, value in sorted(values.items()):
        family.add_metric([key], value)
    return family
