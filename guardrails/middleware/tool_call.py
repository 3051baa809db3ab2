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
This module is the pipeline read top to bottom; its pieces live beside it:
``admission`` (steps 1-4 and the bound values), ``_deadline`` (user code under
a deadline), ``_judge`` (step 5 decided), ``_hooks`` (step 6 and the wrap-up),
``_results`` (the result of steps 7-9), ``_render`` (step 8).

``run`` is the call's two halves with the body between them: steps 1-6, then
the body's answer made a result (``_results.complete``) and concluded
(``conclude``: step 9, the hooks' ``after``, the recorders). A call whose body
runs elsewhere stops after step 6 (``hold``) and is settled later by its
``Ticket`` (``ticket.py``) through ``settle``: the same two steps.

The drivers read as their steps, each a call of a named function, except the
two cases every call meets, made inline: the invocation of a tool without bound
values, and step 5 when the guards are plain and all passed (or there are
none). Each Python call more is measurable on a path timed in microseconds
(``benchmarks/ab_tool_call.py`` against an older ``tool_call.py``).

Whatever the callables do, a call ends in a ``ToolResult``. The exceptions
that still reach the caller are deliberate stops: ``KeyboardInterrupt``,
``SystemExit``, the caller's own cancellation (the call is recorded with
reason ``interrupted`` first, and the tool never runs after one) and
``UsageError`` (misuse).
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Mapping, Sequence
from time import perf_counter_ns
from types import MappingProxyType
from typing import Any, overload

from .._aio import cancel_requested, owes_record, to_the_end
from .._aio import late as is_late
from ..context import Escape, Invocation, ToolResult, VerdictRecord
from ..guard import evaluate_plain
from ..native._tuples import make
from ..verdicts import ChokePoint, Outcome, Verdict
from . import _call_ids as _ids
from ._call_ids import new_call_id
from ._deadline import abind, bind, call_async, call_sync
from ._hooks import (
    CallHook,
    Stop,
    aafter_hooks,
    abefore_hooks,
    after_hooks,
    before_hooks,
)
from ._judge import judge, verdicts
from ._results import FLAG_LATE_RESULT, after_output, complete, failure, interrupted
from .admission import FLAG_BOUND_ARGUMENT_SUPPLIED, Plan, admit, bound_view, entry_call_id

__all__ = [
    "FLAG_BOUND_ARGUMENT_SUPPLIED",
    "FLAG_LATE_RESULT",
    "CallHook",
    "Plan",
    "Hold",
    "Stop",
    "ToolCallPipeline",
]

_TOOL_CALL = ChokePoint.TOOL_CALL
_OK = Outcome.OK
_NOT_EVALUATED = Verdict.NOT_EVALUATED
_PASS = Verdict.PASS

_new = make  # tuple.__new__ without its call path
_Proxy = MappingProxyType
_copy = dict.copy

