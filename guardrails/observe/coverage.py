"""Guard coverage from a Prometheus exposition or the audit log: ``guardrails coverage``.

For every guard and choke-point: how many times it ran, passed, rejected and
could not decide (``not_evaluated``: its own verdict, or a fail-closed fault
whose ``reject`` was not a decision), the share not evaluated, the verdicts
given in observe mode, its fail-open escapes and fail-closed faults by reason,
and whether it is registered but never ran. Series that differ only in other
labels (``instance``, ``job``, a worker's ``pid``) are summed.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, TextIO

from ..verdicts import Outcome, Verdict
from ._coverage_guard import GuardCoverage
from ._coverage_read import (
    APPROVAL_COUNTS,
    CoverageError,
    Tally,
    audit_rows,
    read_source,
    tally_audit,
    tally_exposition,
)
from ._coverage_table import render

__all__ = [
    "CoverageError",
    "CoverageReport",
    "GuardCoverage",
    "add_arguments",
    "from_audit",
    "from_exposition",
    "load",
    "load_audit",
    "main",
    "read_source",
]


@dataclass(frozen=True, slots=True)
class CoverageReport:
    """Guards, tool outcomes, backstop actions and recorder failures."""

    guards: tuple[GuardCoverage, ...]
    tools: Mapping[str, Mapping[str, int]]
    backstop: Mapping[tuple[str, str], int]
    telemetry_failures: Mapping[str, int]
    # By tool: the counts of ``APPROVAL_COUNTS`` (read from the audit log only).
    approvals: Mapping[str, Mapping[str, int]] = field(default_factory=dict)

    def violations(
        self,
        *,
        max_not_evaluated: float | None = None,
        fail_never_ran: bool = False,
        max_escapes: Mapping[str, int] | None = None,
        max_faults: Mapping[str, int] | None = None,
    ) -> list[str]:
        """What fails a CI gate.

        Too high a not-evaluated share; a registered guard that never ran; more
        fail-open escapes (``observe_only`` aside: deliberate) or fail-closed
        faults than allowed. ``max_escapes`` and ``max_faults`` map a guard's
        name to its limit, and ``""`` to the limit of the total.
        """
        found = []
        for g in self.guards:
            share = g.not_evaluated_share
            if max_not_evaluated is not None and share is not None and share > max_not_evaluated:
                found.append(
                    f"guard {g.guard!r} at {g.choke_point}: not_evaluated share "
                    f"{share:.2%} is above {max_not_evaluated:.2%}"
                )
            if fail_never_ran and g.registered and g.never_ran:
                found.append(f"guard {g.guard!r} at {g.choke_point}: registered but never ran")
        found += _over("fail-open escapes", self._escapes(), max_escapes or {})
        found += _over("fail-closed faults", self._faults(), max_faults or {})
        return found

    def _escapes(self) -> dict[str, int]:
        totals: dict[str, int] = {}
        for g in self.guards:
            n = sum(c for reason, c in g.escapes.items() if reason != "observe_only")
            totals[g.guard] = totals.get(g.guard, 0) + n
        return totals

    def _faults(self) -> dict[str, int]:
        totals: dict[str, int] = {}
        for g in self.guards:
            totals[g.guard] = totals.get(g.guard, 0) + sum(g.faults.values())
        return totals

    def to_json(self, violations: Iterable[str] = ()) -> dict[str, Any]:
        return {
            "guards": [g.to_json() for g in self.guards],
            "tools": [
                {"tool": tool, "calls": sum(outcomes.values()), "outcomes": dict(outcomes)}
                for tool, outcomes in self.tools.items()
            ],
            "backstop": [
                {"rule": rule, "tool": tool, "actions": n}
                for (rule, tool), n in self.backstop.items()
            ],
            "telemetry_failures": dict(self.telemetry_failures),
            **({"approvals": self._approvals_json()} if self.approvals else {}),
            "violations": list(violations),
        }

    def _approvals_json(self) -> list[dict[str, Any]]:
        return [{"tool": tool, **counts} for tool, counts in self.approvals.items()]

    def render_table(self, out: TextIO, violations: Iterable[str] = ()) -> None:
        render(self, out, list(violations))


def _over(what: str, counts: Mapping[str, int], limits: Mapping[str, int]) -> list[str]:
    """The limits ``counts`` exceeds: per guard by name, and in total under ``""``."""
    found = []
    for name, limit in sorted(limits.items()):
        n = sum(counts.values()) if name == "" else counts.get(name, 0)
        if n > limit:
            who = "in total" if name == "" else f"guard {name!r}"
            found.append(f"{what} {who}: {n} is above {limit}")
    return found


_VERDICTS = frozenset(v.value for v in Verdict)


def _report(t: Tally) -> CoverageReport:
    for (guard, point), counts in t.verdicts.items():
        unknown = sorted(set(counts) - _VERDICTS)
        if unknown:
            raise CoverageError(
                f"guard {guard!r} at {point}: unknown verdict value {unknown[0]!r} "
                "(a verdict is pass, reject or not_evaluated)"
            )
    guards = []
    keys = t.verdicts.keys() | t.escapes.keys() | t.faults.keys() | t.registered
    for key in sorted(keys):
        counts = t.verdicts.get(key, {})
        faults = {r: n for r, n in t.faults.get(key, {}).items() if n}
        undecided = min(sum(faults.values()), counts.get(Verdict.REJECT.value, 0))
        guards.append(
            GuardCoverage(
                guard=key[0],
                choke_point=key[1],
                registered=key in t.registered,
                passed=counts.get(Verdict.PASS.value, 0),
                rejected=counts.get(Verdict.REJECT.value, 0) - undecided,
                not_evaluated=counts.get(Verdict.NOT_EVALUATED.value, 0) + undecided,
                observed=t.observed.get(key, 0),
                escapes={r: n for r, n in t.escapes.get(key, {}).items() if n},
                faults=faults,
            )
        )
    return CoverageReport(
        guards=tuple(guards),
        tools={
            tool: {o.value: outcomes.get(o.value, 0) for o in sorted(Outcome)}
            for tool, outcomes in sorted(t.tools.items())
        },
        backstop=dict(sorted(t.backstop.items())),
        telemetry_failures=dict(sorted(t.failures.items())),
        approvals={
            tool: {name: counts.get(name, 0) for name in APPROVAL_COUNTS}
            for tool, counts in sorted(t.approvals.items())
        },
    )


def from_exposition(text: str, source: str = "source") -> CoverageReport:
    """Build the report from Prometheus text (or OpenMetrics) exposition.

    An exposition without any guardrails series is a ``CoverageError``: a gate
    pointed at the wrong endpoint must not pass.
    """
    return _report(tally_exposition(text, source))


def from_audit(rows: Iterable[Any]) -> CoverageReport:
    """Build the report from audit rows (``guardrails.store.AuditRow``).

    The audit log does not know which guards are registered, so no guard is
    flagged as never run; a backstop row that does not name its rule counts
    under ``_unknown``.
    """
    return _report(tally_audit(rows))


def load_audit(url: str) -> CoverageReport:
    """Read every audit row of a store: ``sqlite:///relative.db``, ``sqlite:////absolute.db``,
    a bare path, or ``postgresql://...``. A store without rows is a ``CoverageError``."""
    rows = audit_rows(url)
    if not rows:
        raise CoverageError(f"{url}: the audit log has no rows")
    return from_audit(rows)


