"""Deciding approval requests from Python: list, show, approve, deny.

``Approvals(store)`` reads and decides the requests an ``ApprovalGate`` put
in the same store (in this process or any other). A decision records who
made it, when, and an optional reason; only a pending request that has not
expired can be decided, once; each decision is also an audit row (kind
``approval``) in the store's hash-chained log. Statuses are shown as they
stand now: a pending or approved request past its expiry is ``expired``.
``Approvals(store, tenant="acme")`` sees and decides that tenant's requests
only: another tenant's id is answered as an unknown one.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from typing import Any

from ..errors import UsageError
from ..store import AuditRow
from ..store._approval_rows import APPROVAL_STATUSES, ApprovalRecord, effective_status
from .book import book_of

__all__ = ["AUDIT_KIND", "ApprovalError", "Approvals"]

AUDIT_KIND = "approval"
_MAX_IDENTITY = 256
_MAX_REASON = 2_000


class ApprovalError(UsageError):
    """A decision that cannot be made: no such request, or it is not pending any more."""


class Approvals:
    """The requests of one store, and the decisions on them."""

    __slots__ = ("book", "clock", "tenant")

    def __init__(
        self, store: Any, *, clock: Callable[[], float] = time.time, tenant: str | None = None
    ) -> None:
        self.book = book_of(store, "Approvals")
        self.clock = clock
        self.tenant = tenant

    def list(self, status: str | None = "pending", *, limit: int = 100) -> list[ApprovalRecord]:
        """Requests, newest first: pending ones, or those of ``status`` (approved, denied,
        used, expired), or every one (``None``)."""
        if status is not None and status not in APPROVAL_STATUSES:
            raise UsageError(f"unknown status {status!r}; use one of {sorted(APPROVAL_STATUSES)}")
        if type(limit) is not int or limit < 1:
            raise UsageError(f"limit must be a positive int, not {limit!r}")
        now = self.clock()
        if self.tenant is None:
            found = self.book.approvals(status, now, limit)
        else:
            found = self.book.approvals(status, now, limit, self.tenant)
        return [_now(r, now) for r in found]

    def show(self, request_id: str) -> ApprovalRecord:
        return _now(self._find(request_id), self.clock())

    def _find(self, request_id: str) -> ApprovalRecord:
        """The request, when it exists and is this tenant's (another's reads as none)."""
        found = self.book.approval(_id(request_id))
        if found is None or (self.tenant is not None and found.tenant != self.tenant):
            raise ApprovalError(f"no approval request {request_id!r}")
        return found

    def approve(self, request_id: str, *, by: str, reason: str | None = None) -> ApprovalRecord:
        """Approve a pending request: the same call, retried before expiry, runs once."""
        return self._decide(request_id, "approved", by, reason)

    def deny(self, request_id: str, *, by: str, reason: str | None = None) -> ApprovalRecord:
        """Deny a pending request: the call never runs."""
        return self._decide(request_id, "denied", by, reason)

    def _decide(self, request_id: str, status: str, by: str, reason: str | None) -> ApprovalRecord:
        _check_text("by", by, _MAX_IDENTITY, required=True)
        _check_text("reason", reason, _MAX_REASON, required=False)
        if self.tenant is not None:
            self._find(request_id)  # a request's tenant never changes: checked once
        now = self.clock()
        found = self.book.approval_decide(_id(request_id), status, by, reason, now)
        if found is None:
            raise ApprovalError(f"no approval request {request_id!r}")
        if not (found.status == status and found.decided_at == now and found.decided_by == by):
            raise ApprovalError(
                f"approval request {request_id!r} is {effective_status(found, now)}, not pending"
            )
        # The decision stands in the approvals table; its audit row follows it (a store
        # that fails here raises StoreUnavailable: see docs/approvals.md, limits).
        self.book.append(_audit_row(found, now))
        return found


def _now(record: ApprovalRecord, now: float) -> ApprovalRecord:
    return record._replace(status=effective_status(record, now))


def _id(request_id: object) -> str:
    if type(request_id) is not str or not (0 < len(request_id) <= 128):
        raise ApprovalError(f"not an approval request id: {request_id!r}")
    return request_id


def _check_text(name: str, value: object, limit: int, *, required: bool) -> None:
    if value is None and not required:
        return
    if type(value) is not str or not value.strip() or len(value) > limit:
        raise UsageError(f"{name} must be a non-empty str of at most {limit} characters")


def _audit_row(record: ApprovalRecord, now: float) -> AuditRow:
    detail = {
        "request": record.id,
        "by": record.decided_by,
        "reason": record.reason,
        "digest": record.digest,
        "requested_at": record.requested_at,
        "expires_at": record.expires_at,
    }
    return AuditRow(
        AUDIT_KIND,
        at=now,
        tenant=record.tenant,
        session=record.session,
        tool=record.tool,
        outcome=record.status,
        detail=json.dumps(detail, ensure_ascii=False, separators=(",", ":")),
    )
