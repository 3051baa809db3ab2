"""The Prometheus names, labels, label values and HELP texts (public API).

Re-exported by ``guardrails.observe.metrics``; ``docs/observability.md`` quotes them
and a test compares the two.
"""

from __future__ import annotations

from collections.abc import Mapping

from ..verdicts import EscapeReason

GUARD_EVALUATIONS = "guardrails_guard_evaluations_total"
FAIL_OPEN_ESCAPES = "guardrails_fail_open_escapes_total"
FAIL_CLOSED_FAULTS = "guardrails_fail_closed_faults_total"
TOOL_OUTCOMES = "guardrails_tool_outcomes_total"
BACKSTOP_ACTIONS = "guardrails_backstop_actions_total"
GUARD_DURATION = "guardrails_guard_duration_seconds"
GUARD_REGISTERED = "guardrails_guard_registered"
TELEMETRY_FAILURES = "guardrails_telemetry_failures_total"
POLICY_REVISION = "guardrails_policy_revision_info"
TOOL_CALL_DURATION = "guardrails_tool_call_duration_seconds"
TOOL_CALL_GUARD_TIME = "guardrails_tool_call_guard_seconds"
LAST_ESCAPE = "guardrails_fail_open_escape_last_timestamp_seconds"
LAST_FAULT = "guardrails_fail_closed_fault_last_timestamp_seconds"
APPROVAL_EVENTS = "guardrails_approval_events_total"
APPROVAL_DECISION_TIME = "guardrails_approval_decision_seconds"
APPROVAL_OLDEST_PENDING = "guardrails_approval_oldest_pending_seconds"

GUARD = "guard"
CHOKE_POINT = "choke_point"
VERDICT = "verdict"
MODE = "mode"
REASON = "reason"
TOOL = "tool"
OUTCOME = "outcome"
RULE = "rule"
RECORDER = "recorder"
REVISION = "revision"
EVENT = "event"

ENFORCE = "enforce"
"""``mode`` of a verdict that was enforced."""
OBSERVE = "observe"
"""``mode`` of a verdict of a guard in observe mode (recorded, never enforced)."""
MODES = (ENFORCE, OBSERVE)

APPROVAL_EVENT_VALUES = ("requested", "granted", "denied", "expired")
"""``event`` of ``guardrails_approval_events_total``: what the approval gate found for a call."""

# Every family and its labels, as exposed (histograms also expose _bucket with
# ``le``, _sum and _count).
EXPORTED: Mapping[str, tuple[str, ...]] = {
    GUARD_EVALUATIONS: (GUARD, CHOKE_POINT, VERDICT, MODE),
    FAIL_OPEN_ESCAPES: (GUARD, CHOKE_POINT, REASON),
    FAIL_CLOSED_FAULTS: (GUARD, CHOKE_POINT, REASON),
    TOOL_OUTCOMES: (TOOL, OUTCOME),
    BACKSTOP_ACTIONS: (RULE, TOOL),
    GUARD_DURATION: (GUARD, CHOKE_POINT),
    GUARD_REGISTERED: (GUARD, CHOKE_POINT),
    TELEMETRY_FAILURES: (RECORDER,),
    LAST_ESCAPE: (GUARD, CHOKE_POINT, REASON),
    LAST_FAULT: (GUARD, CHOKE_POINT, REASON),
    TOOL_CALL_DURATION: (TOOL,),
    TOOL_CALL_GUARD_TIME: (TOOL,),
    POLICY_REVISION: (REVISION,),
    APPROVAL_EVENTS: (TOOL, EVENT),
    APPROVAL_DECISION_TIME: (TOOL,),
    APPROVAL_OLDEST_PENDING: (TOOL,),
}

HELP: Mapping[str, str] = {
    GUARD_EVALUATIONS: (
        "Guard verdicts by guard, choke-point, verdict and mode "
        "(enforce, or observe: recorded and never enforced)."
    ),
    FAIL_OPEN_ESCAPES: (
        "Actions that went on without an enforced decision of the guard, "
        "by guard, choke-point and reason."
    ),
    FAIL_CLOSED_FAULTS: (
        "Actions stopped without a decision (a fail-closed guard could not decide, "
        "or the audit log or store the call needed was down), by guard, choke-point and reason."
    ),
    TOOL_OUTCOMES: "Tool calls by tool and the outcome the model saw.",
    BACKSTOP_ACTIONS: "Tool calls the post_run backstop made, by rule and tool.",
    GUARD_DURATION: "Time one guard took to decide, by guard and choke-point.",
    GUARD_REGISTERED: "1 for every guard registered at a choke-point.",
    TELEMETRY_FAILURES: "Recorder failures: logged and counted, never raised into a tool call.",
    POLICY_REVISION: (
        "1 for the revision (a content hash of guards, tools and policy) of each engine "
        "bound to the recorder."
    ),
    TOOL_CALL_DURATION: "Time one tool call took, from admission to its result, by tool.",
    TOOL_CALL_GUARD_TIME: "Time the guards of one tool call took together, by tool.",
    LAST_ESCAPE: (
        "Unix time of the latest fail-open escape, by guard, choke-point and reason "
        "(absent until the first one)."
    ),
    LAST_FAULT: (
        "Unix time of the latest fail-closed fault, by guard, choke-point and reason "
        "(absent until the first one)."
    ),
    APPROVAL_EVENTS: (
        "Calls the approval gate held or ran, by tool and event (requested, granted, "
        "denied, expired)."
    ),
    APPROVAL_DECISION_TIME: (
        "Time from an approval request to its approval, by tool, observed when the approved "
        "call runs."
    ),
    APPROVAL_OLDEST_PENDING: (
        "Age of the oldest approval request still waiting for a decision, by tool "
        "(0 when none waits)."
    ),
}

# Why a fail-closed guard could not decide: the reasons of
# guardrails_fail_closed_faults_total that every registered guard exposes at
# zero. pass_on_retry and observe_only only ever let an action on;
# audit_unavailable and store_unavailable are faults only on a call stopped
# for them (``_faults``).
FAULT_REASONS = frozenset(
    {
        EscapeReason.RAISED,
        EscapeReason.TIMEOUT,
        EscapeReason.INVALID_RETURN,
        EscapeReason.NOT_CONFIGURED,
        EscapeReason.DECLINED,
    }
)

UNKNOWN_TOOL = "_unknown"
"""The ``tool`` label value of every call to a tool that is not registered."""

UNKNOWN = "_unknown"
"""The label value for a backstop rule or tool that the payload did not name."""

# Guards run in microseconds to seconds.
DURATION_BUCKETS = (
    0.00001,
    0.000025,
    0.00005,
    0.0001,
    0.00025,
    0.0005,
    0.001,
    0.0025,
    0.005,
    0.01,
    0.025,
    0.05,
    0.1,
    0.25,
    0.5,
    1.0,
    2.5,
    5.0,
    10.0,
)

# A whole tool call may wait on a network: up to a minute.
CALL_BUCKETS = (*DURATION_BUCKETS, 30.0, 60.0)

# A person decides in seconds to a day.
DECISION_BUCKETS = (
    1.0,
    5.0,
    15.0,
    30.0,
    60.0,
    120.0,
    300.0,
    600.0,
    1800.0,
    3600.0,
    7200.0,
    14400.0,
    43200.0,
    86400.0,
)
