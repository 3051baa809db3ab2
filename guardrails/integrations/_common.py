"""What the integrations share: reading SDK objects or dicts, and choosing what to offer."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from ..engine import Guardrails, Turn
from ..tools import Tool

__all__ = ["field", "offer", "tools_of"]


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


def offer(turn: Turn, names: Iterable[str] | None = None) -> list[Tool]:
    """The tools the model is offered in ``turn``, in registration order; recorded on the turn.

    ``names`` narrows the candidates (default: every tool of the engine). A turn
    whose offer was already decided keeps to it: a tool left out before is not
    offered now.
    """
    candidates = tools_of(turn)
    if names is not None:
        wanted = frozenset(names)
        candidates = [t for t in candidates if t.name in wanted]
    if turn.offered is not None:
        candidates = [t for t in candidates if t.name in turn.offered]
    turn.offer(t.name for t in candidates)
    return candidates
