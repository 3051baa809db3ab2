"""What the choke-points need of a turn, as a protocol.

``engine.Turn`` satisfies it; the middleware modules type against this
protocol instead of importing the engine, which imports them.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any, Protocol

from ..context import ToolResult, TurnContext

__all__ = ["TurnLike"]


class TurnLike(Protocol):
    """One turn: its engine, context, offer, run record and counters."""

    engine: Any
    context: TurnContext
    offered: frozenset[str] | None
    # Per tool withheld by an intent gate: the gate's reject its calls carry.
    gated: dict[str, tuple[Any, ...]]
    results: list[ToolResult]
    counters: dict[str, int]

    def offer(self, names: Iterable[str]) -> None: ...

    def call(self, name: str, arguments: Any, call_id: str | None = None) -> ToolResult: ...

    async def acall(self, name: str, arguments: Any, call_id: str | None = None) -> ToolResult: ...
