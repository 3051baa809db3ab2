"""The tool_call choke-point: what runs, and what goes back to the model.

The steps, in order (SPEC): 1 unknown or not-offered tool; 2 bound arguments
(and arguments that are not an object, or too large); 3 missing required;
4 full schema validation, every error collected; 5 domain guards; 6 hooks
(ceilings, budgets, rate limits, idempotency, snapshots); 7 the tool runs;
8 the result is rendered and capped; 9 output guards. Steps 1-4 and the
decisions after each step are pure functions shared by the sync and async
drivers; only the code that calls user callables is written twice, and it is
a few lines each.
"""

from __future__ import annotations

import asyncio
import itertools
import json
import os
from collections.abc import Callable, Mapping
from time import perf_counter_ns
from types import MappingProxyType
from typing import Any, NamedTuple, Protocol

from .._aio import acall_with_timeout, call_with_timeout, run_coroutine
from ..context import Escape, Invocation, ToolResult, TurnContext, VerdictRecord
from ..errors import LimitExceeded, StopRun, UsageError
from ..guard import Guard, GuardOutcome
from ..tools import Tool
from ..verdicts import ChokePoint, EscapeReason, Outcome, Reason, Verdict, combine, model_sentence
from ._render import redact, render

__all__ = ["CallHook", "Plan", "Stop", "ToolCallPipeline"]

_TOOL_CALL = ChokePoint.TOOL_CALL
_OK = Outcome.OK
_PASS = Verdict.PASS
_REJECT = Verdict.REJECT
_NOT_EVALUATED = Verdict.NOT_EVALUATED
_INVALID_ARGS = Outcome.INVALID_ARGS
_UNAVAILABLE = Outcome.UNAVAILABLE
_PREFIX = os.urandom(4).hex()
_COUNTER = itertools.count(1)
# Call ids for calls the model gave none: a per-process random prefix and a counter.
_CALL_IDS = map(f"gr_{_PREFIX}{{:x}}".format, _COUNTER)

FLAG_BOUND_ARGUMENT_SUPPLIED = "bound_argument_supplied"


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


