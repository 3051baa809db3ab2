"""How ``guardrails demo`` prints a run: each call, its escapes, and how to read the coverage table."""

from __future__ import annotations

import json
import textwrap
from collections.abc import Mapping
from typing import Any, TextIO

from ..context import ToolResult
from ..observe._metric_names import FAIL_OPEN_ESCAPES
from ..observe.coverage import CoverageReport
from ..verdicts import Reason, Verdict
from ._demo_scene import Scene

_WHY: Mapping[str, str] = {
    Reason.MISSING_REQUIRED: "a required argument is missing; the tool did not run",
    Reason.BOUND_ARGUMENT_SUPPLIED: (
        "the model chose the account id, which comes from the session; refused and recorded"
    ),
    Reason.NOT_OFFERED: "the tool was not offered in this turn; it did not run",
    Reason.UNKNOWN_TOOL: "no such tool",
    Reason.SCHEMA: "the arguments do not match the schema",
    Reason.RAISED: "the tool raised; the exception is kept for the audit trail only",
    Reason.LIMIT: "the daily refund cap (in the store) is reached; no money moved",
    Reason.OUT_OF_ORDER: "the session's phase, kept in the store, expects another step",
}


# Why a demo guard could not decide, told next to its escape.
CAUSES = {"fraud_check": " (its fraud-scoring service is down)"}

INTRO = (
    "Every line below is what the guards decided. A guard answers pass, reject or",
    "not_evaluated (it could not decide: it raised, timed out, or lacks configuration).",
    "not_evaluated lets the action go on (fail-open) unless the guard is fail-closed,",
    "and each such escape is counted.",
)


class Printer:
    def __init__(self, out: TextIO) -> None:
        self.out = out

    def line(self, text: str = "") -> None:
        self.out.write(text + "\n")

    def scene(self, number: int, scene: Scene, offered: tuple[str, ...], withheld: Any) -> None:
        self.line(f"[{number}] {scene.title}")
        self.line(f"    user: {scene.user}")
        self.line(f"    offered to the model: {', '.join(offered) or '(nothing)'}")
        if withheld:
            parts = [f"{name} (by {', '.join(guards)})" for name, guards in withheld.items()]
            self.line(f"    withheld: {', '.join(parts)}")

    def call(self, name: str, arguments: dict[str, Any], result: ToolResult) -> None:
        self.line(f"    model calls {name}({json.dumps(arguments)})")
        first, *rest = result.content.splitlines() or [""]
        self.line(f"      model sees: {result.outcome:<12}  {first}")
        for line in rest:
            if line:
                self.line(f"{'':<32}{line}")
        why = _why(result)
        if why:
            self.line(f"      why: {why}")
        for escape in result.escapes:
            cause = CAUSES.get(escape.guard, "")
            self.line(f"      fail-open escape: guard {escape.guard} {escape.reason}{cause}:")
            self.line(
                "        its verdict is not_evaluated; a fail-open guard does not stop the call,"
            )
            self.line(f"        and the escape is counted ({FAIL_OPEN_ESCAPES})")


def _why(result: ToolResult) -> str:
    if result.reason == Reason.GUARD:
        rejecting = [v.guard for v in result.verdicts if v.verdict is Verdict.REJECT]
        return f"rejected by guard {', '.join(rejecting)}"
    return _WHY.get(result.reason or "", "")


def reading(report: CoverageReport, calls: int | None, turns: int) -> list[str]:
    """How to read the table: what the counts count, from the report itself."""
    lines = ["How to read it:"]
    pre = [g for g in report.guards if g.choke_point == "pre_turn"]
    if pre and calls is not None:
        lines.append(
            f"- pre_turn runs before every model call, not once per turn: {calls} model calls"
            f" in {turns} turns, so each pre_turn guard has {pre[0].evaluations} evaluations."
        )
    for g in pre:
        if g.rejected:
            lines.append(
                f"- {g.guard} REJECT {g.rejected}: at pre_turn a reject withholds tools (it does"
                " not refuse the turn); it rejected each time it withheld at least one."
            )
    for g in report.guards:
        if g.not_evaluated:
            escapes = sum(g.escapes.values())
            cause = CAUSES.get(g.guard, "").strip(" ()")
            lines.append(
                f"- {g.guard}: {g.not_evaluated} of {g.evaluations} not_evaluated"
                + (f" ({cause})" if cause else "")
                + f", {escapes} fail-open escapes: an operator's alert on escapes would fire."
            )
    lines.append("- The audit log holds the same verdicts and escapes, row by row (SQL below).")
    return lines


def wrapped(line: str) -> str:
    return textwrap.fill(line, 88, subsequent_indent="  ")
