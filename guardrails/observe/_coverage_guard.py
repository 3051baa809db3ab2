"""What one guard did at one choke-point, as the coverage report counts it."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

__all__ = ["GuardCoverage"]


@dataclass(frozen=True, slots=True)
class GuardCoverage:
    """What one guard did at one choke-point.

    ``not_evaluated`` counts every time the guard could not decide: its own
    ``not_evaluated`` verdicts plus its fail-closed faults (whose ``reject``
    stopped the action without a decision); ``rejected`` counts decided
    rejects only. ``observed`` of the evaluations were in observe mode.
    """

    guard: str
    choke_point: str
    registered: bool
    passed: int = 0
    rejected: int = 0
    not_evaluated: int = 0
    escapes: Mapping[str, int] = field(default_factory=dict)
    observed: int = 0
    faults: Mapping[str, int] = field(default_factory=dict)

    @property
    def evaluations(self) -> int:
        return self.passed + self.rejected + self.not_evaluated

    @property
    def not_evaluated_share(self) -> float | None:
        """``not_evaluated / evaluations``; ``None`` for a guard that never ran."""
        total = self.evaluations
        return self.not_evaluated / total if total else None

    @property
    def never_ran(self) -> bool:
        return self.evaluations == 0

    def to_json(self) -> dict[str, Any]:
        share = self.not_evaluated_share
        return {
            "guard": self.guard,
            "choke_point": self.choke_point,
            "registered": self.registered,
            "evaluations": self.evaluations,
            "pass": self.passed,
            "reject": self.rejected,
            "not_evaluated": self.not_evaluated,
            "not_evaluated_share": None if share is None else round(share, 6),
            "observed": self.observed,
            "escapes": dict(sorted(self.escapes.items())),
            "escapes_total": sum(self.escapes.values()),
            "faults": dict(sorted(self.faults.items())),
            "faults_total": sum(self.faults.values()),
            "never_ran": self.never_ran,
        }
