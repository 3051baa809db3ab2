"""Step 5 decided: the guards' outcomes become either a rejection of the call,
or the records, escapes and combined verdict the call goes on with."""

from __future__ import annotations

from time import perf_counter_ns

from ..context import Escape, Invocation, ToolResult, VerdictRecord
from ..guard import GuardOutcome, evaluate_plain
from ..native._tuples import make
from ..verdicts import ChokePoint, Outcome, Reason, Verdict, model_sentence
from .admission import Plan

__all__ = ["Judged", "judge", "judge_plain", "verdicts"]

_TOOL_CALL = ChokePoint.TOOL_CALL
_PASS = Verdict.PASS
_REJECT = Verdict.REJECT
_NOT_EVALUATED = Verdict.NOT_EVALUATED
_GUARD = Reason.GUARD
_INVALID_ARGS = Outcome.INVALID_ARGS
_new = make  # tuple.__new__ without its call path

# When several enforced guards reject one call, the model is told the most
# final of their outcomes, whatever the order the guards were registered in.
_SEVERITY = {Outcome.INVALID_ARGS: 0, Outcome.LIMIT: 1, Outcome.UNAVAILABLE: 2}
# A bare rejection names no parameter: its sentence depends on the outcome
# alone, so it is made once per outcome rather than once per call.
_SENTENCE = {outcome: model_sentence(outcome) for outcome in _SEVERITY}

# What ``evaluate_plain`` gives: (records, rejected), or every guard's outcome.
Ran = tuple[list[VerdictRecord], bool] | list[GuardOutcome]
Judged = ToolResult | tuple[tuple[VerdictRecord, ...], list[Escape], Verdict]


def verdicts(plan: Plan, inv: Invocation, start: int, ran: Ran | None = None) -> Judged:
    """Step 5 for sync guards (either driver): the guards run and judged. A call they
    stop comes back as its result (not yet recorded); one they let through as
    ``(records, escapes, verdict)``. ``ran``: what ``evaluate_plain`` gave, when the
    driver ran the plain guards itself. Async guards: ``judge`` of their outcomes."""
    if plan.plain:
        if ran is None:
            ran = evaluate_plain(plan.steps, inv, _TOOL_CALL)
        if ran.__class__ is tuple and not ran[1]:  # every guard passed: the common case
            return tuple(ran[0]), [], _PASS
        return judge_plain(plan, inv, ran, start)
    if plan.guards:
        return judge(plan, inv, [g.evaluate(inv, _TOOL_CALL) for g in plan.guards], start)
    return (), [], _NOT_EVALUATED


def judge_plain(plan: Plan, inv: Invocation, ran: Ran, start: int) -> Judged:
    """Step 5 for plain guards, from what ``evaluate_plain`` gave (``ran``). ``verdicts``
    decides the common case, every guard passed, itself."""
    if isinstance(ran, list):
        return judge(plan, inv, ran, start)
    records, rejected = ran
    if not rejected:
        return tuple(records), [], _PASS
    # Bare verdicts: no escapes, no parameter names; the most final outcome wins.
    # ``evaluate_plain`` recorded every guard, in the plan's order.
    outcome = _INVALID_ARGS  # the least final: the first rejecting guard replaces it
    rank = -1
    for guard, record in zip(plan.guards, records, strict=True):
        if record[2] is _REJECT and _SEVERITY[guard.outcome] > rank:
            outcome = guard.outcome
            rank = _SEVERITY[outcome]
    return _new(
        ToolResult,
        (
            inv.call_id,
            inv.name,
            outcome,
            _SENTENCE[outcome],
            _REJECT,
            tuple(records),
            (),
            _GUARD,
            (),
            None,
            None,
            perf_counter_ns() - start,
            False,
            (),
            True,
        ),
    )


def judge(plan: Plan, inv: Invocation, outcomes: list[GuardOutcome], start: int) -> Judged:
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
    return _new(
        ToolResult,
        (
            inv.call_id,
            inv.name,
            outcome,
            model_sentence(outcome, named) if named else _SENTENCE[outcome],
            _REJECT,
            tuple(records),
            tuple(escapes),
            _GUARD,
            named,
            None,
            None,
            perf_counter_ns() - start,
            False,
            (),
            True,
        ),
    )
