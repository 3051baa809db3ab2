"""What the agent-framework adapters share: tools read from a framework, the context of a run.

An adapter registers each of the agent's tools in the engine once, when the
agent is guarded (a tool the application registered itself under the same
name is kept as it is), so a bad binding fails then, naming the tool. Each
run of the agent gets a ``Turn`` whose context comes from the framework's own
run context (its session id) unless the application says otherwise.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from typing import Any

from ..context import TurnContext
from ..engine import Guardrails, Turn
from ..errors import ConfigurationError
from ..middleware.post_run import PostRunReport
from ..tools import Tool

__all__ = [
    "ContextSource",
    "ReportSink",
    "ToolOptions",
    "check_tool_options",
    "register",
    "start_turn",
]

# Per tool name, the options of ``Tool`` (``bind=``, ``effect=``, ``guards=``, ``timeout=`` ...).
ToolOptions = Mapping[str, Mapping[str, Any]]

# Where a run's TurnContext comes from: a fixed context, or a function of the
# framework's run context (an ADK ``ToolContext``, an Agent Framework ``AgentContext``,
# a Claude Agent SDK hook input).
ContextSource = TurnContext | Callable[[Any], TurnContext] | None

# Called with the post_run report at the end of each run.
ReportSink = Callable[[PostRunReport], Any] | None


def check_tool_options(options: ToolOptions | None, names: Iterable[str], where: str) -> None:
    """Options for a tool the agent does not have are a mistake: name it."""
    unknown = sorted(set(options or {}) - set(names))
    if unknown:
        raise ConfigurationError(
            f"{where}: options for {unknown[0]!r}, which the agent does not have"
        )


def register(
    rails: Guardrails,
    name: str,
    build: Callable[..., Tool],
    options: ToolOptions | None,
) -> Tool:
    """The engine's tool ``name``; built with ``build(**options)`` and added when it is missing."""
    existing = rails.tools.get(name)
    if existing is not None:
        if options and name in options:
            raise ConfigurationError(
                f"tool {name!r} is already registered in the engine: give its options there"
            )
        return existing
    return rails.add_tool(build(**dict((options or {}).get(name, {}))))


def start_turn(rails: Guardrails, context: ContextSource, source: Any, session: Any) -> Turn:
    """A turn for one run: the application's context, else the framework's session id."""
    if callable(context):
        made = context(source)
        if not isinstance(made, TurnContext):
            raise ConfigurationError(
                f"context function {context!r} returned {type(made).__name__}, not a TurnContext"
            )
        turn_context = made
    else:
        turn_context = context or TurnContext()
    if turn_context.session is None and isinstance(session, str) and session:
        turn_context = turn_context.evolve(session=session)
    return rails.turn(turn_context)
