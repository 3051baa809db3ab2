"""The Claude Code CLI's own tools (``Bash``, ``Read``, ``WebFetch`` ...) decided by the engine.

Their bodies run in the CLI, never here, so each call is split into its
decision and its result (``turn.aadmit`` and the ``Ticket``): ``PreToolUse``
admits it (a refused call is denied with the fixed sentence as the reason,
and never runs), ``PostToolUse`` hands the ticket the CLI's output and
``PostToolUseFailure`` its failure; a call the application's ``can_use_tool``
denies is failed as ``unavailable``. A ticket still open when the turn ends
is settled by post_run (``error``, ``not_completed``).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from ..engine import Guardrails, Turn
from ..errors import ConfigurationError, StopRun
from ..middleware.ticket import Ticket

__all__ = ["CliTools"]


class RefusedByPermission(StopRun):
    """The application's permission callback denied the call (its outcome is ``unavailable``)."""


class CliTools:
    """The tickets of the CLI's own tools the engine decides, by call id."""

    def __init__(self, rails: Guardrails, names: Iterable[str]) -> None:
        self.names = frozenset(names)
        missing = sorted(self.names - set(rails.tools))
        if missing:
            raise ConfigurationError(
                f"guard_options(options): cli_tools names {missing[0]!r}, which is not a tool "
                "of the engine: register it with the CLI tool's input schema"
            )
        self.tickets: dict[str, Ticket] = {}

    async def admit(self, turn: Turn, name: str, tool_input: Any, call_id: Any) -> Any:
        """``PreToolUse`` for one of the CLI's tools: the engine's decision, before it runs."""
        ticket = await turn.aadmit(name, tool_input, call_id if isinstance(call_id, str) else None)
        if not ticket.admitted:
            result = ticket.result
            reason = result.content if result is not None else ""
            return {
                "hookSpecificOutput": {
                    "hookEventName": "PreToolUse",
                    "permissionDecision": "deny",
                    "permissionDecisionReason": reason,
                }
            }
        if isinstance(call_id, str):
            self.tickets[call_id] = ticket
        return {}  # admitted: the CLI's own permissions decide next, as without the engine

    async def refused(self, call_id: Any) -> None:
        """The application's permission callback denied an admitted call: it never runs."""
        ticket = self.tickets.pop(call_id, None) if isinstance(call_id, str) else None
        if ticket is not None:
            await ticket.afail(RefusedByPermission("denied by the application's can_use_tool"))

    async def done(self, hook_input: Any, tool_use_id: Any, ctx: Any) -> Any:
        """``PostToolUse``: the CLI's output is the call's result (audited, labelled)."""
        ticket = self._take(hook_input, tool_use_id)
        if ticket is not None:
            await ticket.acomplete(hook_input.get("tool_response"))
        return {}

    async def failed(self, hook_input: Any, tool_use_id: Any, ctx: Any) -> Any:
        """``PostToolUseFailure``: the call failed in the CLI (its error text stays there)."""
        ticket = self._take(hook_input, tool_use_id)
        if ticket is not None:
            await ticket.afail()
        return {}

    def forget(self, turn: Turn) -> None:
        """Drop the tickets of ``turn`` (its post_run settles those still open)."""
        for call_id, ticket in list(self.tickets.items()):
            if ticket.turn is turn:
                del self.tickets[call_id]

    def _take(self, hook_input: Any, tool_use_id: Any) -> Ticket | None:
        call_id = hook_input.get("tool_use_id") or tool_use_id
        return self.tickets.pop(call_id, None) if isinstance(call_id, str) else None
