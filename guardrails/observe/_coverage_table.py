"""The coverage report as text tables (``guardrails coverage --format table``)."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Protocol, TextIO

from ._coverage_guard import GuardCoverage


class Report(Protocol):
    """What the tables read of a ``coverage.CoverageReport``."""

    @property
    def guards(self) -> tuple[GuardCoverage, ...]: ...
    @property
    def tools(self) -> Mapping[str, Mapping[str, int]]: ...
    @property
    def backstop(self) -> Mapping[tuple[str, str], int]: ...
    @property
    def telemetry_failures(self) -> Mapping[str, int]: ...
    @property
    def approvals(self) -> Mapping[str, Mapping[str, int]]: ...


HEADER = (
    "GUARD",
    "CHOKE_POINT",
    "EVALS",
    "PASS",
    "REJECT",
    "NOT_EVAL",
    "NOT_EVAL%",
    "OBSERVED",
    "ESCAPES",
    "FAULTS",
)


def render(report: Report, out: TextIO, violations: list[str]) -> None:
    rows: list[tuple[str, ...]] = [(*HEADER, "")]
    for g in report.guards:
        share = g.not_evaluated_share
        flag = "registered, never ran" if g.registered and g.never_ran else ""
        cells = (g.guard, g.choke_point, g.evaluations, g.passed, g.rejected, g.not_evaluated)
        share_text = "-" if share is None else f"{share:.1%}"
        rows.append(
            (
                *map(str, cells),
                share_text,
                str(g.observed),
                _reasons(g.escapes),
                _reasons(g.faults),
                flag,
            )
        )
    _table(out, rows, numeric=range(2, 8))
    if report.tools:
        out.write("\n")
        names = sorted({o for outcomes in report.tools.values() for o in outcomes})
        tool_rows: list[tuple[str, ...]] = [("TOOL", "CALLS", *(n.upper() for n in names))]
        for tool, outcomes in report.tools.items():
            counts = [str(outcomes.get(n, 0)) for n in names]
            tool_rows.append((tool, str(sum(outcomes.values())), *counts))
        _table(out, tool_rows, numeric=range(1, len(names) + 2))
    if report.backstop:
        out.write("\n")
        back_rows: list[tuple[str, ...]] = [("BACKSTOP RULE", "TOOL", "ACTIONS")]
        back_rows += [(r, t, str(n)) for (r, t), n in report.backstop.items()]
        _table(out, back_rows, numeric=(2,))
    if report.approvals:
        out.write("\n")
        kinds = list(next(iter(report.approvals.values())))
        approval_rows: list[tuple[str, ...]] = [("TOOL (APPROVALS)", *(k.upper() for k in kinds))]
        for tool, tally in report.approvals.items():
            approval_rows.append((tool, *(str(tally[k]) for k in kinds)))
        _table(out, approval_rows, numeric=range(1, len(kinds) + 1))
    failures = {k: v for k, v in report.telemetry_failures.items() if v}
    if failures:
        out.write("\nrecorder failures: ")
        out.write(", ".join(f"{k}={v}" for k, v in sorted(failures.items())) + "\n")
    for v in violations:
        out.write(f"\nFAIL: {v}")
    if violations:
        out.write("\n")


def _reasons(counts: Mapping[str, int]) -> str:
    return ", ".join(f"{r}={n}" for r, n in sorted(counts.items())) or "-"


def _table(out: TextIO, rows: list[tuple[str, ...]], numeric: Iterable[int]) -> None:
    right = set(numeric)
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    for r in rows:
        cells = [
            c.rjust(w) if i in right else c.ljust(w)
            for i, (c, w) in enumerate(zip(r, widths, strict=True))
        ]
        out.write("  ".join(cells).rstrip() + "\n")
