"""Guard coverage from a Prometheus exposition: ``guardrails coverage``.

For every guard and choke-point: how many times it ran, passed, rejected and
could not evaluate, the share not evaluated, its fail-open escapes by reason,
and whether it is registered but never ran. The exposition is read from a file
or from a ``/metrics`` endpoint on this machine (``http://127.0.0.1:...``);
series that differ only in other labels (``instance``, ``job``) are summed.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections import defaultdict
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, TextIO

from .errors import UsageError
from .metrics import (
    BACKSTOP_ACTIONS,
    CHOKE_POINT,
    FAIL_OPEN_ESCAPES,
    GUARD,
    GUARD_EVALUATIONS,
    GUARD_REGISTERED,
    OUTCOME,
    REASON,
    RECORDER,
    RULE,
    TELEMETRY_FAILURES,
    TOOL,
    TOOL_OUTCOMES,
    UNKNOWN,
    UNKNOWN_TOOL,
    VERDICT,
)
from .verdicts import Reason, Verdict

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

_LOOPBACK = frozenset({"127.0.0.1", "localhost", "::1"})


class CoverageError(UsageError):
    """The exposition could not be read or parsed."""


@dataclass(frozen=True, slots=True)
class GuardCoverage:
    """What one guard did at one choke-point."""

    guard: str
    choke_point: str
    registered: bool
    passed: int = 0
    rejected: int = 0
    not_evaluated: int = 0
    escapes: Mapping[str, int] = field(default_factory=dict)

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
            "escapes": dict(sorted(self.escapes.items())),
            "escapes_total": sum(self.escapes.values()),
            "never_ran": self.never_ran,
        }


@dataclass(frozen=True, slots=True)
class CoverageReport:
    """Guards, tool outcomes, backstop actions and recorder failures."""

    guards: tuple[GuardCoverage, ...]
    tools: Mapping[str, Mapping[str, int]]
    backstop: Mapping[tuple[str, str], int]
    telemetry_failures: Mapping[str, int]

    def violations(
        self, *, max_not_evaluated: float | None = None, fail_never_ran: bool = False
    ) -> list[str]:
        """What fails a CI gate: too high a not-evaluated share; a registered guard that never ran."""
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
        return found

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
            "violations": list(violations),
        }

    def render_table(self, out: TextIO, violations: Iterable[str] = ()) -> None:
        header = ("GUARD", "CHOKE_POINT", "EVALS", "PASS", "REJECT", "NOT_EVAL", "NOT_EVAL%")
        rows: list[tuple[str, ...]] = [(*header, "ESCAPES", "")]
        for g in self.guards:
            share = g.not_evaluated_share
            escapes = ", ".join(f"{r}={n}" for r, n in sorted(g.escapes.items())) or "-"
            flag = "registered, never ran" if g.registered and g.never_ran else ""
            cells = (g.guard, g.choke_point, g.evaluations, g.passed, g.rejected, g.not_evaluated)
            share_text = "-" if share is None else f"{share:.1%}"
            rows.append((*map(str, cells), share_text, escapes, flag))
        _table(out, rows, numeric=range(2, 7))
        if self.tools:
            out.write("\n")
            names = sorted({o for outcomes in self.tools.values() for o in outcomes})
            tool_rows: list[tuple[str, ...]] = [("TOOL", "CALLS", *(n.upper() for n in names))]
            for tool, outcomes in self.tools.items():
                counts = [str(outcomes.get(n, 0)) for n in names]
                tool_rows.append((tool, str(sum(outcomes.values())), *counts))
            _table(out, tool_rows, numeric=range(1, len(names) + 2))
        if self.backstop:
            out.write("\n")
            back_rows: list[tuple[str, ...]] = [("BACKSTOP RULE", "TOOL", "ACTIONS")]
            back_rows += [(r, t, str(n)) for (r, t), n in self.backstop.items()]
            _table(out, back_rows, numeric=(2,))
        failures = {k: v for k, v in self.telemetry_failures.items() if v}
        if failures:
            out.write("\nrecorder failures: ")
            out.write(", ".join(f"{k}={v}" for k, v in sorted(failures.items())) + "\n")
        for v in violations:
            out.write(f"\nFAIL: {v}")
        if violations:
            out.write("\n")


def _table(out: TextIO, rows: list[tuple[str, ...]], numeric: Iterable[int]) -> None:
    right = set(numeric)
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    for r in rows:
        cells = [
            c.rjust(w) if i in right else c.ljust(w)
            for i, (c, w) in enumerate(zip(r, widths, strict=True))
        ]
        out.write("  ".join(cells).rstrip() + "\n")


# -- reading --------------------------------------------------------------------


def read_source(source: str, *, timeout: float = 5.0) -> str:
    """The text of a file, or of an ``http://127.0.0.1...`` (loopback only) URL."""
    if source.startswith(("http://", "https://")):
        from urllib.error import URLError
        from urllib.parse import urlsplit
        from urllib.request import Request, urlopen

        host = urlsplit(source).hostname
        if host not in _LOOPBACK:
            raise CoverageError(
                f"{source}: only a loopback address (127.0.0.1, localhost, ::1) is read; "
                "save a remote exposition to a file first"
            )
        request = Request(source, headers={"Accept": "text/plain; version=0.0.4"})
        try:
            with urlopen(request, timeout=timeout) as response:
                body: bytes = response.read()
        except (URLError, OSError, ValueError) as exc:
            raise CoverageError(f"{source}: {exc}") from exc
        return body.decode("utf-8", errors="replace")
    try:
        with open(source, encoding="utf-8", errors="replace") as f:  # as for a URL
            return f.read()
    except OSError as exc:
        raise CoverageError(f"{source}: {exc.strerror or exc}") from exc


