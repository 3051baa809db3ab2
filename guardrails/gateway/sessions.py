"""Who is asking, and in which session: each MCP request becomes a ``TurnContext``.

- tenant: over HTTP, the tenant of the bearer token; over stdio, the
  configured ``stdio_tenant`` (whoever started the process).
- session, in order: a key the client chose (``_meta["guardrails/session"]``
  or the ``Guardrails-Session`` HTTP header), scoped by the principal; else
  the transport's MCP session id (``Mcp-Session-Id``), scoped by the
  principal; else, over stdio, the connection itself (one per process). A stateless HTTP request
  without a key has no session: per-session rules then do not evaluate.
- values: the tenant's configured values (what bound parameters read).

Session strings hold digests, never what the client sent.
"""

from __future__ import annotations

import hashlib
import logging
import re
import uuid
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from typing import Any

from ..context import TurnContext
from .config import TenantConfig
from .scopes import SCOPES_KEY
from .settings import Limits

__all__ = ["META_KEY", "SESSION_HEADER", "SessionIdsCut", "Sessions", "tenant_sessions"]

log = logging.getLogger("guardrails.gateway")

META_KEY = "guardrails/session"
SESSION_HEADER = "guardrails-session"
_MCP_SESSION_HEADER = "mcp-session-id"
_NO_VALUES: Mapping[str, Any] = {}


def _digest(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8", "replace")).hexdigest()[:32]


class Sessions:
    """Maps a request's ``ServerRequestContext`` to its turn context."""

    def __init__(self, tenants: Mapping[str, TenantConfig], stdio_tenant: str) -> None:
        self.tenants = tenants
        self.stdio_tenant = stdio_tenant
        self._stdio = f"stdio:{uuid.uuid4().hex}"

    def __call__(self, ctx: Any) -> TurnContext:
        request = getattr(ctx, "request", None)
        headers = getattr(request, "headers", None)
        if headers is None:
            tenant: str | None = self.stdio_tenant
            principal = "stdio"
        else:
            token = _access_token(request)
            tenant = None if token is None else token.client_id
            principal = "anonymous" if token is None else (token.subject or token.client_id)
        session = self._session(ctx, headers, principal)
        config = self.tenants.get(tenant) if tenant is not None else None
        values = _NO_VALUES if config is None else config.values
        if headers is not None:
            values = _with_scopes(values, _access_token(request))
        return TurnContext(tenant=tenant, session=session, values=values)

    def _session(self, ctx: Any, headers: Any, principal: str) -> str | None:
        meta = getattr(ctx, "meta", None)
        key = meta.get(META_KEY) if isinstance(meta, Mapping) else None
        if not (isinstance(key, str) and key) and headers is not None:
            key = headers.get(SESSION_HEADER)
        if isinstance(key, str) and key:
            return f"key:{_digest(principal + chr(0) + key)}"
        if headers is not None:
            mcp_session = headers.get(_MCP_SESSION_HEADER)
            if mcp_session:
                return f"mcp:{_digest(principal + chr(0) + mcp_session)}"
            return None
        # Over stdio the process serves one client: its connection is the session.
        return self._stdio


def _with_scopes(values: Mapping[str, Any], token: Any) -> Mapping[str, Any]:
    """``values`` with the scopes of an issuer's token, a bearer JWT (static tokens
    have no ``claims``); never a value of that name the configuration set."""
    values = {k: v for k, v in values.items() if k != SCOPES_KEY}
    claims = getattr(token, "claims", None)
    if isinstance(claims, Mapping) and "iss" in claims:
        values[SCOPES_KEY] = frozenset(token.scopes)
    return values


def _access_token(request: Any) -> Any:
    from mcp.server.auth.middleware.auth_context import get_access_token

    token = get_access_token()
    if token is not None:
        return token
    user = getattr(request, "scope", {}).get("user")
    return getattr(user, "access_token", None)


def tenant_sessions(
    server: Any, limits_of: Callable[[str | None], Limits], refused: Callable[[str], None]
) -> None:
    """Each tenant opens at most its ``max_sessions`` stateful MCP sessions in this replica.

    The SDK's session manager admits a session under its lock; the tenant's
    count is checked there too, so concurrent openings cannot pass the bound.
    A tenant at its bound is answered HTTP 503 like a full gateway; the
    others are not affected.
    """
    manager = server.session_manager
    admit = manager._admit_session

    def admitted(requestor: Any) -> Any:
        tenant = None if requestor is None else requestor.get("client_id")
        limit = limits_of(tenant).max_sessions
        if limit is not None:
            owners = manager._session_owners.values()
            held = sum(1 for owner in owners if owner.get("client_id") == tenant)
            if held >= limit:
                refused("sessions")
                log.warning("a tenant reached its max_sessions (%d); a session refused", limit)
                return None
        return admit(requestor)

    manager._admit_session = admitted


_SESSION_ID = re.compile(r"\b[0-9a-f]{32}\b")


class SessionIdsCut(logging.Filter):
    """Cuts MCP session ids (32 hex digits) to their first 8 in the SDK's log lines."""

    LOGGERS = ("mcp.server.streamable_http_manager", "mcp.server.streamable_http")

    def filter(self, record: logging.LogRecord) -> bool:
        message = record.getMessage()
        cut = _SESSION_ID.sub(lambda m: m.group(0)[:8] + "...", message)
        if cut != message:
            record.msg, record.args = cut, None
        return True

    @classmethod
    @contextmanager
    def installed(cls) -> Iterator[None]:
        cut = cls()
        loggers = [logging.getLogger(name) for name in cls.LOGGERS]
        for logger in loggers:
            logger.addFilter(cut)
        try:
            yield
        finally:
            for logger in loggers:
                logger.removeFilter(cut)
