"""Per-request bounds on the bytes of an upstream's answer, shared by both transports.

``bounded(limit)`` sets the bound of the requests sent from the current
context (the calling tenant's ``max_result_bytes``); ``BoundedWriter`` notes
it for each request as the session sends it, and the transport reads it back
(``Bounds.of``) when the answer arrives. An answer past its bound is replaced
by the error ``TOO_LARGE`` (``too_large``), so the call ends at once.
"""

from __future__ import annotations

import contextvars
from typing import Any

__all__ = ["TOO_LARGE", "BoundedWriter", "Bounds", "bounded", "release", "too_large"]

TOO_LARGE = -32099
"""The code of the error a request is answered with when its answer was too long."""

# The bound of the answer to the request being sent from this task (None: the transport's).
_BOUND: contextvars.ContextVar[int | None] = contextvars.ContextVar("bound", default=None)


def bounded(limit: int | None) -> contextvars.Token[int | None]:
    """Requests sent from this context accept answers of at most ``limit`` bytes."""
    return _BOUND.set(limit)


def release(token: contextvars.Token[int | None]) -> None:
    """Undo ``bounded``."""
    _BOUND.reset(token)


class Bounds:
    """Per-request bounds, noted when a request is sent, read when its answer arrives."""

    def __init__(self, default: int) -> None:
        self.default = default
        self.by_id: dict[Any, int] = {}

    def note(self, message: Any) -> None:
        limit = _BOUND.get()
        message = getattr(message, "root", message)
        rid = getattr(message, "id", None)
        if limit is None or rid is None or not hasattr(message, "method"):
            return
        if len(self.by_id) < 10_000:
            self.by_id[rid] = min(limit, self.default)

    def of(self, rid: Any) -> int:
        return self.by_id.pop(rid, self.default)


class BoundedWriter:
    """The session's write stream: notes each request's bound in the sender's context."""

    def __init__(self, inner: Any, bounds: Bounds) -> None:
        self.inner = inner
        self.bounds = bounds

    async def send(self, item: Any) -> None:
        self.bounds.note(item.message)
        await self.inner.send(item)

    def close(self) -> None:
        self.inner.close()

    async def aclose(self) -> None:
        await self.inner.aclose()

    async def __aenter__(self) -> BoundedWriter:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()


def too_large(rid: Any) -> Any:
    from mcp.shared.message import SessionMessage
    from mcp_types import ErrorData, JSONRPCError

    error = ErrorData(code=TOO_LARGE, message="answer too large")
    return SessionMessage(JSONRPCError(jsonrpc="2.0", id=rid, error=error))
