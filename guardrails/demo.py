"""``guardrails demo``: a scripted support agent, turn by turn, and what the guards decided.

No API key and no network: the model's tool calls are scripted. Everything
else is the real thing: pre_turn, tool_call and post_run, the rule library,
the Prometheus recorder and the coverage report. Each call prints what the
model asked for and exactly what the model was told.
"""

from __future__ import annotations

import json
import sys
import tempfile
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TextIO

from prometheus_client import CollectorRegistry, generate_latest

from .context import Invocation, ToolResult, TurnContext
from .coverage import from_exposition
from .engine import Guardrails, Turn
from .guard import guard
from .metrics import PrometheusRecorder
from .middleware.post_run import RunRecord
from .rules import allow_list, required_action, trigger
from .tools import tool
from .verdicts import Reason, Verdict

__all__ = ["Scene", "main", "run"]

ACCOUNT = "acc-42"
DISPUTE_STEPS = ("open_dispute", "attach_evidence", "submit_dispute")
NEXT_STEP = {
    "open_dispute": "Dispute D-7 opened. Next: call attach_evidence with the receipt.",
    "attach_evidence": "Evidence attached. Next: call submit_dispute.",
    "submit_dispute": "Dispute D-7 submitted to the card network.",
}
DAILY_REFUND_CAP = 80.0


@dataclass
class Bank:
    """The demo's backend: balances, refunds and each session's dispute phase."""

    balance: float = 250.0
    refunded: float = 0.0
    phase: dict[str, str] = field(default_factory=dict)
    notified: list[str] = field(default_factory=list)

    def dispute_phase(self, session: str) -> str:
        return self.phase.get(session, DISPUTE_STEPS[0])

    def advance(self, session: str, step: str) -> str:
        """A step succeeded: move the session's phase on; the next instructions."""
        following = DISPUTE_STEPS[DISPUTE_STEPS.index(step) + 1 :]
        self.phase[session] = following[0] if following else "done"
        return NEXT_STEP[step]


@dataclass(frozen=True)
class Scene:
    """One user turn: what the user wrote, the model's scripted calls, and its reply."""

    title: str
    user: str
    calls: tuple[tuple[str, dict[str, Any]], ...]
    reply: str


SCENES = (
    Scene(
        "a plain call",
        "Hi, what's my balance?",
        (("get_balance", {}),),
        "Your balance is 250.00 EUR.",
    ),
    Scene(
        "bad arguments never reach the tool; a guard that raises is a counted escape",
        "I was charged twice for order 1138, please refund me.",
        (
            ("refund", {"amount": 40}),
            ("refund", {"account_id": "acc-999", "amount": 40, "reason": "double charge"}),
            ("refund", {"amount": 40, "reason": "double charge"}),
        ),
        "Refunded 40.00 EUR.",
    ),
    Scene(
        "a forbidden subject removes a tool; the backstop does what the model promised",
        "My lawyer says the bank owes me. Refund everything now.",
        (("refund", {"amount": 250, "reason": "legal"}),),
        "I cannot do that here; I will escalate this to a human colleague.",
    ),
    Scene(
        "a step-gated workflow: a step out of order gets no instructions",
        "I want to dispute the second charge.",
        (
            ("submit_dispute", {}),
            ("open_dispute", {"order": "1138"}),
            ("attach_evidence", {"document": "receipt-1138.pdf"}),
            ("submit_dispute", {}),
        ),
        "Your dispute is submitted.",
    ),
    Scene(
        "a cap reached: limit",
        "Also refund the two delivery fees, 30 each.",
        (
            ("refund", {"amount": 30, "reason": "delivery fee"}),
            ("refund", {"amount": 30, "reason": "delivery fee"}),
        ),
        "One fee is refunded; the other needs a colleague.",
    ),
)


def build(bank: Bank, recorder: PrometheusRecorder) -> Guardrails:
    """The agent's tools and rules."""

    @tool(bind={"account_id": "account_id"})
    def get_balance(account_id: str) -> dict[str, Any]:
        """The customer's balance."""
        return {"account": account_id, "balance": bank.balance, "currency": "EUR"}

    @tool(bind={"account_id": "account_id"}, effect=True)
    def refund(account_id: str, amount: float, reason: str) -> dict[str, Any]:
        """Refund an amount to the customer's account."""
        bank.balance += amount
        bank.refunded += amount
        return {"refunded": amount, "account": account_id}

    @tool(bind={"session": "session"})
    def notify_human(session: str, reason: str) -> str:
        """Hand the conversation to a human colleague."""
        bank.notified.append(reason)
        return "A colleague will take over."

    @tool(bind={"session": "session"}, effect=True)
    def open_dispute(session: str, order: str) -> str:
        """Open a dispute about an order (step 1 of 3)."""
        return bank.advance(session, "open_dispute")

    @tool(bind={"session": "session"}, effect=True)
    def attach_evidence(session: str, document: str) -> str:
        """Attach a document to the open dispute (step 2 of 3)."""
        return bank.advance(session, "attach_evidence")

    @tool(bind={"session": "session"}, effect=True)
    def submit_dispute(session: str) -> str:
        """Submit the dispute (step 3 of 3)."""
        return bank.advance(session, "submit_dispute")

    @guard(tools=["refund"])
    def fraud_check(call: Invocation) -> Verdict:
        """Asks a fraud service that is down: the guard raises, the call goes on."""
        raise ConnectionError("fraud-scoring.internal:8443 timed out (api_key=sk-demo-123)")

    @guard(outcome="limit", tools=["refund"])
    def daily_refund_cap(call: Invocation) -> Verdict:
        over = bank.refunded + call.arguments["amount"] > DAILY_REFUND_CAP
        return Verdict.REJECT if over else Verdict.PASS

    always = ["get_balance", "refund", "notify_human"]
    workflow = allow_list(
        by_phase={s: [*always, s] for s in (*DISPUTE_STEPS, "done")},
        name="dispute_steps",
    )
    legal = trigger(["lawyer", "lawsuit", "legal action"], remove=["refund"], name="legal_subject")
    escalate = required_action(
        "notify_human",
        when=_promised_escalation,
        arguments={"reason": "the agent promised an escalation"},
    )
    tools = [get_balance, refund, notify_human, open_dispute, attach_evidence, submit_dispute]
    rails = Guardrails(
        tools, [legal, workflow, fraud_check, daily_refund_cap, escalate], recorder=recorder
    )
    recorder.bind(rails)
    return rails


