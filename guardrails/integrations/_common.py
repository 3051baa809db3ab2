"""What the integrations share: reading SDK objects or dicts, and choosing what to offer."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any, NamedTuple

from ..context import ToolResult
from ..engine import Guardrails, Turn
from ..middleware.pre_turn import PreTurnDecision
from ..tools import Tool

__all__ = [
    "Call",
    "Offer",
    "aanswer",
    "answer",
    "aoffer",
    "call_of",
    "field",
    "items",
    "offer",
    "tools_of",
]

# One tool call as the model asked for it: (name, arguments, the model's call id).
Call = tuple[Any, Any, "str | None"]


def field(obj: Any, name: str, default: Any = None) -> Any:
    """``obj[name]`` for a mapping, ``obj.name`` for an SDK object."""
    if isinstance(obj, dict):
        return obj.get(name, default)
    return getattr(obj, name, default)


def items(value: Any) -> list[Any]:
    """The elements of a list-like SDK field; anything else (a number, a string) has none."""
    if isinstance(value, list | tuple):
        return list(value)
    return []


def call_of(name: Any, arguments: Any, call_id: Any) -> Call:
    """A ``Call``; a call id that is not a string is dropped (one is generated)."""
    return name, arguments, call_id if isinstance(call_id, str) else None


def answer(
    turn: Turn, calls: Iterable[Call], reply: Callable[[ToolResult, str | None], Any]
) -> list[Any]:
    """Each call through tool_call, in order; ``reply`` formats each result for the SDK."""
    return [
        reply(turn.call(name, arguments, call_id), call_id) for name, arguments, call_id in calls
    ]


async def aanswer(
    turn: Turn, calls: Iterable[Call], reply: Callable[[ToolResult, str | None], Any]
) -> list[Any]:
    """``answer`` for async tools and guards."""
    return [
        reply(await turn.acall(name, arguments, call_id), call_id)
        for name, arguments, call_id in calls
    ]


def tools_of(source: Guardrails | Turn | Iterable[Tool]) -> list[Tool]:
    """The tools of an engine, of a turn's engine, or a list of tools as given."""
    if isinstance(source, Turn):
        source = source.engine
    if isinstance(source, Guardrails):
        return list(source.tools.values())
    return list(source)


class Offer(NamedTuple):
    """The tools offered to the model, and the code of a refused turn (None when it goes on)."""

    tools: list[Tool]
    refusal: str | None = None


def _candidates(turn: Turn, names: Iterable[str] | None) -> list[Tool]:
    candidates = tools_of(turn)
    if names is not None:
        wanted = frozenset(names)
        candidates = [t for t in candidates if t.name in wanted]
    return candidates


def _decided(decision: PreTurnDecision) -> Offer:
    refusal = decision.refusal
    return Offer(list(decision.tools), None if refusal is None else str(refusal.code))


def offer(turn: Turn, turn_input: Any = None, names: Iterable[str] | None = None) -> Offer:
    """Run pre_turn over the engine's tools (narrowed to ``names``); the turn remembers the offer."""
    return _decided(turn.pre_turn(turn_input, _candidates(turn, names)))


async def aoffer(turn: Turn, turn_input: Any = None, names: Iterable[str] | None = None) -> Offer:
    """``offer`` for async pre_turn guards."""
    return _decided(await turn.apre_turn(turn_input, _candidates(turn, names)))
