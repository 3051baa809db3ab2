"""The tool_call choke-point: what runs, and what goes back to the model.

The steps, in order (SPEC): 1 unknown or not-offered tool; 2 the arguments
become one canonical JSON value, with no bound parameter among them; 3 missing
required; 4 full schema validation, every error collected (steps 1-4 are
``admission.admit``); then the bound values and secrets, under a deadline;
5 domain guards, which read the arguments through a read-only view; 6 hooks
(ceilings, budgets, rate limits, idempotency, snapshots); 7 the tool runs on
the validated copy; 8 the result is rendered and capped; 9 output guards.
Decisions are pure functions shared by the sync and async drivers; only the
code that calls user callables is written twice, and it is a few lines each.

Whatever the callables do, a call ends in a ``ToolResult``. The exceptions
that still reach the caller are deliberate stops: ``KeyboardInterrupt``,
``SystemExit``, the caller's own cancellation (the call is recorded with
reason ``interrupted`` first, and the tool never runs after one) and
``UsageError`` (misuse).
"""

from __future__ import annotations

import asyncio
import itertools
import os
from collections.abc import Callable, Mapping
from time import perf_counter_ns
from types import MappingProxyType
from typing import Any, NamedTuple, Protocol

from .._aio import (
    acall_with_timeout,
    await_with_timeout,
    call_with_timeout,
    cancel_requested,
    owes_record,
    run_coroutine,
    stops,
    to_the_end,
)
from .._aio import late as _late
from ..context import Escape, Invocation, ToolResult, TurnContext, VerdictRecord
from ..errors import LimitExceeded, StopRun, UsageError
from ..guard import GuardOutcome, evaluate_plain
from ..tools import Tool
from ..verdicts import ChokePoint, EscapeReason, Outcome, Reason, Verdict, combine, model_sentence
from ._render import redact, render
from .admission import (
    FLAG_BOUND_ARGUMENT_SUPPLIED,
    Plan,
    admit,
    entry_call_id,
    refusal,
    resolve,
    unresolved,
)

__all__ = [
    "FLAG_BOUND_ARGUMENT_SUPPLIED",
    "FLAG_LATE_RESULT",
    "CallHook",
    "Plan",
    "Stop",
    "ToolCallPipeline",
]

_TOOL_CALL = ChokePoint.TOOL_CALL
_OK = Outcome.OK
_PASS = Verdict.PASS
_REJECT = Verdict.REJECT
_NOT_EVALUATED = Verdict.NOT_EVALUATED
_UNAVAILABLE = Outcome.UNAVAILABLE
_PREFIX = os.urandom(4).hex()
_COUNTER = itertools.count(1)
# Call ids for calls the model gave none: a per-process random prefix and a counter.
_CALL_IDS = map(f"gr_{_PREFIX}{{:x}}".format, _COUNTER)

FLAG_LATE_RESULT = "late_result"


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


_new = tuple.__new__
_Proxy = MappingProxyType


def new_call_id() -> str:
    return next(_CALL_IDS)