def _promised_escalation(run: RunRecord) -> bool:
    return "escalate" in (run.text or "").lower()


# -- printing ---------------------------------------------------------------------

_WHY: Mapping[str, str] = {
    Reason.MISSING_REQUIRED: "a required argument is missing; the tool did not run",
    Reason.BOUND_ARGUMENT_SUPPLIED: (
        "the model chose the account id, which comes from the session; refused and recorded"
    ),
    Reason.NOT_OFFERED: "the tool was not offered in this turn; it did not run",
    Reason.UNKNOWN_TOOL: "no such tool",
    Reason.SCHEMA: "the arguments do not match the schema",
    Reason.RAISED: "the tool raised; the exception is kept for the audit trail only",
}


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
        self.line(f"      model sees: {result.outcome:<12}  {result.content}")
        why = _why(result)
        if why:
            self.line(f"      why: {why}")
        for escape in result.escapes:
            self.line(
                f"      fail-open escape: guard {escape.guard} {escape.reason}; "
                "the call went on, and the escape is counted"
            )


def _why(result: ToolResult) -> str:
    if result.reason == Reason.GUARD:
        rejecting = [v.guard for v in result.verdicts if v.verdict is Verdict.REJECT]
        return f"rejected by guard {', '.join(rejecting)}"
    return _WHY.get(result.reason or "", "")


# -- the run ------------------------------------------------------------------------


def run(out: TextIO | None = None, directory: str | Path | None = None) -> int:
    """Play every scene; print what the model saw, the coverage table, and where the data is."""
    out = sys.stdout if out is None else out
    folder = Path(tempfile.mkdtemp(prefix="guardrails-demo-") if directory is None else directory)
    folder.mkdir(parents=True, exist_ok=True)
    bank = Bank()
    registry = CollectorRegistry()
    recorder = PrometheusRecorder(registry)
    rails = build(bank, recorder)
    printer = Printer(out)
    printer.line("guardrails demo: a scripted support agent (no API key, no network).")
    printer.line(f"Tenant acme, account {ACCOUNT}. Every line is what the guards decided.")
    session = "s-1"
    for number, scene in enumerate(SCENES, 1):
        printer.line()
        context = TurnContext(
            tenant="acme",
            session=session,
            phase=bank.dispute_phase(session),
            values={"account_id": ACCOUNT},
        )
        _play(rails.turn(context), number, scene, printer, bank)
    metrics = folder / "metrics.prom"
    metrics.write_bytes(generate_latest(registry))
    printer.line()
    printer.line("Guard coverage (the same table as `guardrails coverage`):")
    printer.line()
    from_exposition(metrics.read_text()).render_table(out)
    printer.line()
    printer.line(f"metrics (Prometheus text): {metrics}")
    printer.line(f"  guardrails coverage {metrics}")
    return 0


def _play(turn: Turn, number: int, scene: Scene, printer: Printer, bank: Bank) -> None:
    offered: tuple[str, ...] | None = None
    for index, (name, arguments) in enumerate(scene.calls):
        # Before each model call, as an agent loop does: pre_turn decides what is
        # offered, for the phase the session is in now (kept outside the model).
        session = turn.context.session or ""
        turn.context = turn.context.evolve(phase=bank.dispute_phase(session))
        decision = turn.pre_turn(scene.user)
        if index == 0:
            printer.scene(number, scene, decision.offered, decision.withheld)
        elif decision.offered != offered:
            printer.line(f"    offered now: {', '.join(decision.offered)}")
        offered = decision.offered
        printer.call(name, arguments, turn.call(name, arguments))
    printer.line(f"    model replies: {scene.reply}")
    report = turn.post_run(scene.reply)
    for action in report.actions:
        outcome = action.outcome or "not repeated"
        printer.line(
            f"    backstop: {action.guard} called {action.tool} ({outcome}); the action is counted"
        )


def main(argv: list[str] | None = None) -> int:
    return run()


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
