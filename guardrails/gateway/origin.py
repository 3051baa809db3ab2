"""Which Host and Origin an HTTP request may carry (DNS rebinding, cross-site browsers).

- Host: checked against ``gateway.allowed_hosts`` and, when the gateway
  listens on a loopback address, the loopback names (``127.0.0.1``,
  ``localhost``, ``[::1]``), each with any port. On any other address with no
  ``allowed_hosts``, the Host is not checked (the bearer token is what keeps
  strangers out; list the names clients use to have it checked). A refusal is
  HTTP 421.
- Origin (sent by browsers): a request without one passes; one with an
  Origin passes when it is in ``gateway.allowed_origins``, is a loopback
  origin of a loopback gateway, or names the request's own Host (same
  origin). Any other is HTTP 403.

Refusals are counted by reason (``host``, ``origin``), apart from token
refusals, and logged without the header's value. ``/metrics`` is not checked.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any
from urllib.parse import urlsplit

__all__ = ["HostCheck", "LOOPBACK"]

log = logging.getLogger("guardrails.gateway")

LOOPBACK = ("127.0.0.1", "localhost", "::1")


def _hostname(netloc: str) -> str:
    """``host`` of ``host:port`` / ``[v6]:port``, lower-cased."""
    netloc = netloc.strip().lower()
    if netloc.startswith("["):
        return netloc[1 : netloc.find("]")] if "]" in netloc else netloc
    return netloc.rsplit(":", 1)[0] if netloc.count(":") == 1 else netloc


def _matches(value: str, allowed: tuple[str, ...]) -> bool:
    """``value`` (a Host) is an allowed entry, or an entry's name with any port."""
    value = value.strip().lower()
    return any(value == entry or _hostname(value) == entry for entry in allowed)


class HostCheck:
    """ASGI wrapper refusing requests whose Host or Origin is not allowed."""

    def __init__(
        self,
        app: Any,
        *,
        hosts: tuple[str, ...],
        origins: tuple[str, ...],
        loopback: bool,
        refused: Callable[[str], None],
    ) -> None:
        self.app = app
        names = tuple(h.strip().lower() for h in hosts)
        self.hosts: tuple[str, ...] | None = names + LOOPBACK if loopback else (names or None)
        self.origins = tuple(o.strip().lower().rstrip("/") for o in origins)
        self.loopback = loopback
        self.refused = refused

    def verdict(self, host: str | None, origin: str | None) -> str | None:
        """``None`` when the request may go on, else the reason it is refused."""
        if self.hosts is not None and not (host and _matches(host, self.hosts)):
            return "host"
        if origin is None:
            return None
        origin = origin.strip().lower().rstrip("/")
        if origin in self.origins:
            return None
        name = _hostname(urlsplit(origin).netloc) if "://" in origin else ""
        if self.loopback and name in LOOPBACK:
            return None
        if host and name and urlsplit(origin).netloc == host.strip().lower():
            return None  # same origin
        return "origin"

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if scope.get("type") != "http" or scope.get("path") == "/metrics":
            await self.app(scope, receive, send)
            return
        headers = {k.decode("latin-1"): v.decode("latin-1") for k, v in scope.get("headers", ())}
        reason = self.verdict(headers.get("host"), headers.get("origin"))
        if reason is None:
            await self.app(scope, receive, send)
            return
        self.refused(reason)
        log.warning("refused an HTTP request for its %s header (see gateway.allowed_%ss)",
                    reason.capitalize(), reason)  # fmt: skip
        status = 421 if reason == "host" else 403
        body = f"Invalid {reason.capitalize()} header".encode()
        await send({"type": "http.response.start", "status": status,
                    "headers": [(b"content-type", b"text/plain"),
                                (b"content-length", str(len(body)).encode())]})  # fmt: skip
        await send({"type": "http.response.body", "body": body})
