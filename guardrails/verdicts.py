"""The two closed vocabularies: guard verdicts and tool-call outcomes.

Their string values are public API; they appear in metrics, spans, audit rows
and in what integrations send back to the model.
"""

from __future__ import annotations

from collections.abc import Iterable
from enum import StrEnum

__all__ = [
    "ChokePoint",
    "EscapeReason",
    "Outcome",
    "Reason",
    "Verdict",
    "combine",
    "model_sentence",
]


class Verdict(StrEnum):
    """What one guard decided about one subject."""

    PASS = "pass"
    REJECT = "reject"
    NOT_EVALUATED = "not_evaluated"


class Outcome(StrEnum):
    """The only thing the model learns about a tool call."""

    OK = "ok"
    ERROR = "error"
    INVALID_ARGS = "invalid_args"
    LIMIT = "limit"
    UNAVAILABLE = "unavailable"


class ChokePoint(StrEnum):
    """Where a guard runs."""

    PRE_TURN = "pre_turn"
    TOOL_CALL = "tool_call"
    POST_RUN = "post_run"


class EscapeReason(StrEnum):
    """Why a guard could not decide (or chose not to enforce) and the action went on.

    A closed set: these strings are metric label values.
    """

    RAISED = "raised"
    TIMEOUT = "timeout"
    INVALID_RETURN = "invalid_return"
    NOT_CONFIGURED = "not_configured"
    DECLINED = "declined"
    PASS_ON_RETRY = "pass_on_retry"
    OBSERVE_ONLY = "observe_only"
    AUDIT_UNAVAILABLE = "audit_unavailable"
    STORE_UNAVAILABLE = "store_unavailable"


class Reason(StrEnum):
    """Which step of a choke-point decided a tool call's outcome. A closed set."""

    UNKNOWN_TOOL = "unknown_tool"
    NOT_OFFERED = "not_offered"
    NOT_AN_OBJECT = "not_an_object"
    NOT_JSON = "not_json"
    UNDECLARED_PARAMETER = "undeclared_parameter"
    TOO_LARGE = "too_large"
    BOUND_ARGUMENT_SUPPLIED = "bound_argument_supplied"
    BINDING_UNRESOLVED = "binding_unresolved"
    MISSING_REQUIRED = "missing_required"
    SCHEMA = "schema"
    GUARD = "guard"
    CEILING = "ceiling"
    LIMIT = "limit"
    RAISED = "raised"
    TIMEOUT = "timeout"
    UNSERIALISABLE = "unserialisable"
    OUTPUT_GUARD = "output_guard"
    REPLAYED = "replayed"
    HOOK_FAILED = "hook_failed"
    AUDIT_UNAVAILABLE = "audit_unavailable"
    STORE_UNAVAILABLE = "store_unavailable"
    SNAPSHOT_FAILED = "snapshot_failed"
    OUT_OF_ORDER = "out_of_order"
    IN_PROGRESS = "in_progress"
    INTERRUPTED = "interrupted"
    NOT_COMPLETED = "not_completed"
    APPROVAL_PENDING = "approval_pending"
    APPROVAL_DENIED = "approval_denied"
    APPROVAL_EXPIRED = "approval_expired"
    INPUT_REQUIRED = "input_required"


# Members read once: on Python 3.11 each ``Enum.MEMBER`` read costs a class
# ``__getattr__`` call, which the per-call paths below should not pay.
_REJECT = Verdict.REJECT
_NOT_EVALUATED = Verdict.NOT_EVALUATED
_PASS = Verdict.PASS
_OK = Outcome.OK
_INVALID_ARGS = Outcome.INVALID_ARGS


def combine(verdicts: Iterable[Verdict]) -> Verdict:
    """Combine the verdicts of one execution.

    Any ``reject`` wins; otherwise any ``not_evaluated`` (or no verdict at all)
    gives ``not_evaluated``; otherwise ``pass``.
    """
    result = _NOT_EVALUATED
    seen_not_evaluated = False
    for verdict in verdicts:
        if verdict == _REJECT:
            return _REJECT
        if verdict == _PASS:
            result = _PASS
        elif verdict == _NOT_EVALUATED:
            seen_not_evaluated = True
        else:
            raise TypeError(f"not a verdict: {verdict!r}")
    return _NOT_EVALUATED if seen_not_evaluated else result


# The fixed sentence the model reads for each non-ok outcome. Nothing else about
# a failed call ever reaches the model (for invalid_args, the names of the
# offending parameters may follow; they come from the schema).
_SENTENCES: dict[Outcome, str] = {
    Outcome.ERROR: "The tool failed while running. No details are available; do not retry with the same arguments.",
    Outcome.INVALID_ARGS: "The arguments were not accepted.",
    Outcome.LIMIT: "A usage limit was reached. Do not retry this call.",
    Outcome.UNAVAILABLE: "This tool is not available now.",
}


_UNDECLARED = "Send only the parameters that the tool declares."


def model_sentence(
    outcome: Outcome, params: Iterable[str] = (), *, undeclared: bool = False
) -> str:
    """The fixed model-facing sentence for a non-ok outcome.

    For ``invalid_args``, ``params`` (names from the tool's schema) are listed,
    and ``undeclared`` adds a fixed sentence about parameters the schema does
    not declare (their names are never echoed).
    """
    if outcome is _OK:
        raise ValueError("an ok outcome carries the tool's result, not a sentence")
    sentence = _SENTENCES[outcome]
    if outcome is _INVALID_ARGS:
        names = sorted(set(params))
        if names:
            sentence = f"{sentence} Check these parameters: {', '.join(names)}."
        if undeclared:
            sentence = f"{sentence} {_UNDECLARED}"
    return sentence
