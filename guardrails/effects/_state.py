"""Per-call state shared by the effect hooks, the audit log and the paid-call wrapper.

The hooks of one tool call run on one thread (or in one task), so a context
variable carries the call's state from ``before`` through the tool body (where
``PaidCall`` adds tokens and cost) to ``after`` (where the audit row is built).
Each hook ``enter``s in ``before`` and ``leave``s in ``after``; when the last
one has left, the variable is cleared, so a paid call made after the tool
call is not charged to it.
A sync tool with a timeout runs on a pool thread and does not see it; pass
``instance=`` to ``PaidCall`` there.
"""

from __future__ import annotations

from contextvars import ContextVar
from dataclasses import dataclass, field
from typing import Any

from ..context import Invocation, TurnContext

__all__ = ["CallState", "current", "enter", "leave", "state_for"]


@dataclass(slots=True)
class CallState:
    """What the hooks of one call learned: spend, and details for its audit row."""

    call_id: str
    context: TurnContext
    tokens_in: int = 0
    tokens_out: int = 0
    cost: float = 0.0
    paid_calls: int = 0
    detail: dict[str, Any] = field(default_factory=dict)
    private: dict[str, Any] = field(default_factory=dict)
    open: set[int] = field(default_factory=set)


_current: ContextVar[CallState | None] = ContextVar("guardrails_call", default=None)


def state_for(invocation: Invocation) -> CallState:
    """The state of this call, created by the first hook that asks."""
    state = _current.get()
    if state is None or state.call_id != invocation.call_id:
        state = CallState(invocation.call_id, invocation.context)
        _current.set(state)
    return state


def enter(invocation: Invocation, hook: object) -> CallState:
    """``hook``'s ``before`` is running for this call."""
    state = state_for(invocation)
    state.open.add(id(hook))
    return state


def leave(invocation: Invocation, hook: object) -> CallState:
    """``hook``'s ``after`` is running; the last hook to leave clears the call."""
    state = state_for(invocation)
    state.open.discard(id(hook))
    if not state.open:
        _current.set(None)
    return state


def current() -> CallState | None:
    """The state of the tool call running on this thread or task, if any."""
    return _current.get()