Hold = Callable[..., Any]
"""What ``run``/``arun`` hand a call whose body runs elsewhere, once steps 1-6 let it
through: ``hold(pipeline, plan, invocation, records, escapes, verdict, start, secrets)``;
its answer is returned instead of running the tool (``middleware.ticket``)."""


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

    @overload
    def run(self, turn: Any, name: str, arguments: Any, call_id: str | None) -> ToolResult: ...

    @overload
    def run(self, turn: Any, name: str, arguments: Any, call_id: str | None, hold: Hold) -> Any: ...

    def run(
        self, turn: Any, name: str, arguments: Any, call_id: str | None, hold: Hold | None = None
    ) -> Any:
        start = perf_counter_ns()
        call_id = next(_ids.CALL_IDS) if call_id is None else entry_call_id(call_id, new_call_id)
        admitted = admit(self.plans, turn, name, arguments, call_id, self.max_argument_chars, start)
        if admitted.__class__ is ToolResult:  # steps 1-4 turned the call away
            return self._finish(turn, admitted)
        plan, args, nested = admitted  # type: ignore[misc]
        secrets = None
        if plan.tool.bound:  # the bound values and secrets, under a deadline
            bound = self._bound(turn, name, call_id, plan, args, nested, start)
            if bound.__class__ is ToolResult:  # not provided in time: finished
                return bound
            inv, args, secrets = bound
        else:  # the invocation, inline on every call's path: as ``_invocation`` makes it
            own = plan.guards or self.hooks  # a copy of their own for guards and hooks
            view = nested if nested is not None else _Proxy(_copy(args) if own else args)
            inv = _new(Invocation, (name, view, view, turn.context, call_id, plan.tool, turn))
        escapes: list[Escape]  # the guards', then the hooks' (step 6)
        try:  # step 5, its common cases inline: plain guards that all passed, or none
            ran = evaluate_plain(plan.steps, inv, _TOOL_CALL) if plan.plain else None
            if ran.__class__ is tuple and not ran[1]:
                records, escapes, verdict = tuple(ran[0]), [], _PASS
            elif not plan.guards:
                records, escapes, verdict = (), [], _NOT_EVALUATED
            else:
                judged = verdicts(plan, inv, start, ran)
                if judged.__class__ is ToolResult:  # a guard stopped the call
                    return self._finish(turn, judged)
                records, escapes, verdict = judged  # type: ignore[misc]
        except BaseException:
            self._finish(turn, interrupted(inv, start))
            raise
        try:  # from the hooks on, a deliberate stop still reaches their after()
            stop = before_hooks(self.hooks, inv, escapes) if self.hooks else None  # step 6
            value = None
            late = False
            if stop is None:
                if hold is not None:  # the body runs elsewhere: its ticket settles the call
                    return hold(self, plan, inv, records, escapes, verdict, start, secrets)
                tool = plan.tool
                deadline = tool.deadline_ns
                began = 0 if deadline is None else perf_counter_ns()
                try:  # step 7
                    value = tool.fn(**args) if tool.plain else call_sync(tool, args, secrets)
                    if deadline is not None:
                        late = is_late(began, deadline)
                except BaseException as exc:
                    stop = failure(exc)
            cap = self.max_result_chars
            result = complete(  # step 8
                inv, records, escapes, verdict, stop, value, start, cap, late, secrets
            )
        except BaseException:
            self._interrupt(turn, inv, start)
            raise
        return self.conclude(turn, plan, inv, result, start)  # step 9 and the wrap-up

    def _bound(
        self, turn: Any, name: str, call_id: str, plan: Plan, args: Any, nested: Any, start: int
    ) -> Any:
        """The arguments with the bound values merged in and the secrets (``bind``), and
        the invocation that reads them; or the call refused, finished, when a provider
        failed or ran past its deadline."""
        ctx, timeout = turn.context, self.provider_timeout
        bound = bind(plan.tool, args, ctx, call_id, start, timeout, self.secrets)
        if bound.__class__ is ToolResult:
            return self._finish(turn, bound)
        merged, secrets = bound  # type: ignore[misc]
        inv = _invocation(turn, name, call_id, plan, args, nested, merged, self.hooks)
        return inv, merged, secrets

    def settle(
        self,
        turn: Any,
        plan: Plan,
        inv: Invocation,
        records: tuple[VerdictRecord, ...],
        escapes: Sequence[Escape],
        verdict: Verdict,
        stop: Stop | None,
        value: Any,
        start: int,
        late: bool,
        secrets: dict[str, Any] | None,
    ) -> ToolResult:
        """Steps 7-9 and the wrap-up, from the body's answer (``stop`` or ``value``),
        as ``run`` ends: what a ticket's ``complete`` runs."""
        try:
            cap = self.max_result_chars
            result = complete(
                inv, records, escapes, verdict, stop, value, start, cap, late, secrets
            )
        except BaseException:
            self._interrupt(turn, inv, start)
            raise
        return self.conclude(turn, plan, inv, result, start)

    def conclude(
        self, turn: Any, plan: Plan, inv: Invocation, result: ToolResult, start: int
    ) -> ToolResult:
        """Step 9 and the wrap-up of a result: the output guards, the hooks' ``after``,
        the recorders."""
        try:
            if result.outcome is _OK and plan.output_guards:
                checked = [g.evaluate((inv, result), _TOOL_CALL) for g in plan.output_guards]
                result = after_output(plan, inv, result, checked)
        except BaseException:
            self._interrupt(turn, inv, start)
            raise
        if self.hooks:
            result = after_hooks(self.hooks, inv, result)
        turn.results.append(result)  # ``_finish``, inline: this is every valid call's path
        recorder = self.recorder
        if recorder is not None:
            recorder.on_turn_result(turn, result)
        return result

    @overload
    async def arun(
        self, turn: Any, name: str, arguments: Any, call_id: str | None
    ) -> ToolResult: ...

    @overload
    async def arun(
        self, turn: Any, name: str, arguments: Any, call_id: str | None, hold: Hold
    ) -> Any: ...

    async def arun(
        self, turn: Any, name: str, arguments: Any, call_id: str | None, hold: Hold | None = None
    ) -> Any:
        start = perf_counter_ns()
        call_id = next(_ids.CALL_IDS) if call_id is None else entry_call_id(call_id, new_call_id)
        admitted = admit(self.plans, turn, name, arguments, call_id, self.max_argument_chars, start)
        if admitted.__class__ is ToolResult:  # steps 1-4 turned the call away
            return await self._afinish(turn, admitted)
        plan, args, nested = admitted  # type: ignore[misc]
        del admitted  # (a call in flight holds what it uses, not the tuple too)
        secrets = None
        if plan.tool.bound:  # the bound values and secrets, under a deadline
            bound = await self._abound(turn, name, call_id, plan, args, nested, start)
            if bound.__class__ is ToolResult:  # not provided in time: finished
                return bound
            inv, args, secrets = bound
        else:  # the invocation, inline on every call's path: as ``_invocation`` makes it
            own = plan.guards or self.hooks  # a copy of their own for guards and hooks
            view = nested if nested is not None else _Proxy(_copy(args) if own else args)
            inv = _new(Invocation, (name, view, view, turn.context, call_id, plan.tool, turn))
        escapes: list[Escape]  # the guards', then the hooks' (step 6)
        try:  # step 5, its common cases inline: plain guards that all passed, or none
            ran = evaluate_plain(plan.steps, inv, _TOOL_CALL) if plan.plain else None
            if ran.__class__ is tuple and not ran[1]:
                records, escapes, verdict = tuple(ran[0]), [], _PASS
            elif not plan.guards:
                records, escapes, verdict = (), [], _NOT_EVALUATED
            else:
                judged = await self._averdicts(turn, plan, inv, start, ran)
                if judged.__class__ is ToolResult:  # a guard stopped the call: finished
                    return judged
                records, escapes, verdict = judged
                del judged  # (a call in flight holds no tuple of the guards' answer)
        except BaseException as exc:
            await self._ainterrupt(turn, inv, start, exc, hooks=False)
            raise
        try:  # from the hooks on, a deliberate stop still reaches their after()
            stop = await abefore_hooks(self.hooks, inv, escapes) if self.hooks else None  # step 6
            found: Sequence[Escape] = escapes or ()  # a call in flight holds no empty list
            del escapes
            value, late = None, False
            if stop is None:
                if hold is not None:  # the body runs elsewhere: its ticket settles the call
                    return hold(self, plan, inv, records, found, verdict, start, secrets)
                tool = plan.tool
                try:  # step 7
                    if tool.plain or not (tool.is_async or tool.deadline_ns is not None):
                        value = tool.fn(**args) if tool.plain else call_sync(tool, args, secrets)
                    else:  # async, or under a deadline: awaited in place
                        began = perf_counter_ns()
                        value = await call_async(tool, args, secrets)
                        late = tool.deadline_ns is not None and is_late(began, tool.deadline_ns)
                except BaseException as exc:
                    stop = failure(exc)
            cap = self.max_result_chars
            result = complete(inv, records, found, verdict, stop, value, start, cap, late, secrets)
        except BaseException as exc:
            await self._ainterrupt(turn, inv, start, exc)
            raise
        return await self.aconclude(turn, plan, inv, result, start)  # step 9 and the wrap-up

    async def _abound(
        self, turn: Any, name: str, call_id: str, plan: Plan, args: Any, nested: Any, start: int
    ) -> Any:
        """``_bound`` for ``arun``: the providers awaited, a refusal recorded as ``arun``
        records one."""
        ctx, timeout = turn.context, self.provider_timeout
        bound = await abind(plan.tool, args, ctx, call_id, start, timeout, self.secrets)
        if bound.__class__ is ToolResult:
            return await self._afinish(turn, bound)
        merged, secrets = bound  # type: ignore[misc]
        inv = _invocation(turn, name, call_id, plan, args, nested, merged, self.hooks)
        return inv, merged, secrets

    async def _averdicts(self, turn: Any, plan: Plan, inv: Invocation, start: int, ran: Any) -> Any:
        """Step 5 for ``arun`` past its common case: async guards awaited, sync ones as
        ``verdicts``; a call they stop comes back finished. A caller's cancellation that
        a guard swallowed still stops the call before the tool."""
        if plan.plain:
            judged = verdicts(plan, inv, start, ran)
        else:
            judged = judge(plan, inv, await _aevaluate(plan.guards, inv), start)
        if judged.__class__ is ToolResult:
            return await self._afinish(turn, judged)
        if plan.awaits and cancel_requested():
            raise asyncio.CancelledError
        return judged

    async def asettle(
        self,
        turn: Any,
        plan: Plan,
        inv: Invocation,
        records: tuple[VerdictRecord, ...],
        escapes: Sequence[Escape],
        verdict: Verdict,
        stop: Stop | None,
        value: Any,
        start: int,
        late: bool,
        secrets: dict[str, Any] | None,
    ) -> ToolResult:
        """``settle`` for async code: output guards and hooks awaited."""
        try:
            cap = self.max_result_chars
            result = complete(
                inv, records, escapes, verdict, stop, value, start, cap, late, secrets
            )
        except BaseException as exc:
            await self._ainterrupt(turn, inv, start, exc)
            raise
        return await self.aconclude(turn, plan, inv, result, start)

    async def aconclude(
        self, turn: Any, plan: Plan, inv: Invocation, result: ToolResult, start: int
    ) -> ToolResult:
        """``conclude`` for ``arun``: output guards, hooks and recorders awaited."""
        try:
            if result.outcome is _OK and plan.output_guards:
                checked = await _aevaluate(plan.output_guards, (inv, result))
                result = after_output(plan, inv, result, checked)
        except BaseException as exc:
            await self._ainterrupt(turn, inv, start, exc)
            raise
        if self.hooks:
            result = await aafter_hooks(self.hooks, inv, result)
        return await self._afinish(turn, result)

    def _interrupt(self, turn: Any, inv: Invocation, start: int) -> None:
        """A deliberate stop (KeyboardInterrupt, SystemExit, the caller's
        cancellation) after the guards: hooks and recorders still see the call
        (reason ``interrupted``), then the stop propagates."""
        result = interrupted(inv, start)
        if self.hooks:
            result = after_hooks(self.hooks, inv, result)
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
                self._finish(turn, interrupted(inv, start))
            return
        await to_the_end(self._arecord_interrupt(turn, inv, start, hooks))

    async def _arecord_interrupt(self, turn: Any, inv: Invocation, start: int, hooks: bool) -> None:
        result = interrupted(inv, start)
        if hooks and self.hooks:
            result = await aafter_hooks(self.hooks, inv, result)
        await self._afinish(turn, result)

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


