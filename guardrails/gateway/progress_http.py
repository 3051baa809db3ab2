"""Progress over HTTP: a request that asks for it may be answered as an event stream.

The gateway answers HTTP requests with one JSON body (``serve.py``): the
fastest answer, but one with no room for what an upstream reports during a
call. A request of the 2026-07-28 protocol that carries a ``progressToken``
and accepts ``text/event-stream`` is handed to the SDK's event-stream
answer instead, which stays JSON until something is sent during the call,
then streams the call's notifications and its result. Every other request
(no token, JSON only, or a stateful session of the older protocol) takes the
JSON path as before: what it costs is a look at the request's headers and,
for a 2026-07-28 request that accepts a stream, one byte search of its body.

The SDK chooses JSON or a stream once per server; choosing per request
reaches into its session manager. When the SDK in use does not have what
this needs, nothing changes (progress over HTTP is dropped) and a warning
says so.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, MutableMapping
from typing import Any

__all__ = ["stream_progress"]

log = logging.getLogger("guardrails.gateway")

Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
_VERSION = b"mcp-protocol-version"
_ASKED = b'"progressToken"'


def stream_progress(server: Any) -> bool:
    """Route the ``server``'s (its ``streamable_http_app`` made) requests that ask for
    progress to the event-stream answer. False: the SDK does not allow it here."""
    try:
        from mcp.server._streamable_http_modern import handle_modern_request
        from mcp_types.version import HANDSHAKE_PROTOCOL_VERSIONS

        manager = server.session_manager
        limit = manager.asgi_app  # the SDK's body limit, which holds the whole body
        inner = limit.app
        manager._lifespan_state  # noqa: B018  (set while the manager runs)
    except (ImportError, AttributeError, RuntimeError):
        log.warning("progress over HTTP is not available with this MCP SDK; it is dropped")
        return False
    handshake = frozenset(v.encode("latin-1") for v in HANDSHAKE_PROTOCOL_VERSIONS)

    async def handle(scope: Any, receive: Receive, send: Any) -> None:
        if scope.get("method") == "POST" and _streamable(scope, handshake):
            first = await receive()
            replay = _replay(first, receive)
            if first.get("type") == "http.request" and _ASKED in first.get("body", b""):
                await handle_modern_request(
                    manager.app,
                    manager.security_settings,
                    False,  # an event stream, which stays JSON until a notification
                    manager._lifespan_state,
                    scope,
                    replay,
                    send,
                )
                return
            receive = replay
        await inner(scope, receive, send)

    limit.app = handle
    return True


def _streamable(scope: Any, handshake: frozenset[bytes]) -> bool:
    """A request of a protocol without the handshake (2026-07-28) that accepts a stream."""
    version = accept = None
    for key, value in scope.get("headers", ()):
        if key == _VERSION:
            version = value
        elif key == b"accept":
            accept = value.lower()
    if version is None or version in handshake or accept is None:
        return False
    return b"text/event-stream" in accept or b"text/*" in accept or b"*/*" in accept


def _replay(first: Message, receive: Receive) -> Receive:
    """``receive`` with ``first`` given back first."""
    held = [first]

    async def replay() -> Message:
        return held.pop() if held else await receive()

    return replay