class ToolCallPipeline:
    """Steps 1-9 over a registry of plans. Holds configuration only."""

    __slots__ = (
        "hooks",
        "max_argument_chars",
        "max_result_chars",
        "plans",
        "provider_timeout",
        "recorder",
        "secrets",
    )

    def __init__(
        self,
        plans: Mapping[str, Plan],
        *,
        hooks: tuple[CallHook, ...] = (),
        recorder: Any = None,
        max_result_chars: int = 16_000,
        max_argument_chars: int = 1_000_000,
        secrets: Callable[[str], Any] | None = None,
        provider_timeout: float | None = 5.0,
    ) -> None:
        self.plans = plans
        self.hooks = hooks
        self.recorder = recorder
        self.max_result_chars = max_result_chars
        self.max_argument_chars = max_argument_chars
        self.secrets = secrets
        self.provider_timeout = provider_timeout

    # -- the two drivers ----------------------------------------------------

    def run(self, turn: Any, name: str, arguments: Any, call_id: str | None) -> ToolResult:
        start = perf_counter_ns()
        call_id = next(_CALL_IDS) if call_id is None else entry_call_id(call_id, new_call_id)
        admitted = admit(self.plans, turn, name, arguments, call_id, self.max_argument_chars, start)
        if admitted.__class__ is ToolResult:
            return self._finish(turn, admitted)
        plan, args, nested = admitted  # type: ignore[misc]
        view = model_view = _Proxy(args) if nested is None else nested
        secrets = None
        if plan.tool.bound:
            bound = self._bind(plan.tool, args, turn.context, call_id, start)
            if bound.__class__ is ToolResult:
                return self._finish(turn, bound)
            args, secrets = bound  # type: ignore[misc]
            view = _Proxy(args) if nested is None else _bound_view(nested, args)
        inv = _new(Invocation, (name, view, model_view, turn.context, call_id, plan.tool, turn))
        try:
            if plan.plain:
                judged = _judge_plain(plan, inv, start)
                if judged.__class__ is ToolResult:
                    return self._finish(turn, judged)
                records, escapes, verdict = judged  # type: ignore[misc]
            elif plan.guards:
                outcomes = [g.evaluate(inv, _TOOL_CALL) for g in plan.guards]
                judged = _judge(plan, inv, outcomes, start)
                if judged.__class__ is ToolResult:
                    return self._finish(turn, judged)
                records, escapes, verdict = judged  # type: ignore[misc]
            else:
                records, escapes, verdict = (), [], _NOT_EVALUATED
        except BaseException:
            self._finish(turn, _interrupted(inv, start))
            raise
        try:  # from here on, a deliberate stop still reaches the hooks' after()
            stop = self._before_hooks(inv, escapes) if self.hooks else None
            value = None
            late = False
            if stop is None:
                tool = plan.tool
                deadline = tool.deadline_ns
                began = 0 if deadline is None else perf_counter_ns()
                try:
                    value = tool.fn(**args) if tool.plain else self._call_sync(tool, args, secrets)
                    if deadline is not None:
                        late = _late(began, deadline)
                except BaseException as exc:
                    stop = _failure(exc)
            result = self._complete(
                inv, records, escapes, verdict, stop, value, start, late, secrets
            )
            if result.outcome is _OK and plan.output_guards:
                checked = [g.evaluate((inv, result), _TOOL_CALL) for g in plan.output_guards]
                result = self._after_output(plan, inv, result, checked)
        except BaseException:
            self._interrupt(turn, inv, start)
            raise
        if self.hooks:
            result = self._after_hooks(inv, result)
        return self._finish(turn, result)

    async def arun(self, turn: Any, name: str, arguments: Any, call_id: str | None) -> ToolResult:
        start = perf_counter_ns()
        call_id = next(_CALL_IDS) if call_id is None else entry_call_id(call_id, new_call_id)
        admitted = admit(self.plans, turn, name, arguments, call_id, self.max_argument_chars, start)
        if admitted.__class__ is ToolResult:
            return await self._afinish(turn, admitted)
        plan, args, nested = admitted  # type: ignore[misc]
        view = model_view = _Proxy(args) if nested is None else nested
        secrets = None
        if plan.tool.bound:
            bound = await self._abind(plan.tool, args, turn.context, call_id, start)
            if bound.__class__ is ToolResult:
                return await self._afinish(turn, bound)
            args, secrets = bound  # type: ignore[misc]
            view = _Proxy(args) if nested is None else _bound_view(nested, args)
        inv = _new(Invocation, (name, view, model_view, turn.context, call_id, plan.tool, turn))
        try:
            if plan.plain:  # sync guards only: the same loop as the sync driver
                judged = _judge_plain(plan, inv, start)
                if judged.__class__ is ToolResult:
                    return await self._afinish(turn, judged)
                records, escapes, verdict = judged  # type: ignore[misc]
            elif plan.guards:
                outcomes = [await g.aevaluate(inv, _TOOL_CALL) for g in plan.guards]
                judged = _judge(plan, inv, outcomes, start)
                if judged.__class__ is ToolResult:
                    return await self._afinish(turn, judged)
                records, escapes, verdict = judged  # type: ignore[misc]
            else:
                records, escapes, verdict = (), [], _NOT_EVALUATED
            if plan.awaits and cancel_requested():
                # A guard swallowed the caller's cancellation: the tool does not run.
                raise asyncio.CancelledError
        except BaseException as exc:
            await self._ainterrupt(turn, inv, start, exc, hooks=False)
            raise
        try:  # from here on, a deliberate stop still reaches the hooks' after()
            stop = await self._abefore_hooks(inv, escapes) if self.hooks else None
            value = None
            late = False
            if stop is None:
                tool = plan.tool
                deadline = tool.deadline_ns
                began = 0 if deadline is None else perf_counter_ns()
                try:
                    if tool.plain:
                        value = tool.fn(**args)
                    else:
                        value = await self._call_async(tool, args, secrets)
                    if deadline is not None:
                        late = _late(began, deadline)
                except BaseException as exc:
                    stop = _failure(exc)
            result = self._complete(
                inv, records, escapes, verdict, stop, value, start, late, secrets
            )
            if result.outcome is _OK and plan.output_guards:
                checked = [await g.aevaluate((inv, result), _TOOL_CALL) for g in plan.output_guards]
                result = self._after_output(plan, inv, result, checked)
        except BaseException as exc:
            await self._ainterrupt(turn, inv, start, exc)
            raise
        if self.hooks:
            result = await self._aafter_hooks(inv, result)
        return await self._afinish(turn, result)

    @staticmethod
    def _call_sync(tool: Tool, args: dict[str, Any], secrets: dict[str, Any] | None) -> Any:
        kwargs = _kwargs(tool, args, secrets)
        if tool.is_async:
            return run_coroutine(tool.fn(**kwargs), tool.timeout)
        if tool.timeout is None:
            return tool.fn(**kwargs)
        return call_with_timeout(lambda: tool.fn(**kwargs), tool.timeout)

    @staticmethod
    async def _call_async(tool: Tool, args: dict[str, Any], secrets: dict[str, Any] | None) -> Any:
        kwargs = _kwargs(tool, args, secrets)
        if tool.is_async:
            if tool.timeout is None:
                return await tool.fn(**kwargs)
            return await await_with_timeout(tool.fn(**kwargs), tool.timeout)
        if tool.timeout is None:
            return tool.fn(**kwargs)
        return await acall_with_timeout(lambda: tool.fn(**kwargs), tool.timeout)

    # -- step 2, bound values: user code under a deadline -----------------------

    def _bind(
        self, tool: Tool, args: dict[str, Any], context: TurnContext, call_id: str, start: int
    ) -> ToolResult | tuple[dict[str, Any], dict[str, Any] | None]:
        timeout = self.provider_timeout if tool.runs_providers else None
        if timeout is None:  # context keys only, or no provider deadline: inline
            try:
                return resolve(tool, args, context, self.secrets)
            except Exception as exc:
                return unresolved(call_id, tool.name, start, exc)
        began = perf_counter_ns()
        try:
            merged, secrets = call_with_timeout(resolve, timeout, tool, args, context, self.secrets)
        except Exception as exc:
            return unresolved(call_id, tool.name, start, exc)
        if _late(began, int(timeout * 1e9)):
            return unresolved(call_id, tool.name, start, None, late=True)
        return merged, secrets

    async def _abind(
        self, tool: Tool, args: dict[str, Any], context: TurnContext, call_id: str, start: int
    ) -> ToolResult | tuple[dict[str, Any], dict[str, Any] | None]:
        timeout = self.provider_timeout if tool.runs_providers else None
        if timeout is None:  # context keys only, or no provider deadline: inline
            try:
                return resolve(tool, args, context, self.secrets)
            except Exception as exc:
                return unresolved(call_id, tool.name, start, exc)
        began = perf_counter_ns()
        try:
            merged, secrets = await acall_with_timeout(
                resolve, timeout, tool, args, context, self.secrets
            )
        except Exception as exc:
            return unresolved(call_id, tool.name, start, exc)
        if _late(began, int(timeout * 1e9)):
            return unresolved(call_id, tool.name, start, None, late=True)
        return merged, secrets

    def _interrupt(self, turn: Any, inv: Invocation, start: int) -> None:
        """A deliberate stop (KeyboardInterrupt, SystemExit, the caller's
        cancellation) after the guards: hooks and recorders still see the call
        (reason ``interrupted``), then the stop propagates."""
        result = _interrupted(inv, start)
        if self.hooks:
            result = self._after_hooks(inv, result)
        self._finish(turn, result)

    async def _ainterrupt(
        self, turn: Any, inv: Invocation, start: int, exc: BaseException, hooks: bool = True
    ) -> None:
        """``_interrupt`` for ``arun``: after a cancellation (or misuse) the hooks and
        recorders are awaited (off the event loop), to their end even if the caller is
        cancelled again; a stop of the process is recorded at once, as ``run`` does."""
        if not owes_record(exc):
            if hooks:
                self._interrupt(turn, inv, start)
            else:
                self._finish(turn, _interrupted(inv, start))
            return
        await to_the_end(self._arecord_interrupt(turn, inv, start, hooks))

    async def _arecord_interrupt(self, turn: Any, inv: Invocation, start: int, hooks: bool) -> None:
        result = _interrupted(inv, start)
        if hooks and self.hooks:
            result = await self._aafter_hooks(inv, result)
        await self._afinish(turn, result)

    # -- steps 5-9: decisions on values ---------------------------------------

    def _before_hooks(self, inv: Invocation, escapes: list[Escape]) -> Stop | None:
        for hook in self.hooks:
            try:
                decision = hook.before(inv)
            except Exception as exc:
                # A hook guards an effect (a cap, a key, a snapshot): when it
                # cannot say, the tool does not run.
                escapes.append(Escape(_hook_name(hook), _TOOL_CALL, EscapeReason.RAISED, exc))
                return Stop(_UNAVAILABLE, Reason.HOOK_FAILED, None, exc)
            if decision is None:
                continue
            if type(decision) is Escape:
                escapes.append(decision)
                continue
            if type(decision) is Stop and type(decision.outcome) is Outcome:
                return decision
            # Anything else is a hook that could not say: the tool does not run.
            escapes.append(Escape(_hook_name(hook), _TOOL_CALL, EscapeReason.INVALID_RETURN))
            return _HOOK_FAILED
        return None

    async def _abefore_hooks(self, inv: Invocation, escapes: list[Escape]) -> Stop | None:
        """``_before_hooks`` for ``arun``: a hook's ``abefore`` is awaited when it has one."""
        for hook in self.hooks:
            abefore = getattr(hook, "abefore", None)
            try:
                decision = hook.before(inv) if abefore is None else await abefore(inv)
            except Exception as exc:
                escapes.append(Escape(_hook_name(hook), _TOOL_CALL, EscapeReason.RAISED, exc))
                return Stop(_UNAVAILABLE, Reason.HOOK_FAILED, None, exc)
            stop = _hook_decision(hook, decision, escapes)
            if stop is not None:
                return stop
        return None

    async def _aafter_hooks(self, inv: Invocation, result: ToolResult) -> ToolResult:
        """``_after_hooks`` for ``arun``: a hook's ``aafter`` is awaited when it has one."""
        for hook in reversed(self.hooks):
            aafter = getattr(hook, "aafter", None)
            try:
                replaced = hook.after(inv, result) if aafter is None else await aafter(inv, result)
            except Exception as exc:
                missed = Escape(_hook_name(hook), _TOOL_CALL, EscapeReason.RAISED, exc)
                result = result._replace(escapes=(*result.escapes, missed))
                continue
            result = _hook_replacement(hook, replaced, result)
        return result

    def _after_hooks(self, inv: Invocation, result: ToolResult) -> ToolResult:
        for hook in reversed(self.hooks):
            try:
                replaced = hook.after(inv, result)
            except Exception as exc:
                # The tool has run: its result stands, and the failure is counted.
                missed = Escape(_hook_name(hook), _TOOL_CALL, EscapeReason.RAISED, exc)
                result = result._replace(escapes=(*result.escapes, missed))
                continue
            if type(replaced) is ToolResult:
                result = replaced
            else:
                missed = Escape(_hook_name(hook), _TOOL_CALL, EscapeReason.INVALID_RETURN)
                result = result._replace(escapes=(*result.escapes, missed))
        return result

    def _complete(
        self,
        inv: Invocation,
        records: tuple[VerdictRecord, ...],
        escapes: list[Escape],
        verdict: Verdict,
        stop: Stop | None,
        value: Any,
        start: int,
        late: bool = False,
        secrets: dict[str, Any] | None = None,
    ) -> ToolResult:
        exception = None
        reason = None
        flags: tuple[str, ...] = ()
        if late:
            # The tool answered after its timeout: the answer is not handed over
            # as ok, and the row says the tool ran (late).
            stop, flags = _LATE, (FLAG_LATE_RESULT,)
        if stop is not None:
            outcome, reason, value, exception = stop
            if outcome is not _OK:
                return _new(
                    ToolResult,
                    (
                        inv.call_id,
                        inv.name,
                        outcome,
                        model_sentence(outcome),
                        verdict,
                        records,
                        tuple(escapes),
                        reason,
                        (),
                        None,
                        exception,
                        perf_counter_ns() - start,
                        False,
                        flags,
                        True,
                    ),
                )
        try:
            if type(value) is str and len(value) <= self.max_result_chars:
                content, truncated = value, False
            else:
                content, truncated = render(value, self.max_result_chars)
        except Exception as exc:
            return _new(
                ToolResult,
                (
                    inv.call_id,
                    inv.name,
                    Outcome.ERROR,
                    model_sentence(Outcome.ERROR),
                    verdict,
                    records,
                    tuple(escapes),
                    Reason.UNSERIALISABLE,
                    (),
                    None,
                    exc,
                    perf_counter_ns() - start,
                    False,
                    (),
                    True,
                ),
            )
        result: ToolResult = _new(
            ToolResult,
            (
                inv.call_id,
                inv.name,
                _OK,
                content,
                verdict,
                records,
                tuple(escapes),
                reason,
                (),
                value,
                exception,
                perf_counter_ns() - start,
                truncated,
                (),
                True,
            ),
        )
        # A bound secret the tool echoed never reaches the model, its cut or the row.
        return redact(result, secrets, self.max_result_chars) if secrets else result

    @staticmethod
    def _after_output(
        plan: Plan, inv: Invocation, result: ToolResult, checked: list[GuardOutcome]
    ) -> ToolResult:
        records = result.verdicts + tuple(o[0] for o in checked)
        escapes = result.escapes + tuple(o[1] for o in checked if o[1] is not None)
        verdict = combine(r.verdict for r in records if r.enforced)
        for (record, _, _), guard in zip(checked, plan.output_guards, strict=True):
            if record.verdict is _REJECT and record.enforced:
                return result._replace(
                    outcome=guard.outcome,
                    content=model_sentence(guard.outcome),
                    verdict=verdict,
                    verdicts=records,
                    escapes=escapes,
                    reason=Reason.OUTPUT_GUARD,
                    value=None,
                    truncated=False,
                )
        return result._replace(verdict=verdict, verdicts=records, escapes=escapes)

    async def _afinish(self, turn: Any, result: ToolResult) -> ToolResult:
        """``_finish`` for ``arun``: recorders that write to a store are awaited."""
        recorder = self.recorder
        if recorder is None or not getattr(recorder, "awaits", False):
            return self._finish(turn, result)
        turn.results.append(result)
        await recorder.aon_turn_result(turn, result)
        return result

    def _finish(self, turn: Any, result: ToolResult) -> ToolResult:
        turn.results.append(result)
        recorder = self.recorder
        if recorder is not None:
            recorder.on_turn_result(turn, result)
        return result


