"""What the approval gate reports to the engine's recorders: one event per call it held or ran.

The gate calls ``on_event(APPROVAL, ApprovalEvent(...))``; the Prometheus
recorder counts it, the OpenTelemetry recorder adds it to the call's span as
events, the audit log leaves it (the call's own audit row already names the
request).
"""

from __future__ import annotations

from typing import NamedTuple

__all__ = ["APPROVAL", "ApprovalEvent", "events_of"]

APPROVAL = "approval"
"""The ``kind`` of the event."""

# What a store's admission means for the counters: an expired request is
# replaced by a new one, a call retried while its request waits counts nothing.
_EVENTS: dict[str, tuple[str, ...]] = {
    "requested": ("requested",),
    "expired": ("expired", "requested"),
    "run": ("granted",),
    "denied": ("denied",),
    "pending": (),
}


class ApprovalEvent(NamedTuple):
    """A call that needed approval: its tool, what the gate found, and how long the person took."""

    tool: str
    known_tool: bool
    events: tuple[str, ...]
    decision_seconds: float | None = None
    """From the request to its approval (store times), for a ``granted`` call; else None."""
    call_id: str | None = None
    """The call's id: its span gets the events (``telemetry.py``)."""
    request_id: str | None = None
    """The request the call concerns (for the span, never for a metric label)."""


def events_of(state: str) -> tuple[str, ...]:
    """The ``event`` label values of an admission's state (``KeyError`` for another state)."""
    return _EVENTS[state]
