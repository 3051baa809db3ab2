"""Steps 7-9 as values: what a tool's answer, exception or lateness makes of a
call (``failure``, ``complete``), and what the output guards make of the result
(``after_output``)."""

from __future__ import annotations

from collections.abc import Sequence
from time import perf_counter_ns
from typing import Any

from .._aio import stops
from ..context import Escape, Invocation, ToolResult, VerdictRecord
from ..errors import LimitExceeded, StopRun, UsageError
from ..guard import GuardOutcome
from ..native._tuples import make
from ..verdicts import Outcome, Reason, Verdict, combine, model_sentence
from ._hooks import Stop
from ._render import redact, render
from .admission import Plan, refusal

__all__ = ["FLAG_LATE_RESULT", "after_output", "complete", "failure", "interrupted"]

FLAG_LATE_RESULT = "late_result"

_OK = Outcome.OK
_REJECT = Verdict.REJECT
_new = make  # tuple.__new__ without its call path
_ERROR = Outcome.ERROR
_LIMIT = Outcome.LIMIT
_UNAVAILABLE = Outcome.UNAVAILABLE
_RAISED = Reason.RAISED
_LIMIT_REASON = Reason.LIMIT
_TIMEOUT = Reason.TIMEOUT
_INTERRUPTED = Reason.INTERRUPTED
_UNSERIALISABLE = Reason.UNSERIALISABLE
_OUTPUT_GUARD = Reason.OUTPUT_GUARD
_LATE = Stop(_ERROR, _TIMEOUT)


def failure(exc: BaseException) -> Stop:
    """What a tool's exception means for the call; misuse and the caller's stops go on up."""
    if not isinstance(exc, Exception):
        if stops(exc):
            raise exc
        return Stop(_ERROR, _RAISED, None, exc)
    if isinstance(exc, UsageError):
        raise exc
    if isinstance(exc, LimitExceeded):
        return Stop(_LIMIT, _LIMIT_REASON, None, exc)
    if isinstance(exc, StopRun):
        return Stop(_UNAVAILABLE, _RAISED, None, exc)
    if isinstance(exc, TimeoutError):
        return Stop(_ERROR, _TIMEOUT, None, exc)
    return Stop(_ERROR, _RAISED, None, exc)


def interrupted(inv: Invocation, start: int) -> ToolResult:
    """The result of a call a deliberate stop ended after admission."""
    return refusal(inv.call_id, inv.name, _UNAVAILABLE, _INTERRUPTED, start)


def complete(
    inv: Invocation,
    records: tuple[VerdictRecord, ...],
    escapes: Sequence[Escape],
    verdict: Verdict,
    stop: Stop | None,
    value: Any,
    start: int,
    max_chars: int,
    late: bool = False,
    secrets: dict[str, Any] | None = None,
) -> ToolResult:
    """The call's result from the hooks' stop or the tool's value, rendered and capped."""
    exception = None
    reason = None
    if late:
        # The tool answered after its timeout: the answer is not handed over
        # as ok, and the row says the tool ran (late).
        return _ended(inv, _LATE, verdict, records, escapes, start, (FLAG_LATE_RESULT,))
    if stop is not None:
        if stop[0] is not _OK:
            return _ended(inv, stop, verdict, records, escapes, start, ())
        _, reason, value, exception = stop
    try:
        if type(value) is str and len(value) <= max_chars:
            content, truncated = value, False
        else:
            content, truncated = render(value, max_chars)
    except Exception as exc:
        unserialisable = Stop(_ERROR, _UNSERIALISABLE, None, exc)
        return _ended(inv, unserialisable, verdict, records, escapes, start, ())
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
    return redact(result, secrets, max_chars) if secrets else result


def _ended(
    inv: Invocation,
    stop: Stop,
    verdict: Verdict,
    records: tuple[VerdictRecord, ...],
    escapes: Sequence[Escape],
    start: int,
    flags: tuple[str, ...],
) -> ToolResult:
    """The result of a call that ran (or was meant to) and did not end ok: the outcome's
    fixed sentence, the stop's reason and exception."""
    outcome, reason, _, exception = stop
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


def after_output(
    plan: Plan, inv: Invocation, result: ToolResult, checked: list[GuardOutcome]
) -> ToolResult:
    """Step 9: an enforced reject of an output guard replaces the ok result."""
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
                reason=_OUTPUT_GUARD,
                value=None,
                truncated=False,
            )
    return result._replace(verdict=verdict, verdicts=records, escapes=escapes)
