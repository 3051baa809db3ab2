"""A call the approval gate holds, as the frameworks' own pauses show it.

When ``ApprovalGate`` holds a call (``unavailable``, ``approval_pending``) the
request is already in the store; an adapter then pauses the run the
framework's own way (an interruption, an ``interrupt``, a deferred call, a
confirmation request) instead of answering the model, so that the
application keeps its approval UI. When the run resumes the call goes
through tool_call again: the framework's "approved" is only advisory, the
call runs when the gate finds the stored approval for its exact arguments.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ..context import Invocation, ToolResult, TurnContext
from ..verdicts import Outcome, Reason

__all__ = ["PAUSE_KEY", "gated", "gates", "held", "pause", "plain"]

# The key of the pause a framework carries to the application (its metadata, its
# interrupt value, its confirmation payload): tells our pause from the framework's own.
PAUSE_KEY = "guardrails_approval"


def held(result: ToolResult) -> bool:
    """Whether the gate holds the call for a person (it did not run; its request waits)."""
    return result.outcome is Outcome.UNAVAILABLE and result.reason == Reason.APPROVAL_PENDING


def pause(result: ToolResult) -> dict[str, Any]:
    """What the application is shown of a held call (the request's id stays in the store)."""
    return {
        PAUSE_KEY: {
            "tool": result.tool,
            "call_id": result.call_id,
            "reason": str(result.reason),
            "message": result.content,
        }
    }


def gates(rails: Any) -> list[Any]:
    """The hooks of ``rails`` that grant approvals (``ApprovalGate``)."""
    pipeline = getattr(rails, "_pipeline", None)
    return [
        h
        for h in getattr(pipeline, "hooks", ())
        if getattr(h, "grants_approval", False) is True and hasattr(h, "needs_approval")
    ]


def gated(rails: Any, name: str, arguments: Any) -> bool:
    """Whether a gate of ``rails`` would ask about this call, read from its rules alone (no
    store, no guard): for a framework that decides to pause before the call runs. The
    model's arguments without the bound ones: a rule on a bound value reads it unknown, so
    it asks, and the pipeline decides."""
    found = gates(rails)
    if not found:
        return False
    given = arguments if isinstance(arguments, Mapping) else {}
    invocation = Invocation(name, given, given, TurnContext(), "", rails.tools.get(name))
    return any(gate.needs_approval(invocation) for gate in found)


def plain(value: Any) -> Any:
    """A read-only value (a ticket's arguments) as plain JSON values: dicts and lists."""
    if isinstance(value, Mapping):
        return {k: plain(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [plain(v) for v in value]
    return value