class Plan(NamedTuple):
    """Everything the pipeline needs about one tool, computed at registration."""

    tool: Tool
    guards: tuple[Guard, ...]
    output_guards: tuple[Guard, ...]


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
    ) -> None:
        self.plans = plans
        self.hooks = hooks
        self.recorder = recorder
        self.max_result_chars = max_result_chars
        self.max_argument_chars = max_argument_chars
        self.secrets = secrets

    # -- the two drivers ----------------------------------------------------

    def run(self, turn: Any, name: str, arguments: Any, call_id: str | None) -> ToolResult:
        start = perf_counter_ns()
        if call_id is None:
            call_id = next(_CALL_IDS)
        admitted = self._admit(turn, name, arguments, call_id, start)
        if admitted.__class__ is ToolResult:
            return self._finish(turn, admitted)
        plan, inv, secrets = admitted  # type: ignore[misc]
        if plan.guards:
            judged = _judge(plan, inv, [g.evaluate(inv, _TOOL_CALL) for g in plan.guards], start)
            if judged.__class__ is ToolResult:
                return self._finish(turn, judged)
            records, escapes, verdict = judged  # type: ignore[misc]
        else:
            records, escapes, verdict = (), [], _NOT_EVALUATED
        stop = self._before_hooks(inv, escapes) if self.hooks else None
        value = None
        if stop is None:
            try:
                value = self._call_sync(plan.tool, inv, secrets)
            except Exception as exc:
                stop = _failure(exc)
        result = self._complete(inv, records, escapes, verdict, stop, value, start)
        if secrets and result.outcome is _OK:
            result = redact(result, secrets, self.max_result_chars)
        if result.outcome is _OK and plan.output_guards:
            checked = [g.evaluate((inv, result), _TOOL_CALL) for g in plan.output_guards]
            result = self._after_output(plan, inv, result, checked)
        if self.hooks:
            result = self._after_hooks(inv, result)
        return self._finish(turn, result)

    async def arun(self, turn: Any, name: str, arguments: Any, call_id: str | None) -> ToolResult:
        start = perf_counter_ns()
        if call_id is None:
            call_id = next(_CALL_IDS)
        admitted = self._admit(turn, name, arguments, call_id, start)
        if admitted.__class__ is ToolResult:
            return self._finish(turn, admitted)
        plan, inv, secrets = admitted  # type: ignore[misc]
        if plan.guards:
            judged = _judge(
                plan, inv, [await g.aevaluate(inv, _TOOL_CALL) for g in plan.guards], start
            )
            if judged.__class__ is ToolResult:
                return self._finish(turn, judged)
            records, escapes, verdict = judged  # type: ignore[misc]
        else:
            records, escapes, verdict = (), [], _NOT_EVALUATED
        stop = self._before_hooks(inv, escapes) if self.hooks else None
        value = None
        if stop is None:
            try:
                value = await self._call_async(plan.tool, inv, secrets)
            except Exception as exc:
                stop = _failure(exc)
        result = self._complete(inv, records, escapes, verdict, stop, value, start)
        if secrets and result.outcome is _OK:
            result = redact(result, secrets, self.max_result_chars)
        if result.outcome is _OK and plan.output_guards:
            checked = [await g.aevaluate((inv, result), _TOOL_CALL) for g in plan.output_guards]
            result = self._after_output(plan, inv, result, checked)
        if self.hooks:
            result = self._after_hooks(inv, result)
        return self._finish(turn, result)

    @staticmethod
    def _call_sync(tool: Tool, inv: Invocation, secrets: dict[str, Any] | None) -> Any:
        if tool.plain:
            return tool.fn(**inv.arguments)
        kwargs = _kwargs(tool, inv, secrets)
        if tool.is_async:
            return run_coroutine(tool.fn(**kwargs), tool.timeout)
        if tool.timeout is None:
            return tool.fn(**kwargs)
        return call_with_timeout(lambda: tool.fn(**kwargs), tool.timeout)

    @staticmethod
    async def _call_async(tool: Tool, inv: Invocation, secrets: dict[str, Any] | None) -> Any:
        kwargs = _kwargs(tool, inv, secrets)
        if tool.is_async:
            if tool.timeout is None:
                return await tool.fn(**kwargs)
            return await asyncio.wait_for(tool.fn(**kwargs), tool.timeout)
        if tool.timeout is None:
            return tool.fn(**kwargs)
        return await acall_with_timeout(lambda: tool.fn(**kwargs), tool.timeout)

    # -- steps 1-4: pure ----------------------------------------------------

    def _admit(
        self, turn: Any, name: str, arguments: Any, call_id: str, start: int
    ) -> ToolResult | tuple[Plan, Invocation, dict[str, Any] | None]:
        plan = self.plans.get(name) if type(name) is str else None
        if plan is None:
            return _refusal(
                call_id, _safe_name(name), _UNAVAILABLE, Reason.UNKNOWN_TOOL, start, known=False
            )
        offered = turn.offered
        if offered is not None and name not in offered:
            return _refusal(call_id, name, _UNAVAILABLE, Reason.NOT_OFFERED, start)
        tool = plan.tool
        args: dict[str, Any]
        if arguments.__class__ is dict and _fits(arguments, self.max_argument_chars):
            args = arguments
        else:
            parsed = self._as_object(arguments)
            if isinstance(parsed, Reason):
                return _refusal(call_id, name, _INVALID_ARGS, parsed, start)
            args = parsed
        bound = tool.bound
        if bound and not bound.isdisjoint(args):
            return _refusal(
                call_id,
                name,
                _INVALID_ARGS,
                Reason.BOUND_ARGUMENT_SUPPLIED,
                start,
                flags=(FLAG_BOUND_ARGUMENT_SUPPLIED,),
            )
        compiled = tool.compiled
        if not compiled.is_valid(args):
            try:
                names, undeclared = compiled.offending(args)
            except ValueError:  # the validator's own depth limit
                names, undeclared = (), False
            missing = any(r not in args for r in compiled.required)
            reason = Reason.MISSING_REQUIRED if missing else Reason.SCHEMA
            return _refusal(
                call_id, name, _INVALID_ARGS, reason, start, params=names, undeclared=undeclared
            )
        context: TurnContext = turn.context
        merged = args
        secrets = None
        if bound:
            try:
                merged = dict(args)
                for param, source in tool.bind.items():
                    value = source(context) if callable(source) else context.get(source)
                    if value is None:
                        raise LookupError(param)
                    merged[param] = value
                if tool.secrets:
                    secrets = self._resolve_secrets(tool)
            except Exception as exc:
                return _refusal(
                    call_id, name, _UNAVAILABLE, Reason.BINDING_UNRESOLVED, start, exception=exc
                )
        # Read-only views: a guard cannot change what was validated.
        frozen = _Proxy(args)
        view = frozen if merged is args else _Proxy(merged)
        inv = _new(Invocation, (name, view, frozen, context, call_id, tool, turn))
        return plan, inv, secrets

    def _as_object(self, arguments: Any) -> dict[str, Any] | Reason:
        limit = self.max_argument_chars
        if type(arguments) is dict:
            return arguments if _fits(arguments, limit) else Reason.TOO_LARGE
        if isinstance(arguments, str | bytes | bytearray):
            # OpenAI-style JSON text. Checked for size before it is parsed.
            if len(arguments) > limit:
                return Reason.TOO_LARGE
            try:
                parsed = json.loads(arguments) if arguments else {}
            except (ValueError, RecursionError):
                return Reason.NOT_AN_OBJECT
            if type(parsed) is not dict:
                return Reason.NOT_AN_OBJECT
            return parsed if _fits(parsed, limit) else Reason.TOO_LARGE
        if isinstance(arguments, Mapping):
            try:
                return self._as_object(dict(arguments))
            except Exception:
                return Reason.NOT_AN_OBJECT
        return Reason.NOT_AN_OBJECT

    def _resolve_secrets(self, tool: Tool) -> dict[str, Any]:
        provider = self.secrets
        if provider is None:
            raise LookupError("no secret provider")
        out: dict[str, Any] = {}
        for param, secret in tool.secrets.items():
            value = provider(secret.name)
            if value is None:
                raise LookupError(param)
            out[param] = value
        return out

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
            return decision  # type: ignore[return-value]
        return None

    def _after_hooks(self, inv: Invocation, result: ToolResult) -> ToolResult:
        for hook in reversed(self.hooks):
            try:
                result = hook.after(inv, result)
            except Exception as exc:
                # The tool has run: its result stands, and the failure is counted.
                missed = Escape(_hook_name(hook), _TOOL_CALL, EscapeReason.RAISED, exc)
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
    ) -> ToolResult:
        exception = None
        reason = None
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
                        (),
                        True,
                    ),
                )
        try:
            if value.__class__ is str and len(value) <= self.max_result_chars:
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
        return _new(
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

    def _finish(self, turn: Any, result: ToolResult) -> ToolResult:
        turn.results.append(result)
        recorder = self.recorder
        if recorder is not None:
            recorder.on_turn_result(turn, result)
        return result


# When several enforced guards reject one call, the model is told the most
# final of their outcomes, whatever the order the guards were registered in.
_SEVERITY = {Outcome.INVALID_ARGS: 0, Outcome.LIMIT: 1, Outcome.UNAVAILABLE: 2}


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


def _hook_name(hook: Any) -> str:
    return str(getattr(hook, "name", None) or type(hook).__name__)


def _kwargs(tool: Tool, inv: Invocation, secrets: dict[str, Any] | None) -> dict[str, Any]:
    kwargs = dict(inv.arguments) if secrets or tool.convert else inv.arguments
    if tool.convert is not None:
        kwargs = tool.convert(kwargs)  # type: ignore[arg-type]
    if secrets:
        kwargs.update(secrets)  # type: ignore[attr-defined]
    return kwargs  # type: ignore[return-value]


def _failure(exc: Exception) -> Stop:
    if isinstance(exc, UsageError):
        raise exc
    if isinstance(exc, LimitExceeded):
        return Stop(Outcome.LIMIT, Reason.LIMIT, None, exc)
    if isinstance(exc, StopRun):
        return Stop(Outcome.UNAVAILABLE, Reason.RAISED, None, exc)
    if isinstance(exc, TimeoutError):
        return Stop(Outcome.ERROR, Reason.TIMEOUT, None, exc)
    return Stop(Outcome.ERROR, Reason.RAISED, None, exc)


def _refusal(
    call_id: str,
    name: str,
    outcome: Outcome,
    reason: Reason,
    start: int,
    *,
    params: tuple[str, ...] = (),
    flags: tuple[str, ...] = (),
    known: bool = True,
    exception: BaseException | None = None,
    undeclared: bool = False,
) -> ToolResult:
    # A built-in check refused the call: the call's verdict is reject even
    # though no guard ran.
    return ToolResult(
        call_id,
        name,
        outcome,
        model_sentence(outcome, params, undeclared=undeclared),
        _REJECT,
        (),
        (),
        reason,
        params,
        None,
        exception,
        perf_counter_ns() - start,
        False,
        flags,
        known,
    )


def _safe_name(name: Any) -> str:
    # An invented name is kept for the audit trail only, and bounded.
    text = name if type(name) is str else repr(name)
    return text[:200]


_SCALARS = frozenset({int, float, bool, type(None)})


def _fits(arguments: dict[str, Any], limit: int) -> bool:
    """Cheap size bound before any schema work; flat arguments take the short path."""
    try:
        budget = limit - sum(map(len, arguments))
    except TypeError:  # a key that is not text (None, 1): not JSON, the schema refuses it
        return _fits_deep(arguments, limit)
    for value in arguments.values():
        cls = value.__class__
        if cls is str:
            budget -= len(value)
        elif cls not in _SCALARS:
            return _fits_deep(arguments, limit)
    return budget >= 0


MAX_DEPTH = 128


def _fits_deep(arguments: dict[str, Any], limit: int) -> bool:
    """Size and depth bound over nested arguments. Iterative: deep nesting cannot recurse."""
    budget = limit
    stack: list[tuple[Any, int]] = [(arguments, 0)]
    while stack:
        node, depth = stack.pop()
        cls = node.__class__
        if cls is str:
            budget -= len(node)
        elif cls is dict or cls is list or cls is tuple:
            if depth >= MAX_DEPTH:
                return False
            budget -= len(node) + 1
            if cls is dict:
                for key, value in node.items():
                    if key.__class__ is str:
                        budget -= len(key)
                    stack.append((value, depth + 1))
            else:
                stack.extend([(item, depth + 1) for item in node])
        else:
            budget -= 1
        if budget < 0:
            return False
    return True
