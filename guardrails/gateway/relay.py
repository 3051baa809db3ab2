"""What an upstream sends during a call, relayed to the client that made that call.

The gateway's ``tools/call`` handler runs the call inside ``calling(ctx)``:
the request's own session (scoped to that request, of that client) is held
in a context variable that the engine's pipeline carries into the
forwarding function. ``progress()`` there gives the upstream call a
callback that reports the upstream's ``notifications/progress`` against the
calling request's ``progressToken``, so progress reaches the client that
asked for it and no other; a request without a token asks the upstream for
none. ``caller()`` and ``params()`` give the calling request and its
validated ``tools/call`` params (``asking.py``: an upstream's questions go to
that client, and a 2026-07-28 client's retry carries its answers). A
progress message is the upstream's text: its secrets are cut out and its
length bounded, as for an answer.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Iterable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from typing import Any

from .stderr import redact

__all__ = ["MAX_MESSAGE", "MAX_SENDING", "Progress", "caller", "calling", "params", "progress"]

log = logging.getLogger("guardrails.gateway")

# The longest progress message relayed, in characters (a longer one is cut, with "…").
MAX_MESSAGE = 1_000
# The most reports of one call on their way to its client at once (more are dropped).
MAX_SENDING = 64

Progress = Callable[[float, float | None, str | None], Awaitable[None]]

_CALLER: ContextVar[Any] = ContextVar("guardrails_gateway_caller", default=None)
_PARAMS: ContextVar[Any] = ContextVar("guardrails_gateway_params", default=None)


@contextmanager
def calling(ctx: Any, params: Any = None) -> Iterator[None]:
    """Within this block, the current call is ``ctx``'s (a ``ServerRequestContext``),
    with its ``tools/call`` params."""
    token = _CALLER.set(ctx)
    held = _PARAMS.set(params)
    try:
        yield
    finally:
        _PARAMS.reset(held)
        _CALLER.reset(token)


def caller() -> Any:
    """The calling request's context, or None outside a call's task."""
    return _CALLER.get()


def params() -> Any:
    """The calling request's ``tools/call`` params, or None."""
    return _PARAMS.get()


def progress(secrets: Iterable[str] = ()) -> Progress | None:
    """A progress callback to the calling request, if it asked for progress: each
    message without ``secrets`` and cut to ``MAX_MESSAGE`` characters. A report that
    comes while ``MAX_SENDING`` of the call's are still being sent is dropped, and one
    the client cannot take (gone, closed) is dropped too: an upstream's flood or a
    client that stops reading holds a bounded number of reports per call."""
    ctx = _CALLER.get()
    if ctx is None or not _asked(ctx):
        return None
    session = ctx.session
    known = tuple(secrets)
    sending = 0

    async def report(value: float, total: float | None, message: str | None) -> None:
        nonlocal sending
        if sending >= MAX_SENDING:
            return
        sending += 1
        try:
            await session.report_progress(value, total, _message(message, known))
        except Exception as exc:  # the client went away: its progress has nowhere to go
            log.debug("progress not relayed (%s)", type(exc).__name__)
        finally:
            sending -= 1

    return report


def _message(message: str | None, secrets: tuple[str, ...]) -> str | None:
    if message is None:
        return None
    text = redact(message[: MAX_MESSAGE * 4], secrets)
    return text if len(text) <= MAX_MESSAGE else text[: MAX_MESSAGE - 1] + "\u2026"


def _asked(ctx: Any) -> bool:
    """Whether the request carries a progress token: in its ``_meta`` on the wire;
    held by the request's dispatch context in memory (the SDK names no accessor)."""
    meta = getattr(ctx, "meta", None)
    if meta and meta.get("progressToken") is not None:
        return True
    outbound = getattr(getattr(ctx, "session", None), "_request_outbound", None)
    for _ in range(4):  # through the SDK's wrappers of the dispatch context
        if outbound is None:
            return False
        if any(getattr(outbound, key, None) is not None for key in _HELD):
            return True
        outbound = getattr(outbound, "_inner", None)
    return False


_HELD = ("_progress_token", "progress_token", "_on_progress")
