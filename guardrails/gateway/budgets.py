"""Budgets: a tool's ``cost`` per call, counted against a daily cap and a per-session cap.

A tool with ``cost`` in its ``[upstreams.NAME.tools.TOOL]`` table is forwarded
through one ``guardrails.effects.PaidCall`` (the paid-call choke-point): the
cost is reserved against ``daily_cap`` and ``instance_cap`` atomically in the
gateway's store before the upstream is called, settled after it, and each call
writes a ``paid_call`` audit row. Its instance is the call's workflow or
session, so an instance cap holds across calls, restarts and replicas sharing
PostgreSQL. The cost is fixed per call, so the estimate is the cost and the
caps are exact. A call that would cross a cap answers ``limit`` without
reaching the upstream; a call with an instance cap and no session answers
``unavailable``.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

from .._call_state import current
from ..effects import PaidCall, Usage
from ..errors import StopRun
from ..store import Store
from .config import ToolConfig

__all__ = ["NoInstance", "budgeted"]

# What an upstream answered: its blocks (``Forwarded``), or their redacted text.
Forward = Callable[..., Awaitable[Any]]


class NoInstance(StopRun):
    """A tool with a per-session cap was called without a session."""


def budgeted(forward: Forward, config: ToolConfig, store: Store | None, scope: str) -> Forward:
    """``forward`` through a ``PaidCall`` when ``config`` has a cost; else ``forward``."""
    if config.cost is None or store is None:
        return forward
    cost = config.cost
    paid = PaidCall(
        store,
        usage=lambda _response: Usage(cost=cost),
        daily_cap=config.daily_cap,
        instance_cap=config.instance_cap,
        estimate=cost,
        scope=f"gateway:{scope}",
        name=scope,
    )

    async def call(**arguments: Any) -> Any:
        state = current()
        instance = None if state is None else state.context.workflow or state.context.session
        if config.instance_cap is not None and instance is None:
            raise NoInstance(f"{scope}: a per-session cap needs a session")
        return await paid.acall(forward, instance=instance, **arguments)

    call.__name__ = forward.__name__
    return call
