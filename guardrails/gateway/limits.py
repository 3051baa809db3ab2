"""Per-tenant limits on calls: rates (per tenant, per tenant and tool) and calls in flight.

A call hook (step 6, like the other ceilings): a call past a limit answers
``limit`` without reaching its upstream, and is counted by the limit that
refused it. The counts live in this replica's memory: the limits bound what
one tenant takes of one replica, which is what keeps it from crowding out
the others there (a fleet-wide cap is a budget, kept in the store).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from ..context import Invocation, ToolResult
from ..middleware.tool_call import Stop
from ..verdicts import Outcome, Reason
from .settings import Limits

__all__ = ["TenantLimits"]

_MAX_BUCKETS = 100_000  # tenants x tools are closed sets; this is a backstop


class _Bucket:
    """A token bucket holding one second of calls (at least one)."""

    __slots__ = ("rate", "stamp", "tokens")

    def __init__(self, rate: float, now: float) -> None:
        self.rate = rate
        self.tokens = max(1.0, rate)
        self.stamp = now

    def full(self, now: float) -> bool:
        """Whether no call is left now (refilled first)."""
        self.tokens = min(max(1.0, self.rate), self.tokens + (now - self.stamp) * self.rate)
        self.stamp = now
        return self.tokens < 1.0


class TenantLimits:
    """The call hook; ``limits_of(tenant)`` says a tenant's limits, ``refused(limit)`` counts."""

    name = "tenant_limits"

    def __init__(
        self,
        limits_of: Callable[[str | None], Limits],
        refused: Callable[[str], None] = lambda _limit: None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.limits_of = limits_of
        self.refused = refused
        self.clock = clock
        self.flying: dict[str | None, int] = {}
        self.holding: dict[str, str | None] = {}
        self.buckets: dict[Any, _Bucket] = {}

    def _bucket(self, key: Any, rate: float, now: float) -> _Bucket:
        bucket = self.buckets.get(key)
        if bucket is None or bucket.rate != rate:
            if len(self.buckets) >= _MAX_BUCKETS:
                self.buckets.clear()
            bucket = self.buckets[key] = _Bucket(rate, now)
        return bucket

    def _refusal(self, tenant: str | None, tool: str, limits: Limits) -> str | None:
        if limits.max_in_flight is not None and self.flying.get(tenant, 0) >= limits.max_in_flight:
            return "in_flight"
        now = self.clock()
        buckets = []
        if limits.calls_per_second is not None:
            buckets.append(("calls_per_second", self._bucket(tenant, limits.calls_per_second, now)))
        if limits.tool_calls_per_second is not None:
            rate = limits.tool_calls_per_second
            buckets.append(("tool_calls_per_second", self._bucket((tenant, tool), rate, now)))
        for limit, bucket in buckets:
            if bucket.full(now):
                return limit
        for _, bucket in buckets:  # taken only when every bucket has a call left
            bucket.tokens -= 1.0
        return None

    def before(self, invocation: Invocation, /) -> Stop | None:
        tenant = invocation.context.tenant
        refusal = self._refusal(tenant, invocation.name, self.limits_of(tenant))
        if refusal is not None:
            self.refused(refusal)
            return Stop(Outcome.LIMIT, Reason.LIMIT)
        self.flying[tenant] = self.flying.get(tenant, 0) + 1
        self.holding[invocation.call_id] = tenant
        return None

    def after(self, invocation: Invocation, result: ToolResult, /) -> ToolResult:
        if invocation.call_id in self.holding:
            tenant = self.holding.pop(invocation.call_id)
            self.flying[tenant] -= 1
            if not self.flying[tenant]:
                del self.flying[tenant]
        return result