def load(source: str, *, timeout: float = 5.0) -> CoverageReport:
    """Read ``source`` (a file or a loopback URL) and build the report."""
    return from_exposition(read_source(source, timeout=timeout), source)


# -- the command ------------------------------------------------------------------


def _share(text: str) -> float:
    try:
        value = float(text[:-1]) / 100 if text.endswith("%") else float(text)
    except ValueError:
        value = float("nan")
    if not 0 <= value <= 1:
        raise argparse.ArgumentTypeError(
            f"{text!r} is not a share: write 0.05 or 5% (between 0 and 1, or 0% and 100%)"
        )
    return value


def _seconds(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        value = float("nan")
    if not 0 < value <= 3600:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number of seconds (0 to 3600)")
    return value


def _limit(text: str) -> tuple[str, int]:
    """``N`` (the total) or ``GUARD=N``: a guard's name (``""`` for the total) and its limit."""
    guard, _, number = text.rpartition("=")
    if not number.isascii() or not number.isdigit() or (guard == "" and "=" in text):
        raise argparse.ArgumentTypeError(
            f"{text!r} is not a limit: write N (in total) or GUARD=N, N a whole number >= 0"
        )
    return guard, int(number)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """The arguments of ``guardrails coverage``."""
    parser.description = (
        "For every guard and choke-point: evaluations, pass, reject, not_evaluated (including "
        "fail-closed faults), the share not evaluated, observe-mode verdicts, fail-open escapes "
        "and fail-closed faults by reason; registered guards that never ran."
    )
    parser.epilog = (
        "Exit status: 0; 1 when a gate (--max-not-evaluated, --fail-never-ran, --max-escapes, "
        "--max-faults) failed; "
        "2 when the source cannot be read or holds no guardrails metrics."
    )
    parser.add_argument(
        "source",
        nargs="?",
        help="a file with a Prometheus text exposition, or http://127.0.0.1:PORT/metrics",
    )
    parser.add_argument(
        "--audit",
        metavar="STORE",
        help="read the audit log instead: sqlite:///relative.db, sqlite:////absolute.db, "
        "or postgresql://...",
    )
    parser.add_argument("--format", choices=("table", "json"), default="table")
    parser.add_argument(
        "--max-not-evaluated",
        type=_share,
        metavar="SHARE",
        help="exit 1 if a guard's not_evaluated share is above SHARE (0.05 or 5%%)",
    )
    parser.add_argument(
        "--fail-never-ran",
        action="store_true",
        help="exit 1 if a registered guard never ran",
    )
    parser.add_argument(
        "--max-escapes",
        type=_limit,
        action="append",
        metavar="[GUARD=]N",
        help="exit 1 if there are more than N fail-open escapes (observe_only aside) in total, "
        "or for GUARD; repeat for several guards",
    )
    parser.add_argument(
        "--max-faults",
        type=_limit,
        action="append",
        metavar="[GUARD=]N",
        help="exit 1 if there are more than N fail-closed faults in total, or for GUARD; "
        "repeat for several guards",
    )
    parser.add_argument(
        "--timeout", type=_seconds, default=5.0, help="seconds to wait for a URL (default 5)"
    )
    parser.set_defaults(func=main)


def main(args: argparse.Namespace, out: TextIO | None = None) -> int:
    """Run ``guardrails coverage``: 0 on success, 1 if a gate failed, 2 if unreadable."""
    out = sys.stdout if out is None else out
    try:
        if (args.source is None) == (args.audit is None):
            raise CoverageError("give either an exposition (file or URL) or --audit STORE")
        if args.audit is not None:
            report = load_audit(args.audit)
        else:
            report = load(args.source, timeout=args.timeout)
    except CoverageError as exc:
        sys.stderr.write(f"guardrails coverage: {exc}\n")
        return 2
    violations = report.violations(
        max_not_evaluated=args.max_not_evaluated,
        fail_never_ran=args.fail_never_ran,
        max_escapes=dict(args.max_escapes or ()),
        max_faults=dict(args.max_faults or ()),
    )
    if args.format == "json":
        json.dump(report.to_json(violations), out, indent=2)
        out.write("\n")
    else:
        report.render_table(out, violations)
    return 1 if violations else 0
