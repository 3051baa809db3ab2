"""Which escapes are faults: the action was stopped, not let through.

An escape counts an action that went on without a decision. Two kinds of
"could not decide" stop the action instead, and are counted as fail-closed
faults (``guardrails_fail_closed_faults_total``, the span's fault event, the
coverage report's faults):

- a fail-closed guard that could not decide: its escape has a reason of
  ``FAULT_REASONS`` and the guard answered an enforced ``reject``;
- a store or audit log the call needed was unavailable and the call was
  stopped for it (outcome reason ``audit_unavailable``, ``store_unavailable``,
  ``hook_failed`` or ``snapshot_failed``): the ``audit_unavailable`` and
  ``store_unavailable`` escapes of that call are faults, since the tool did
  not run.
"""

from __future__ import annotations

from collections.abc import Iterable

from ..context import Escape, VerdictRecord
from ..verdicts import EscapeReason, Reason, Verdict
from ._metric_names import FAULT_REASONS

STOPPED_BY_DEPENDENCY = frozenset(
    {
        Reason.STORE_UNAVAILABLE,
        Reason.AUDIT_UNAVAILABLE,
        Reason.HOOK_FAILED,
        Reason.SNAPSHOT_FAILED,
    }
)
"""Outcome reasons of a call stopped because something it needed failed."""

DEPENDENCY_REASONS = frozenset({EscapeReason.AUDIT_UNAVAILABLE, EscapeReason.STORE_UNAVAILABLE})
"""Escape reasons that are faults on a call stopped by a failed dependency."""


def fault_escapes(
    verdicts: Iterable[VerdictRecord], escapes: Iterable[Escape], stopped_by: object = None
) -> tuple[Escape, ...]:
    """The escapes that are faults; ``stopped_by`` is the call's outcome reason, if any."""
    escapes = tuple(escapes)
    if not escapes:
        return ()
    stopped = {
        (r.guard, r.choke_point) for r in verdicts if r.verdict is Verdict.REJECT and r.enforced
    }
    halted = stopped_by in STOPPED_BY_DEPENDENCY
    return tuple(
        e
        for e in escapes
        if (e.reason in FAULT_REASONS and (e.guard, e.choke_point) in stopped)
        or (halted and e.reason in DEPENDENCY_REASONS)
    )