# When several enforced guards reject one call, the model is told the most
# final of their outcomes, whatever the order the guards were registered in.
_SEVERITY = {Outcome.INVALID_ARGS: 0, Outcome.LIMIT: 1, Outcome.UNAVAILABLE: 2}


def _judge_plain(
    plan: Plan, inv: Invocation, start: int
) -> ToolResult | tuple[tuple[VerdictRecord, ...], list[Escape], Verdict]:
    """Step 5 for plain guards: every one passed is the common case, decided here;
    anything else goes to ``_judge`` with the same outcomes ``evaluate`` gives."""
    ran = evaluate_plain(plan.steps, inv, _TOOL_CALL)
    if isinstance(ran, list):
        return _judge(plan, inv, ran, start)
    records, rejected = ran
    if not rejected:
        return tuple(records), [], _PASS
    # Bare verdicts: no escapes, no parameter names; the most final outcome wins.
    outcome = max(
        (g.outcome for g, r in zip(plan.guards, records, strict=True) if r[2] is _REJECT),
        key=_SEVERITY.__getitem__,
    )
    return _new(
        ToolResult,
        (
            inv.call_id,
            inv.name,
            outcome,
            model_sentence(outcome),
            _REJECT,
            tuple(records),
            (),
            Reason.GUARD,
            (),
            None,
            None,
            perf_counter_ns() - start,
            False,
            (),
            True,
        ),
    )


