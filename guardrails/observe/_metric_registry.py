"""What an engine has registered, as the metrics see it: guards with their mode, tools, backstop rules."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from ..verdicts import ChokePoint
from ._metric_names import ENFORCE, OBSERVE


@dataclass
class Registration:
    """Guards ((name, choke-point) -> mode), tool names, backstop (rule, tool) pairs."""

    guards: dict[tuple[str, ChokePoint], str] = field(default_factory=dict)
    tools: set[str] = field(default_factory=set)
    backstop: set[tuple[str, str]] = field(default_factory=set)

    def add(self, other: Registration) -> None:
        for key, mode in other.guards.items():
            self.guards.setdefault(key, mode)
        self.tools |= other.tools
        self.backstop |= other.backstop


def registered(engine: Any) -> Registration:
    """Every guard (with its mode), tool and backstop rule of an engine."""
    found = Registration()
    for g in tuple(getattr(engine, "guards", {}).values()):
        mode = _mode(g)
        for cp in g.choke_points:
            found.guards[(_name(g.name), ChokePoint(cp))] = mode
        tool = getattr(getattr(g, "fn", None), "tool", None)
        if ChokePoint.POST_RUN in g.choke_points and isinstance(tool, str) and tool:
            found.backstop.add((_name(g.name), tool))
    for name, t in tuple(getattr(engine, "tools", {}).items()):
        found.tools.add(_name(name))
        for g in (*getattr(t, "guards", ()), *getattr(t, "output_guards", ())):
            found.guards[(_name(g.name), ChokePoint.TOOL_CALL)] = _mode(g)
    return found


def registered_guards(engine: Any) -> frozenset[tuple[str, ChokePoint]]:
    """Every (guard name, choke-point) an engine will evaluate."""
    return frozenset(registered(engine).guards)


def _mode(g: Any) -> str:
    return OBSERVE if getattr(g, "observe", False) is True else ENFORCE


def _name(name: Any) -> str:
    if type(name) is not str:
        raise TypeError(f"a guard or tool name must be a str, not {type(name).__name__}")
    return name
