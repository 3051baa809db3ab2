"""``SQLiteStore``'s approval requests: each operation in one ``BEGIN IMMEDIATE`` or one statement."""

from __future__ import annotations

import sqlite3
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager
from typing import Any

from . import _approval_sql as q
from ._approval_rows import Admission, ApprovalRecord, admission, check_decision, check_listed
from ._base import check_times

__all__ = ["SQLiteApprovals"]


class SQLiteApprovals:
    """Mixed into ``SQLiteStore`` (which gives ``_immediate`` and ``_execute``)."""

    _immediate: Callable[[], AbstractContextManager[sqlite3.Connection]]
    _execute: Callable[..., sqlite3.Cursor]

    def approval_admit(self, request: ApprovalRecord, now: float, /) -> Admission:
        """Consume a live approval of ``request``'s scope, report a live request, or open it."""
        check_times(now, request.requested_at, request.expires_at)
        with self._immediate() as conn:
            rows = conn.execute(q.select_scope("?"), (request.scope,)).fetchall()
            state, found = admission(_records(rows), now)
            if found is None:
                conn.execute(q.insert("?"), (request.scope, *request))
                return Admission(state, request)
            if state == "run":
                conn.execute(
                    "UPDATE guardrails_approvals SET status = 'used', used_at = ? "
                    "WHERE id = ? AND status = 'approved'",
                    (now, found.id),
                )
            return Admission(state, found)

    def approval_decide(
        self, request_id: str, status: str, by: str, reason: str | None, now: float, /
    ) -> ApprovalRecord | None:
        """Decide a live pending request; the request as it stands after (None: no such id)."""
        check_times(now)
        check_decision(status)
        with self._immediate() as conn:
            conn.execute(q.decide("?"), (status, by, now, reason, request_id, now))
            row = conn.execute(q.select_one("?"), (request_id,)).fetchone()
        return None if row is None else q.record(row)

    def approval(self, request_id: str, /) -> ApprovalRecord | None:
        row = self._execute(q.select_one("?"), (request_id,)).fetchone()
        return None if row is None else q.record(row)

    def approvals(
        self, status: str | None, now: float, limit: int, tenant: str | None = None, /
    ) -> list[ApprovalRecord]:
        """Requests under ``status`` (effective: ``expired`` included), of ``tenant`` only
        when given, newest first."""
        check_times(now)
        sql, takes_now = q.list_where("?", check_listed(status), tenant)
        params = q.list_params(takes_now, now, tenant, limit)
        return list(_records(self._execute(sql, params).fetchall()))


def _records(rows: list[Any]) -> Iterator[ApprovalRecord]:
    return (q.record(tuple(r)) for r in rows)