def _judge(
    plan: Plan, inv: Invocation, outcomes: list[GuardOutcome], start: int
) -> ToolResult | tuple[tuple[VerdictRecord, ...], list[Escape], Verdict]:
    """Step 5 decided in one walk: an enforced reject ends the call; otherwise
    (records, escapes, combined verdict) go on."""
    records = []
    escapes: list[Escape] = []
    rejecting: list[int] = []
    seen_pass = seen_not_evaluated = False
    for record, escape, _ in outcomes:
        records.append(record)
        if escape is not None:
            escapes.append(escape)
        if record[6]:  # enforced
            verdict = record[2]
            if verdict is _REJECT:
                rejecting.append(len(records) - 1)
            elif verdict is _NOT_EVALUATED:
                seen_not_evaluated = True
            else:
                seen_pass = True
    if not rejecting:
        combined = _PASS if seen_pass and not seen_not_evaluated else _NOT_EVALUATED
        return tuple(records), escapes, combined
    guards = plan.guards
    outcome = max((guards[i].outcome for i in rejecting), key=_SEVERITY.__getitem__)
    props = plan.tool.compiled.properties
    named = tuple(
        sorted(
            {
                p
                for i in rejecting
                if guards[i].outcome is outcome
                for p in outcomes[i][2]
                if p in props
            }
        )
    )
    return ToolResult(
        inv.call_id,
        inv.name,
        outcome,
        model_sentence(outcome, named),
        _REJECT,
        tuple(records),
        tuple(escapes),
        Reason.GUARD,
        named,
        duration_ns=perf_counter_ns() - start,
    )


