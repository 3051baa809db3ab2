"""Per-request bounds on the bytes of an upstream's answer, shared by both transports.

``bounded(limit)`` sets the bound of the requests sent from the current
context (the calling tenant's ``max_result_bytes``); ``BoundedWriter`` notes
it for each request as the session sends it, and the transport reads it back
(``Bounds.of``) when the answer arrives. An answer past its bound is replaced
by the error ``TOO_LARGE`` (``too_large``), so the call ends at once.

A noted bound lives as long as its call: ``release`` drops every entry the
call noted, whatever path its answer took (an event stream, a cancel, a
connection that broke). A table holding ``CAPACITY`` bounds refuses the next
request (``BoundsFull``, before it is sent): never the transport's bound.
"""

from __future__ import annotations

import contextvars
from typing import Any

__all__ = [
    "CAPACITY",
    "TOO_LARGE",
    "BoundedWriter",
    "Bounds",
    "BoundsFull",
    "bounded",
    "release",
    "too_large",
]

TOO_LARGE = -32099
"""The code of the error a request is answered with when its answer was too long."""

CAPACITY = 10_000
"""The most bounds one transport holds at once (the requests awaiting an answer)."""


class BoundsFull(Exception):
    """A request's bound could not be noted (``CAPACITY`` reached): the request is not sent."""


class _Call:
    """The bound of one call's requests, and the entries they noted."""

    __slots__ = ("limit", "noted")

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self.noted: list[tuple[Bounds, Any]] = []


# The call whose requests are sent from this task (None: the transport's bound).
_BOUND: contextvars.ContextVar[_Call | None] = contextvars.ContextVar("bound", default=None)


def bounded(limit: int | None) -> contextvars.Token[_Call | None]:
    """Requests sent from this context accept answers of at most ``limit`` bytes."""
    return _BOUND.set(None if limit is None else _Call(limit))


def release(token: contextvars.Token[_Call | None]) -> None:
    """Undo ``bounded``: the entries of the call's requests are dropped, answered or not."""
    call = _BOUND.get()
    _BOUND.reset(token)
    if call is not None:
        for bounds, rid in call.noted:
            bounds.by_id.pop(rid, None)


class Bounds:
    """Per-request bounds, noted when a request is sent, read when its answer arrives."""

    def __init__(self, default: int, capacity: int | None = None) -> None:
        self.default = default
        self.capacity = CAPACITY if capacity is None else capacity
        self.by_id: dict[Any, int] = {}

    def note(self, message: Any) -> None:
        """Note a request's bound; raises ``BoundsFull`` when the table is full."""
        call = _BOUND.get()
        message = getattr(message, "root", message)
        rid = getattr(message, "id", None)
        if call is None or rid is None or not hasattr(message, "method"):
            return
        if rid not in self.by_id and len(self.by_id) >= self.capacity:
            raise BoundsFull(f"{self.capacity} bounds held")
        self.by_id[rid] = min(call.limit, self.default)
        call.noted.append((self, rid))

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
