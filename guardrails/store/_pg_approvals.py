"""``PostgresStore``'s approval requests: statements and decisions without I/O, and the methods."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from . import _approval_sql as q
from ._approval_rows import Admission, ApprovalRecord, check_decision, check_listed
from ._base import check_times
from ._pg_sql import Sql, Steps

__all__ = ["PostgresApprovals", "admit", "approval", "approvals", "decide"]

# The consume-report-or-open decision runs in one function (migration 7).
ADMIT = "SELECT o_state, o_id FROM guardrails_approval_admit(%s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s)"
SELECT_ONE = q.select_one("%s")
DECIDE = q.decide("%s")


def admit(request: ApprovalRecord, now: float) -> Steps[Admission]:
    check_times(now, request.requested_at, request.expires_at)
    r = request
    found = yield Sql(
        ADMIT,
        (r.id, r.scope, r.tenant, r.session, r.tool, r.digest, r.arguments, r.asked_by,
         r.requested_at, r.expires_at, now),
    )  # fmt: skip
    state, request_id = found.rows[0]
    row = (yield Sql(SELECT_ONE, (request_id,))).first()
    return Admission(state, q.record(row))


def decide(
    request_id: str, status: str, by: str, reason: str | None, now: float
) -> Steps[ApprovalRecord | None]:
    check_times(now)
    check_decision(status)
    yield Sql(DECIDE, (status, by, now, reason, request_id, now))
    row = (yield Sql(SELECT_ONE, (request_id,))).first()
    return None if row is None else q.record(row)


def approval(request_id: str) -> Steps[ApprovalRecord | None]:
    row = (yield Sql(SELECT_ONE, (request_id,))).first()
    return None if row is None else q.record(row)


def approvals(
    status: str | None, now: float, limit: int, tenant: str | None = None
) -> Steps[list[ApprovalRecord]]:
    check_times(now)
    sql, takes_now = q.list_where("%s", check_listed(status), tenant)
    found = yield Sql(sql, q.list_params(takes_now, now, tenant, limit))
    return [q.record(tuple(r)) for r in found.rows]


class PostgresApprovals:
    """Mixed into ``PostgresStore`` (which gives ``_drive``)."""

    _drive: Callable[[Steps[Any]], Any]

    def approval_admit(self, request: ApprovalRecord, now: float, /) -> Admission:
        """Consume a live approval of ``request``'s scope, report a live request, or open it."""
        found: Admission = self._drive(admit(request, now))
        return found

    def approval_decide(
        self, request_id: str, status: str, by: str, reason: str | None, now: float, /
    ) -> ApprovalRecord | None:
        """Decide a live pending request; the request as it stands after (None: no such id)."""
        found: ApprovalRecord | None = self._drive(decide(request_id, status, by, reason, now))
        return found

    def approval(self, request_id: str, /) -> ApprovalRecord | None:
        found: ApprovalRecord | None = self._drive(approval(request_id))
        return found

    def approvals(
        self, status: str | None, now: float, limit: int, tenant: str | None = None, /
    ) -> list[ApprovalRecord]:
        """Requests under ``status`` (effective: ``expired`` included), of ``tenant`` only
        when given, newest first."""
        found: list[ApprovalRecord] = self._drive(approvals(status, now, limit, tenant))
        return found
