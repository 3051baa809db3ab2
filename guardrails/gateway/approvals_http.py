"""The HTTP gateway's ``/approvals`` endpoint: list, show, approve and deny, for approvers only.

| request | answer |
| --- | --- |
| ``GET /approvals?status=pending&limit=100`` | 200 ``{"requests": [...]}``, newest first |
| ``GET /approvals/ID`` | 200 ``{"request": {...}}`` |
| ``POST /approvals/ID/approve`` with ``{"reason": "..."}`` or ``{}`` | 200 ``{"request": {...}}`` |
| ``POST /approvals/ID/deny`` with ``{"reason": "..."}`` or ``{}`` | 200 ``{"request": {...}}`` |

Every request needs an approver's bearer token (``approvers.py``); an MCP
client's token is not one (a JWT is one only with ``approvals.oauth_scope``). An approver sees and decides its tenant's
requests only: another tenant's id is answered as an unknown one. Who
decided is the approver's name from the table, never anything the body says.
Errors are ``{"error": CODE}`` with a 4xx or 503 status (docs/approvals.md),
never an exception's text.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Awaitable, Callable
from typing import Any

from ..approvals import ApprovalError, ApprovalRecord, Approvals
from ..errors import UsageError
from ..store import offloop
from ..store._approval_rows import APPROVAL_STATUSES
from .approvers import Approver, Approvers

__all__ = ["ERRORS", "MAX_BODY", "approval_routes"]

log = logging.getLogger("guardrails.gateway")

MAX_BODY = 16_384
"""The most bytes a decision's body may have (a reason is at most 2,000 characters)."""
_MAX_LIMIT = 1_000
ERRORS: dict[str, int] = {
    "unauthorized": 401,
    "invalid_json": 400,
    "unknown_field": 400,
    "invalid_reason": 400,
    "invalid_status": 400,
    "invalid_limit": 400,
    "not_found": 404,
    "not_pending": 409,
    "too_large": 413,
    "store_unavailable": 503,
}
"""Every ``error`` code the endpoint answers, and its HTTP status (docs/approvals.md)."""
_CHALLENGE = {"WWW-Authenticate": 'Bearer realm="approvals"'}

Handler = Callable[[Any, Approvals], Awaitable[Any]]


class _Refused(Exception):
    """An answer other than 200: its HTTP status and error code."""

    def __init__(self, code: str, **extra: Any) -> None:
        super().__init__(code)
        self.http_status, self.code, self.extra = ERRORS[code], code, extra


def approval_routes(store: Callable[[], Any], approvers: Approvers) -> list[Any]:
    """The Starlette routes; ``store()`` is the gateway's store while it runs."""
    from starlette.routing import Route

    def guarded(handler: Handler) -> Callable[[Any], Awaitable[Any]]:
        async def endpoint(request: Any) -> Any:
            return await _answer(request, store(), approvers, handler)

        return endpoint

    return [
        Route("/approvals", guarded(_list), methods=["GET"]),
        Route("/approvals/{id}", guarded(_show), methods=["GET"]),
        Route("/approvals/{id}/approve", guarded(_decide("approve")), methods=["POST"]),
        Route("/approvals/{id}/deny", guarded(_decide("deny")), methods=["POST"]),
        # Any other path below /approvals (an id with a "/" in it): unknown, in JSON.
        Route("/approvals/{rest:path}", guarded(_unknown), methods=["GET", "POST"]),
    ]


async def _answer(request: Any, store: Any, approvers: Approvers, handler: Handler) -> Any:
    from starlette.responses import JSONResponse

    try:
        approver = await _approver(request, approvers)
        book = Approvals(store, tenant=approver.tenant)
        request.state.approver = approver
        return JSONResponse(await handler(request, book))
    except _Refused as refused:
        headers = _CHALLENGE if refused.http_status == 401 else None
        body = {"error": refused.code, **refused.extra}
        return JSONResponse(body, status_code=refused.http_status, headers=headers)
    except Exception as exc:  # the store failed: its text stays here
        log.warning("approvals endpoint: the store did not answer (%s)", type(exc).__name__)
        code = "store_unavailable"
        return JSONResponse({"error": code}, status_code=ERRORS[code])


async def _approver(request: Any, approvers: Approvers) -> Approver:
    scheme, _, token = request.headers.get("authorization", "").partition(" ")
    token = token.strip()
    found = await approvers.approver(token) if scheme.lower() == "bearer" and token else None
    if found is None:
        raise _Refused("unauthorized")
    return found


async def _unknown(request: Any, book: Approvals) -> Any:
    raise _Refused("not_found")


async def _list(request: Any, book: Approvals) -> Any:
    status = request.query_params.get("status", "pending")
    if status not in APPROVAL_STATUSES and status != "all":
        raise _Refused("invalid_status")
    limit = request.query_params.get("limit", "100")
    if not (limit.isascii() and limit.isdigit() and len(limit) <= 4):
        raise _Refused("invalid_limit")
    if not 0 < int(limit) <= _MAX_LIMIT:
        raise _Refused("invalid_limit")
    wanted = None if status == "all" else status
    found = await offloop.run(book.book, _listed, book, wanted, int(limit))
    return {"requests": [_plain(r) for r in found]}


def _listed(book: Approvals, status: str | None, limit: int) -> list[ApprovalRecord]:
    return book.list(status, limit=limit)


async def _show(request: Any, book: Approvals) -> Any:
    request_id = request.path_params["id"]
    try:
        found = await offloop.run(book.book, book.show, request_id)
    except ApprovalError:
        raise _Refused("not_found") from None
    return {"request": _plain(found)}


def _decide(verb: str) -> Handler:
    async def decide(request: Any, book: Approvals) -> Any:
        reason = _reason(await _body(request))
        request_id = request.path_params["id"]
        method = book.approve if verb == "approve" else book.deny
        by = request.state.approver.name
        try:
            done = await offloop.run(book.book, _decided, method, request_id, by, reason)
        except ApprovalError:
            found = await offloop.run(book.book, _status_of, book, request_id)
            if found is None:
                raise _Refused("not_found") from None
            raise _Refused("not_pending", status=found) from None
        except UsageError:
            raise _Refused("invalid_reason") from None
        return {"request": _plain(done)}

    return decide


def _decided(method: Any, request_id: str, by: str, reason: str | None) -> ApprovalRecord:
    done: ApprovalRecord = method(request_id, by=by, reason=reason)
    return done


def _status_of(book: Approvals, request_id: str) -> str | None:
    """The request's status as it stands, or None when there is none of this tenant's."""
    try:
        return book.show(request_id).status
    except ApprovalError:
        return None


async def _body(request: Any) -> Any:
    """The body as JSON, read up to ``MAX_BODY`` bytes."""
    data = bytearray()
    async for chunk in request.stream():
        data += chunk
        if len(data) > MAX_BODY:
            raise _Refused("too_large")
    try:
        return json.loads(data.decode("utf-8"))
    except (UnicodeDecodeError, ValueError):
        raise _Refused("invalid_json") from None


def _reason(body: Any) -> str | None:
    """The decision's ``reason`` of a JSON object with no other key."""
    if not isinstance(body, dict):
        raise _Refused("invalid_json")
    unknown = sorted(set(body) - {"reason"})
    if unknown:
        raise _Refused("unknown_field")
    reason = body.get("reason")
    if reason is not None and not isinstance(reason, str):
        raise _Refused("invalid_reason")
    return reason


def _plain(record: ApprovalRecord) -> dict[str, Any]:
    plain = record._asdict()
    plain["arguments"] = json.loads(record.arguments)
    return plain