class _Tally:
    """Counts gathered from one source, summed, then turned into a report."""

    def __init__(self) -> None:
        self.verdicts: dict[tuple[str, str], dict[str, int]] = defaultdict(dict)
        self.escapes: dict[tuple[str, str], dict[str, int]] = defaultdict(dict)
        self.registered: set[tuple[str, str]] = set()
        self.tools: dict[str, dict[str, int]] = defaultdict(dict)
        self.backstop: dict[tuple[str, str], int] = defaultdict(int)
        self.failures: dict[str, int] = defaultdict(int)

    def report(self) -> CoverageReport:
        guards = []
        for key in sorted(self.verdicts.keys() | self.escapes.keys() | self.registered):
            counts = self.verdicts.get(key, {})
            guards.append(
                GuardCoverage(
                    guard=key[0],
                    choke_point=key[1],
                    registered=key in self.registered,
                    passed=counts.get(Verdict.PASS.value, 0),
                    rejected=counts.get(Verdict.REJECT.value, 0),
                    not_evaluated=counts.get(Verdict.NOT_EVALUATED.value, 0),
                    escapes={r: n for r, n in self.escapes.get(key, {}).items() if n},
                )
            )
        return CoverageReport(
            guards=tuple(guards),
            tools={t: dict(sorted(o.items())) for t, o in sorted(self.tools.items())},
            backstop=dict(sorted(self.backstop.items())),
            telemetry_failures=dict(sorted(self.failures.items())),
        )


def _add(counts: dict[str, int], key: str, value: float) -> None:
    counts[key] = counts.get(key, 0) + _count(value)


def _count(value: float) -> int:
    if not 0 <= value < 2**63:  # also NaN
        raise ValueError(f"a count must be a non-negative finite number, not {value!r}")
    return round(value)


def from_exposition(text: str) -> CoverageReport:
    """Build the report from Prometheus text (or OpenMetrics) exposition."""
    from prometheus_client.openmetrics.parser import (
        text_string_to_metric_families as parse_openmetrics,
    )
    from prometheus_client.parser import text_string_to_metric_families as parse_text

    parse = parse_openmetrics if text.rstrip().endswith("# EOF") else parse_text
    t = _Tally()
    try:
        for family in parse(text):
            for sample in family.samples:
                name, labels, value = sample.name, sample.labels, sample.value
                if name == GUARD_EVALUATIONS:
                    _add(t.verdicts[(labels[GUARD], labels[CHOKE_POINT])], labels[VERDICT], value)
                elif name == FAIL_OPEN_ESCAPES:
                    _add(t.escapes[(labels[GUARD], labels[CHOKE_POINT])], labels[REASON], value)
                elif name == GUARD_REGISTERED and value > 0:
                    t.registered.add((labels[GUARD], labels[CHOKE_POINT]))
                elif name == TOOL_OUTCOMES:
                    _add(t.tools[labels[TOOL]], labels[OUTCOME], value)
                elif name == BACKSTOP_ACTIONS:
                    t.backstop[(labels[RULE], labels[TOOL])] += _count(value)
                elif name == TELEMETRY_FAILURES:
                    t.failures[labels[RECORDER]] += _count(value)
    except (ValueError, KeyError, TypeError) as exc:
        raise CoverageError(f"not a Prometheus exposition of guardrails metrics: {exc!r}") from exc
    return t.report()


