"""The approval gate's events on the call's ``execute_tool`` span.

Each ``ApprovalEvent`` becomes one span event per name it carries
(``guardrails.approval.requested``, ``granted``, ``denied``, ``expired``),
with the request's id and, for ``granted``, the seconds from the request to
its approval. When ``hook()`` opened the call's span, the events go on it at
once; otherwise they wait in this context (a stack per thread or task, never
a table keyed by call id) until the span is written after the fact.
"""

from __future__ import annotations

from contextvars import ContextVar
from time import time_ns
from typing import Any

from opentelemetry.trace import Span

from ._approval_event import ApprovalEvent
from ._tool_spans import open_span

__all__ = ["ATTR_APPROVAL_REQUEST", "ATTR_APPROVAL_WAITED", "EVENT_APPROVAL", "flush", "note"]

EVENT_APPROVAL = {
    name: f"guardrails.approval.{name}" for name in ("requested", "granted", "denied", "expired")
}
"""The span event of each approval event (the ``event`` label of the metrics)."""
ATTR_APPROVAL_REQUEST = "guardrails.approval.request"
ATTR_APPROVAL_WAITED = "guardrails.approval.decision_seconds"

_Waiting = tuple[str, str, dict[str, Any], int]  # call id, event name, attributes, time
_WAITING: ContextVar[tuple[_Waiting, ...]] = ContextVar("guardrails_approval_events", default=())
_MAX_WAITING = 64  # calls whose result never came: the oldest events are dropped


def note(event: Any) -> None:
    """Put ``event`` on its call's open span, or keep it for the span to come."""
    if not isinstance(event, ApprovalEvent) or not isinstance(event.call_id, str):
        return
    now = time_ns()
    found = [(EVENT_APPROVAL[name], _attributes(event, name)) for name in event.events]
    span = open_span(event.call_id)
    if span is not None:
        for name, attributes in found:
            span.add_event(name, attributes, timestamp=now)
        return
    waiting = (*_WAITING.get(), *((event.call_id, n, a, now) for n, a in found))
    _WAITING.set(waiting[-_MAX_WAITING:])


def flush(span: Span, call_id: str) -> None:
    """Add the events kept for ``call_id`` to its span, written after the fact."""
    waiting = _WAITING.get()
    if not waiting:
        return
    _WAITING.set(tuple(w for w in waiting if w[0] != call_id))
    for entry_id, name, attributes, at in waiting:
        if entry_id == call_id:
            span.add_event(name, attributes, timestamp=at)


def _attributes(event: ApprovalEvent, name: str) -> dict[str, Any]:
    attributes: dict[str, Any] = {}
    if isinstance(event.request_id, str):
        attributes[ATTR_APPROVAL_REQUEST] = event.request_id
    if name == "granted" and event.decision_seconds is not None:
        attributes[ATTR_APPROVAL_WAITED] = float(event.decision_seconds)
    return attributes