async def _aevaluate(guards: Any, subject: Any) -> list[Any]:
    """Each guard awaited in turn. Not a comprehension inside ``arun``: one would
    make ``inv`` and ``result`` closure cells of every call's frame."""
    return [await g.aevaluate(subject, _TOOL_CALL) for g in guards]


def _invocation(
    turn: Any,
    name: str,
    call_id: str,
    plan: Plan,
    args: dict[str, Any],
    nested: Any,
    merged: dict[str, Any] | None,
    hooks: tuple[CallHook, ...],
) -> Invocation:
    """The call as guards and hooks see it: read-only views of the model's arguments
    and, with bound values (``merged``, from ``bind``), of the arguments the tool gets."""
    if nested is None:
        # What a proxy wraps can be reached (gc.get_referents): guards and
        # hooks, which run before the tool, get a proxy of their own copy.
        view = model_view = _Proxy(_copy(args) if plan.guards or hooks else args)
    else:
        view = model_view = nested
    if merged is not None:
        if nested is None:
            view = _Proxy(_bound_views(merged, plan.tool.bind) if plan.guards or hooks else merged)
        else:
            view = _bound_view(nested, merged)
    inv: Invocation = _new(
        Invocation, (name, view, model_view, turn.context, call_id, plan.tool, turn)
    )
    return inv


def _bound_view(model_view: Mapping[str, Any], merged: dict[str, Any]) -> Any:
    """The guards' view of the merged arguments: the model's part read-only at every
    depth (from ``admit``), the bound arrays and objects read-only too (``bound_view``)."""
    view = dict(model_view)
    for key, value in merged.items():
        if key not in view:
            view[key] = bound_view(value)
    return _Proxy(view)


def _bound_views(merged: dict[str, Any], bound: Mapping[str, Any]) -> dict[str, Any]:
    """A copy of the flat ``merged`` with each bound array or object read-only."""
    view = _copy(merged)
    for key in bound:
        value = view.get(key)
        if value.__class__ is dict or value.__class__ is list:
            view[key] = bound_view(value)
    return view
