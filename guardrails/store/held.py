"""Event rows written with a call's own row: queued at once, waited for at the call's end.

Within ``held()`` (the gateway holds each ``tools/call``), ``hold(store, row)``
queues an event row (the call's pre_turn decision) on the store's thread and
returns at once instead of waiting for its commit; leaving the block waits for
every row held in it. The call's own row is queued after them on the same
thread, so the rows keep their order and all of them are committed before the
call is answered, with one wait of the event loop for the store rather than
one per row. A store written on the loop (``offloop.async_path``) or that
never blocks (memory) is not held: ``hold`` says False and the row is written
as ever.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from contextvars import ContextVar
from typing import Any

from . import offloop
from ._base import AuditRow

__all__ = ["held", "hold"]

log = logging.getLogger("guardrails")

_HELD: ContextVar[list[asyncio.Future[None]] | None] = ContextVar(
    "guardrails_held_rows", default=None
)


def hold(store: Any, row: AuditRow) -> bool:
    """Queue ``row`` to be waited for when the ``held()`` block ends; False outside one
    (or for a store not written on its own thread): the caller writes it itself."""
    rows = _HELD.get()
    if rows is None or offloop.async_path(store) is not None:
        return False
    runner = offloop.off_loop(store)
    if runner is None:
        return False
    rows.append(runner.append(row))
    return True


@asynccontextmanager
async def held() -> AsyncIterator[None]:
    """Rows ``hold`` takes in this block are committed (or have failed) when it ends."""
    rows: list[asyncio.Future[None]] = []
    token = _HELD.set(rows)
    try:
        yield
    finally:
        _HELD.reset(token)
        for future in rows:
            try:
                await future
            except Exception:
                log.warning("an audit row of a call's turn was not written", exc_info=True)
