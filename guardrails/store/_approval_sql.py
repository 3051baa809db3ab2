"""The SQL of approval requests shared by SQLite and PostgreSQL (placeholders differ: ``?``, ``%s``)."""

from __future__ import annotations

from typing import Any

from ._approval_rows import APPROVAL_COLUMNS, ApprovalRecord

__all__ = [
    "COLUMNS",
    "decide",
    "insert",
    "list_params",
    "list_where",
    "record",
    "select_one",
    "select_scope",
]

COLUMNS = ", ".join(APPROVAL_COLUMNS)

# What each listed status means in the stored columns (``expired`` is derived).
_WHERE = {
    None: "1 = 1",
    "pending": "status = 'pending' AND expires_at > {p}",
    "approved": "status = 'approved' AND expires_at > {p}",
    "expired": "status IN ('pending', 'approved') AND expires_at <= {p}",
    "denied": "status = 'denied'",
    "used": "status = 'used'",
}


def insert(p: str) -> str:
    marks = ", ".join([p] * (len(APPROVAL_COLUMNS) + 1))
    return f"INSERT INTO guardrails_approvals (scope, {COLUMNS}) VALUES ({marks})"


def select_one(p: str) -> str:
    return f"SELECT {COLUMNS} FROM guardrails_approvals WHERE id = {p}"


def select_scope(p: str) -> str:
    return f"SELECT {COLUMNS} FROM guardrails_approvals WHERE scope = {p}"


def decide(p: str) -> str:
    return (
        f"UPDATE guardrails_approvals SET status = {p}, decided_by = {p}, decided_at = {p}, "
        f"reason = {p} WHERE id = {p} AND status = 'pending' AND expires_at > {p}"
    )


def list_where(p: str, status: str | None, tenant: str | None = None) -> tuple[str, bool]:
    """The statement listing ``status`` (of ``tenant`` only, when given), newest first, and
    whether it takes ``now``; its parameters are ``now`` (if it takes it), ``tenant`` (if
    given), then the limit."""
    where = _WHERE[status]
    of_tenant = "" if tenant is None else f" AND tenant = {p}"
    return (
        f"SELECT {COLUMNS} FROM guardrails_approvals WHERE {where.format(p=p)}{of_tenant} "
        f"ORDER BY requested_at DESC, id DESC LIMIT {p}",
        "{p}" in where,
    )


def list_params(takes_now: bool, now: float, tenant: str | None, limit: int) -> tuple[Any, ...]:
    """The parameters of ``list_where``'s statement."""
    return (*((now,) if takes_now else ()), *(() if tenant is None else (tenant,)), limit)


def record(row: tuple[Any, ...]) -> ApprovalRecord:
    values = list(row)
    for at in (7, 8, 11, 13):  # requested_at, expires_at, decided_at, used_at
        if values[at] is not None:
            values[at] = float(values[at])
    return ApprovalRecord._make(values)