def from_audit(rows: Iterable[Any]) -> CoverageReport:
    """Build the report from audit rows (``guardrails.store.AuditRow``).

    The audit log does not know which guards are registered, so no guard is
    flagged as never run; a backstop row that does not name its rule counts
    under ``_unknown``.
    """
    from .audit import decode_escapes, decode_verdicts

    t = _Tally()
    try:
        for row in rows:
            for v in decode_verdicts(row):
                _add(t.verdicts[(v["guard"], v["choke_point"])], v["verdict"], 1)
            for e in decode_escapes(row):
                _add(t.escapes[(e["guard"], e["choke_point"])], e["reason"], 1)
            if row.kind == "tool_call" and row.outcome is not None:
                tool = UNKNOWN_TOOL if row.reason == Reason.UNKNOWN_TOOL else row.tool
                _add(t.tools[tool or UNKNOWN_TOOL], row.outcome, 1)
            elif row.kind == "backstop":
                detail = json.loads(row.detail) if row.detail else {}
                if detail.get("outcome") is not None:  # None: declined to call again
                    rule = detail.get("rule") or detail.get("guard") or UNKNOWN
                    t.backstop[(str(rule), str(detail.get("tool") or UNKNOWN_TOOL))] += 1
    except (ValueError, KeyError, TypeError) as exc:
        raise CoverageError(f"not readable audit rows: {exc!r}") from exc
    return t.report()


def load_audit(url: str) -> CoverageReport:
    """Read every audit row of the store at ``url`` (``sqlite:///path``, ``postgresql://...``)."""
    from .audit import AuditLog
    from .store import StoreError, open_store

    path = url.removeprefix("sqlite:///")
    if "://" not in path and path != "memory:" and not os.path.exists(path):
        raise CoverageError(f"{url}: no such file")  # opening would create an empty store
    try:
        store = open_store(url)
    except (StoreError, OSError) as exc:
        raise CoverageError(f"{url}: {exc}") from exc
    try:
        return from_audit(AuditLog(store).rows())
    except StoreError as exc:
        raise CoverageError(f"{url}: {exc}") from exc
    finally:
        store.close()


def load(source: str, *, timeout: float = 5.0) -> CoverageReport:
    """Read ``source`` (a file or a loopback URL) and build the report."""
    return from_exposition(read_source(source, timeout=timeout))


# -- the command ------------------------------------------------------------------


def _share(text: str) -> float:
    value = float(text[:-1]) / 100 if text.endswith("%") else float(text)
    if not 0 <= value <= 1:
        raise argparse.ArgumentTypeError(f"{text!r}: a share between 0 and 1 (or 0% and 100%)")
    return value


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """The arguments of ``guardrails coverage``."""
    parser.description = (
        "For every guard and choke-point: evaluations, pass, reject, not_evaluated, "
        "the share not evaluated, fail-open escapes by reason; registered guards that never ran."
    )
    parser.epilog = "Exit status: 0; 1 when a gate (--max-not-evaluated, --fail-never-ran) failed; 2 when the source cannot be read."
    parser.add_argument(
        "source",
        nargs="?",
        help="a file with a Prometheus text exposition, or http://127.0.0.1:PORT/metrics",
    )
    parser.add_argument(
        "--audit",
        metavar="STORE",
        help="read the audit log instead: sqlite:///path/to/file.db or postgresql://...",
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
        "--timeout", type=float, default=5.0, help="seconds to wait for a URL (default 5)"
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
        max_not_evaluated=args.max_not_evaluated, fail_never_ran=args.fail_never_ran
    )
    if args.format == "json":
        json.dump(report.to_json(violations), out, indent=2)
        out.write("\n")
    else:
        report.render_table(out, violations)
    return 1 if violations else 0
