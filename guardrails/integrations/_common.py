"""What the integrations share: reading SDK objects or dicts, and choosing what to offer."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any, NamedTuple

from ..engine import Guardrails, Turn
from ..middleware.pre_turn import PreTurnDecision
from ..tools import Tool

__all__ = ["Offer", "aoffer", "field", "offer", "tools_of"]


def field(obj: Any, name: str, default: Any = None) -> Any:
    """``obj[name]`` for a mapping, ``obj.name`` for an SDK object."""
    if isinstance(obj, dict):
        return obj.get(name, default)
    return getattr(obj, name, default)


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
