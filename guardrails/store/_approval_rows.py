"""Approval requests as the stores keep them: the row, its scope, and the one decision of a retry.

A request is bound to its scope: the JSON array ``[tenant, session, tool,
digest]`` (the digest is SHA-256 of the exact canonical arguments), so a
request of one tenant, session, tool or set of arguments never answers
another's call. Its stored ``status`` is ``pending``, ``approved``,
``denied`` or ``used``; ``expired`` is what a ``pending`` or ``approved``
request is once ``expires_at`` has passed (``effective_status``).

``admission`` is what a store does, atomically, when a call that needs
approval arrives: consume the oldest live approval of the scope (``run``),
else report the newest live pending or denied request, else open a new one
(``requested``, or ``expired`` when the newest request of the scope lapsed
unused). The stores run it under their write lock (memory, SQLite) or as one
function of the schema (PostgreSQL, migration 7), so two retries of one
approved call never both run.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from typing import Literal, NamedTuple

from ._base import StoreError

__all__ = [
    "APPROVAL_COLUMNS",
    "APPROVAL_STATUSES",
    "Admission",
    "ApprovalRecord",
    "admission",
    "check_decision",
    "check_listed",
    "effective_status",
    "listed",
    "scope_of",
]

APPROVAL_STATUSES = frozenset({"pending", "approved", "denied", "used", "expired"})


class ApprovalRecord(NamedTuple):
    """One approval request as stored (a value). ``arguments`` is redacted canonical JSON."""

    id: str
    tenant: str | None
    session: str | None
    tool: str
    digest: str
    arguments: str
    asked_by: str | None
    requested_at: float
    expires_at: float
    status: str
    decided_by: str | None = None
    decided_at: float | None = None
    reason: str | None = None
    used_at: float | None = None

    @property
    def scope(self) -> str:
        return scope_of(self.tenant, self.session, self.tool, self.digest)


APPROVAL_COLUMNS: tuple[str, ...] = ApprovalRecord._fields

State = Literal["run", "pending", "denied", "requested", "expired"]


class Admission(NamedTuple):
    """What a store found for a call that needs approval, and the request it concerns."""

    state: State
    record: ApprovalRecord


def scope_of(tenant: str | None, session: str | None, tool: str, digest: str) -> str:
    """The stored scope: one JSON array, so no two scopes share a text (None differs from "")."""
    return json.dumps([tenant, session, tool, digest], separators=(",", ":"), ensure_ascii=True)


def effective_status(record: ApprovalRecord, now: float) -> str:
    if record.status in ("pending", "approved") and record.expires_at <= now:
        return "expired"
    return record.status


def listed(record: ApprovalRecord, status: str | None, now: float) -> bool:
    """Whether ``record`` is listed under ``status`` (None: every request)."""
    return status is None or effective_status(record, now) == status


def admission(rows: Iterable[ApprovalRecord], now: float) -> tuple[State, ApprovalRecord | None]:
    """The decision for a retry among its scope's ``rows``; None: open the new request."""
    ordered = sorted(rows, key=lambda r: (r.requested_at, r.id))
    for row in ordered:
        if row.status == "approved" and row.expires_at > now:
            return "run", row._replace(status="used", used_at=now)
    for row in reversed(ordered):
        if row.status in ("pending", "denied") and row.expires_at > now:
            return ("pending" if row.status == "pending" else "denied"), row
    lapsed = bool(ordered) and effective_status(ordered[-1], now) == "expired"
    return ("expired" if lapsed else "requested"), None


def check_decision(status: str) -> None:
    if status not in ("approved", "denied"):
        raise StoreError(f"an approval decision is 'approved' or 'denied', not {status!r}")


def check_listed(status: str | None) -> str | None:
    if status is not None and status not in APPROVAL_STATUSES:
        raise StoreError(f"unknown approval status {status!r}; use {sorted(APPROVAL_STATUSES)}")
    return status
