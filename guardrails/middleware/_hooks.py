"""Step 6 and the wrap-up of a call: the hooks' ``before`` and ``after``.

A hook guards an effect (a cap, a key, a snapshot): when its ``before``
cannot say (it raised, or returned something that is not a decision), the
tool does not run. Once the tool has run, its result stands: an ``after``
that fails is counted as an escape and the result goes on unchanged.
"""

from __future__ import annotations

from typing import Any, NamedTuple, Protocol

from ..context import Escape, Invocation, ToolResult
from ..verdicts import ChokePoint, EscapeReason, Outcome, Reason

__all__ = [
    "CallHook",
    "Stop",
    "aafter_hooks",
    "abefore_hooks",
    "after_hooks",
    "before_hooks",
]

_TOOL_CALL = ChokePoint.TOOL_CALL
_UNAVAILABLE = Outcome.UNAVAILABLE
_ESCAPE_RAISED = EscapeReason.RAISED
_ESCAPE_INVALID_RETURN = EscapeReason.INVALID_RETURN
_HOOK_FAILED_REASON = Reason.HOOK_FAILED


class Stop(NamedTuple):
    """A hook's decision that the call ends here (or, with ``ok``, a replayed value)."""

    outcome: Outcome
    reason: str
    value: Any = None
    exception: BaseException | None = None


class CallHook(Protocol):
    """Step 6 and the wrap-up of a call: budgets, ceilings, idempotency, audit.

    ``before`` runs after the guards passed and before the tool; it returns
    ``None`` to go on, a ``Stop`` to end the call, or an ``Escape`` to record
    and go on. ``after`` sees every result of a call that reached ``before``
    (including its own ``Stop``) and may return a replacement.
    """

    def before(self, invocation: Invocation, /) -> Stop | Escape | None: ...

    def after(self, invocation: Invocation, result: ToolResult, /) -> ToolResult: ...

    # A hook may also define ``async def abefore`` / ``async def aafter`` with the
    # same meaning: ``arun`` awaits them instead (so a hook that waits on a store
    # does not block the event loop) and calls ``before`` / ``after`` otherwise.


_HOOK_FAILED = Stop(Outcome.UNAVAILABLE, Reason.HOOK_FAILED)


def before_hooks(
    hooks: tuple[CallHook, ...], inv: Invocation, escapes: list[Escape]
) -> Stop | None:
    for hook in hooks:
        try:
            decision = hook.before(inv)
        except Exception as exc:
            # A hook guards an effect (a cap, a key, a snapshot): when it
            # cannot say, the tool does not run.
            escapes.append(Escape(_hook_name(hook), _TOOL_CALL, _ESCAPE_RAISED, exc))
            return Stop(_UNAVAILABLE, _HOOK_FAILED_REASON, None, exc)
        if decision is None:
            continue
        if type(decision) is Escape:
            escapes.append(decision)
            continue
        if type(decision) is Stop and type(decision.outcome) is Outcome:
            return decision
        # Anything else is a hook that could not say: the tool does not run.
        escapes.append(Escape(_hook_name(hook), _TOOL_CALL, _ESCAPE_INVALID_RETURN))
        return _HOOK_FAILED
    return None


async def abefore_hooks(
    hooks: tuple[CallHook, ...], inv: Invocation, escapes: list[Escape]
) -> Stop | None:
    """``before_hooks`` for ``arun``: a hook's ``abefore`` is awaited when it has one."""
    for hook in hooks:
        abefore = getattr(hook, "abefore", None)
        try:
            decision = hook.before(inv) if abefore is None else await abefore(inv)
        except Exception as exc:
            escapes.append(Escape(_hook_name(hook), _TOOL_CALL, _ESCAPE_RAISED, exc))
            return Stop(_UNAVAILABLE, _HOOK_FAILED_REASON, None, exc)
        stop = _hook_decision(hook, decision, escapes)
        if stop is not None:
            return stop
    return None


def after_hooks(hooks: tuple[CallHook, ...], inv: Invocation, result: ToolResult) -> ToolResult:
    for hook in reversed(hooks):
        try:
            replaced = hook.after(inv, result)
        except Exception as exc:
            # The tool has run: its result stands, and the failure is counted.
            missed = Escape(_hook_name(hook), _TOOL_CALL, _ESCAPE_RAISED, exc)
            result = result._replace(escapes=(*result.escapes, missed))
            continue
        if type(replaced) is ToolResult:
            result = replaced
        else:
            missed = Escape(_hook_name(hook), _TOOL_CALL, _ESCAPE_INVALID_RETURN)
            result = result._replace(escapes=(*result.escapes, missed))
    return result


async def aafter_hooks(
    hooks: tuple[CallHook, ...], inv: Invocation, result: ToolResult
) -> ToolResult:
    """``after_hooks`` for ``arun``: a hook's ``aafter`` is awaited when it has one."""
    for hook in reversed(hooks):
        aafter = getattr(hook, "aafter", None)
        try:
            replaced = hook.after(inv, result) if aafter is None else await aafter(inv, result)
        except Exception as exc:
            missed = Escape(_hook_name(hook), _TOOL_CALL, _ESCAPE_RAISED, exc)
            result = result._replace(escapes=(*result.escapes, missed))
            continue
        result = _hook_replacement(hook, replaced, result)
    return result


def _hook_decision(hook: Any, decision: Any, escapes: list[Escape]) -> Stop | None:
    """What ``arun`` makes of a hook's ``abefore`` answer (as ``before_hooks`` does)."""
    if decision is None:
        return None
    if type(decision) is Escape:
        escapes.append(decision)
        return None
    if type(decision) is Stop and type(decision.outcome) is Outcome:
        return decision
    escapes.append(Escape(_hook_name(hook), _TOOL_CALL, _ESCAPE_INVALID_RETURN))
    return _HOOK_FAILED


def _hook_replacement(hook: Any, replaced: Any, result: ToolResult) -> ToolResult:
    """What ``arun`` makes of a hook's ``aafter`` answer (as ``after_hooks`` does)."""
    if type(replaced) is ToolResult:
        return replaced
    missed = Escape(_hook_name(hook), _TOOL_CALL, _ESCAPE_INVALID_RETURN)
    return result._replace(escapes=(*result.escapes, missed))


def _hook_name(hook: Any) -> str:
    name = getattr(hook, "name", None)
    return name if type(name) is str and name else type(hook).__name__