def _hook_decision(hook: Any, decision: Any, escapes: list[Escape]) -> Stop | None:
    """What ``arun`` makes of a hook's ``abefore`` answer (as ``_before_hooks`` does)."""
    if decision is None:
        return None
    if type(decision) is Escape:
        escapes.append(decision)
        return None
    if type(decision) is Stop and type(decision.outcome) is Outcome:
        return decision
    escapes.append(Escape(_hook_name(hook), _TOOL_CALL, EscapeReason.INVALID_RETURN))
    return _HOOK_FAILED


def _hook_replacement(hook: Any, replaced: Any, result: ToolResult) -> ToolResult:
    """What ``arun`` makes of a hook's ``aafter`` answer (as ``_after_hooks`` does)."""
    if type(replaced) is ToolResult:
        return replaced
    missed = Escape(_hook_name(hook), _TOOL_CALL, EscapeReason.INVALID_RETURN)
    return result._replace(escapes=(*result.escapes, missed))


def _hook_name(hook: Any) -> str:
    name = getattr(hook, "name", None)
    return name if type(name) is str and name else type(hook).__name__


def _kwargs(tool: Tool, args: dict[str, Any], secrets: dict[str, Any] | None) -> dict[str, Any]:
    # ``args`` is the pipeline's own canonical copy: nothing else holds it.
    if tool.convert is not None:
        args = tool.convert(args)
    if secrets:
        args = {**args, **secrets}
    return args


