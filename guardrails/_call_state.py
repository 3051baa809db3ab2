"""Per-call state shared by the effect hooks, the audit log, the paid-call wrapper and the spans.

The hooks of one tool call run on one thread (or in one task), so a context
variable carries the call's state from ``before`` through the tool body (where
``PaidCall`` adds tokens and cost) to ``after`` (where the audit row is built).
Each hook ``enter``s in ``before`` and ``leave``s in ``after``; when the last
one has left, the variable is cleared, so a paid call made after the tool
call is not charged to it. A hook that only reads the state (the audit log)
uses ``opened`` and ``closed`` instead, which make no ``CallState``: one is
made only when a paid call or another hook asks for it.
A sync tool with a timeout runs on a pool thread and does not see it; pass
``instance=`` to ``PaidCall`` there.
"""

from __future__ import annotations

from contextvars import ContextVar
from dataclasses import dataclass, field
from typing import Any

from .context import Invocation, TurnContext

__all__ = ["CallState", "closed", "current", "enter", "leave", "opened", "state_for"]


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


# The call in progress on this thread or task: a cell shared by reference with
# the tasks it starts, [invocation, its CallState or None, ids of the hooks
# inside it]. The CallState is made the first time something asks for it (a
# paid call, a hook that keeps details), not for every call.
_current: ContextVar[list[Any] | None] = ContextVar("guardrails_call", default=None)
_INVOCATION, _STATE, _OPEN = 0, 1, 2


def _cell(invocation: Invocation) -> list[Any]:
    """The cell of this call, a new one when the variable holds none or another call's."""
    cell = _current.get()
    if cell is None or cell[_INVOCATION].call_id != invocation.call_id:
        cell = [invocation, None, set()]
        _current.set(cell)
    return cell


def _state_of(cell: list[Any]) -> CallState:
    state: CallState | None = cell[_STATE]
    if state is None:
        invocation = cell[_INVOCATION]
        state = cell[_STATE] = CallState(invocation.call_id, invocation.context, open=cell[_OPEN])
    return state


def state_for(invocation: Invocation) -> CallState:
    """The state of this call, created by the first hook that asks."""
    return _state_of(_cell(invocation))


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


def opened(invocation: Invocation, hook: object) -> None:
    """``enter`` for a hook that only reads the state: nothing is made for it."""
    cell = _current.get()
    if cell is None or cell[_INVOCATION].call_id != invocation.call_id:
        _current.set([invocation, None, {id(hook)}])
    else:
        cell[_OPEN].add(id(hook))


def closed(invocation: Invocation, hook: object) -> CallState | None:
    """``leave`` for a hook that only reads the state: None when nothing made one."""
    cell = _current.get()
    if cell is None or cell[_INVOCATION].call_id != invocation.call_id:
        _current.set(None)  # what ``leave`` leaves: a call no hook is inside
        return None
    cell[_OPEN].discard(id(hook))
    if not cell[_OPEN]:
        _current.set(None)
    state: CallState | None = cell[_STATE]
    return state


def current() -> CallState | None:
    """The state of the tool call running on this thread or task, if any."""
    cell = _current.get()
    return None if cell is None else _state_of(cell)