def _bound_view(model_view: Mapping[str, Any], merged: dict[str, Any]) -> Any:
    """The guards' view of the merged arguments: the model's part read-only at every
    depth (from ``admit``), the bound values as the context holds them."""
    view = dict(model_view)
    for key, value in merged.items():
        if key not in view:
            view[key] = value
    return _Proxy(view)


def _interrupted(inv: Invocation, start: int) -> ToolResult:
    return refusal(inv.call_id, inv.name, _UNAVAILABLE, Reason.INTERRUPTED, start)


_LATE = Stop(Outcome.ERROR, Reason.TIMEOUT)
_HOOK_FAILED = Stop(Outcome.UNAVAILABLE, Reason.HOOK_FAILED)


def _failure(exc: BaseException) -> Stop:
    """What a tool's exception means for the call; misuse and the caller's stops go on up."""
    if not isinstance(exc, Exception):
        if stops(exc):
            raise exc
        return Stop(Outcome.ERROR, Reason.RAISED, None, exc)
    if isinstance(exc, UsageError):
        raise exc
    if isinstance(exc, LimitExceeded):
        return Stop(Outcome.LIMIT, Reason.LIMIT, None, exc)
    if isinstance(exc, StopRun):
        return Stop(Outcome.UNAVAILABLE, Reason.RAISED, None, exc)
    if isinstance(exc, TimeoutError):
        return Stop(Outcome.ERROR, Reason.TIMEOUT, None, exc)
    return Stop(Outcome.ERROR, Reason.RAISED, None, exc)
