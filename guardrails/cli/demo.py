"""``guardrails demo``: a scripted support agent, turn by turn, and what the guards decided.

No API key and no network: the model's tool calls are scripted. Everything
else is the real thing: pre_turn, tool_call and post_run, the rule library,
the Prometheus recorder and the coverage report. Each call prints what the
model asked for and exactly what the model was told.
"""

from __future__ import annotations

import argparse
import os
import secrets
import sys
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TextIO

from prometheus_client import CollectorRegistry, generate_latest

from ..audit import AuditLog
from ..context import Invocation, TurnContext
from ..effects import PaidCall, Usage
from ..engine import Guardrails, Turn
from ..errors import UsageError
from ..guard import guard
from ..integrations._common import field as read
from ..middleware.post_run import RunRecord
from ..observe.coverage import from_exposition
from ..observe.metrics import PrometheusRecorder
from ..rules import required_action, trigger
from ..rules.workflow import Step, Workflow
from ..store import SQLiteStore, Store
from ..tools import tool
from ..verdicts import Verdict
from ._demo_print import INTRO, Printer, reading, wrapped
from ._demo_scene import Scene

__all__ = ["Scene", "main", "run"]

ACCOUNT = "acc-42"
DISPUTE = (
    Step("open_dispute", "Next: call attach_evidence with the receipt."),
    Step("attach_evidence", "Next: call submit_dispute."),
    Step("submit_dispute", "The card network answers within 10 days."),
)
DAILY_REFUND_CAP = 80.0


@dataclass
class Bank:
    """The demo's backend."""

    balance: float = 250.0
    notified: list[str] = field(default_factory=list)

    def pay_out(self, account_id: str, amount: float) -> dict[str, Any]:
        self.balance += amount
        return {"refunded": amount, "account": account_id}


SCENES = (
    Scene(
        "a plain call",
        "Hi, what's my balance?",
        (("get_balance", {}),),
        "Your balance is 250.00 EUR.",
    ),
    Scene(
        "bad arguments never reach the tool; a guard that cannot decide says not_evaluated",
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


def build(bank: Bank, store: Store, recorder: PrometheusRecorder, session: str) -> Guardrails:
    """The agent's tools and rules, on one store (the audit log, the refund cap, the phases)."""
    payouts = PaidCall(
        store,
        usage=lambda response: Usage(cost=response["refunded"]),
        estimate=lambda arguments: float(arguments["amount"]),
        daily_cap=DAILY_REFUND_CAP,
        scope=f"refunds:{session}",
        name="refund_payout",
    )

    @guard(tools=["refund"])
    def fraud_check(call: Invocation) -> Verdict:
        """Asks a fraud service that is down: the guard raises, the call goes on."""
        raise ConnectionError("fraud-scoring.internal:8443 timed out (api_key=sk-demo-123)")

    dispute = Workflow("dispute", DISPUTE, store)
    legal = trigger(["lawyer", "lawsuit", "legal action"], remove=["refund"], name="legal_subject")
    escalate = required_action(
        "notify_human",
        when=_promised_escalation,
        arguments={"reason": "the agent promised an escalation"},
    )
    audit = AuditLog(store)
    tools = _tools(bank, payouts)
    rails = Guardrails(
        tools,
        [legal, dispute.pre_turn_guard(), fraud_check, escalate],
        hooks=[audit, dispute],
        recorder=[audit, recorder],
    )
    recorder.bind(rails)
    return rails


def _tools(bank: Bank, payouts: PaidCall) -> list[Any]:
    """The agent's tools: the balance, refunds (through the paid-call cap), a human
    colleague, and the three steps of a dispute."""

    @tool(bind={"account_id": "account_id"})
    def get_balance(account_id: str) -> dict[str, Any]:
        """The customer's balance."""
        return {"account": account_id, "balance": bank.balance, "currency": "EUR"}

    @tool(bind={"account_id": "account_id"}, effect=True)
    def refund(account_id: str, amount: float, reason: str) -> dict[str, Any]:
        """Refund an amount to the customer's account."""
        # Every payout goes through one choke-point: the daily cap, then an audit row.
        result: dict[str, Any] = payouts(bank.pay_out, account_id=account_id, amount=amount)
        return result

    @tool(bind={"session": "session"})
    def notify_human(session: str, reason: str) -> str:
        """Hand the conversation to a human colleague."""
        bank.notified.append(reason)
        return "A colleague will take over."

    @tool(effect=True)
    def open_dispute(order: str) -> str:
        """Open a dispute about an order (step 1 of 3)."""
        return f"Dispute D-7 opened for order {order}."

    @tool(effect=True)
    def attach_evidence(document: str) -> str:
        """Attach a document to the open dispute (step 2 of 3)."""
        return f"{document} attached to D-7."

    @tool(effect=True)
    def submit_dispute() -> str:
        """Submit the dispute (step 3 of 3)."""
        return "D-7 submitted."

    return [get_balance, refund, notify_human, open_dispute, attach_evidence, submit_dispute]


def _promised_escalation(run: RunRecord) -> bool:
    return "escalate" in (run.text or "").lower()


# -- the run ------------------------------------------------------------------------


def run(
    out: TextIO | None = None, directory: str | Path | None = None, *, model: str | None = None
) -> int:
    """Play every scene; print what the model saw, the coverage table, and where the data is.

    With ``model``, a real model (the Anthropic API, ANTHROPIC_API_KEY) plays
    the agent instead of the script: the users, tools and guards are the same.
    """
    out = sys.stdout if out is None else out
    client = None if model is None else _live_client()
    folder = Path(tempfile.mkdtemp(prefix="guardrails-demo-") if directory is None else directory)
    folder.mkdir(parents=True, exist_ok=True)
    # A session of its own per run: the phase and the cap live in the store, so
    # a second run on the same directory starts afresh instead of where this ended.
    session = f"s-{secrets.token_hex(3)}"
    store = SQLiteStore(folder / "audit.db")
    registry = CollectorRegistry()
    recorder = PrometheusRecorder(registry)
    bank = Bank()
    rails = build(bank, store, recorder, session)
    printer = Printer(out)
    _print_intro(printer, model, session)
    try:
        for number, scene in enumerate(SCENES, 1):
            printer.line()
            context = TurnContext(tenant="acme", session=session, values={"account_id": ACCOUNT})
            if client is None:
                _play(rails.turn(context), number, scene, printer)
            else:
                _play_live(client, model or "", rails.turn(context), number, scene, printer)
        rows = len(store.audit_rows(session=session, limit=100_000))
    finally:
        store.close()
        if client is not None:
            client.close()
    metrics = folder / "metrics.prom"
    metrics.write_bytes(generate_latest(registry))
    printer.line()
    printer.line("Guard coverage (the same table as `guardrails coverage`):")
    printer.line()
    report = from_exposition(metrics.read_text())
    report.render_table(out)
    printer.line()
    calls = sum(len(scene.calls) for scene in SCENES) if client is None else None
    for line in reading(report, calls, len(SCENES)):
        printer.line(wrapped(line))
    _print_where(printer, folder / "audit.db", rows, session, metrics)
    return 0


def _print_intro(printer: Printer, model: str | None, session: str) -> None:
    if model is None:
        printer.line("guardrails demo: a scripted support agent (no API key, no network).")
    else:
        printer.line(f"guardrails demo: a support agent played by {model}.")
    printer.line(f"Tenant acme, account {ACCOUNT}, session {session}.")
    for line in INTRO:
        printer.line(line)


def _print_where(printer: Printer, database: Path, rows: int, session: str, metrics: Path) -> None:
    """Where the run's audit rows and metrics are, and the commands that read them."""
    printer.line()
    printer.line(f"audit database (SQLite, append-only): {database}  ({rows} rows this run)")
    printer.line(
        f'  sqlite3 {database} "SELECT id, kind, tool, outcome, verdict, reason, escapes'
        f" FROM guardrails_audit WHERE session = '{session}' ORDER BY id\""
    )
    printer.line(f"metrics (Prometheus text): {metrics}")
    printer.line(f"  guardrails coverage {metrics}")


def _play(turn: Turn, number: int, scene: Scene, printer: Printer) -> None:
    offered: tuple[str, ...] | None = None
    for index, (name, arguments) in enumerate(scene.calls):
        # Before each model call, as an agent loop does: pre_turn decides what is
        # offered, for the workflow phase the session is in now (kept in the store).
        decision = turn.pre_turn(scene.user)
        if index == 0:
            printer.scene(number, scene, decision.offered, decision.withheld)
        elif decision.offered != offered:
            printer.line(f"    offered now: {', '.join(decision.offered)}")
        offered = decision.offered
        printer.call(name, arguments, turn.call(name, arguments))
    printer.line(f"    model replies: {scene.reply}")
    _backstop(turn, scene.reply, printer)


SYSTEM = (
    "You are the support agent of a bank. Use the tools to help the customer. "
    "Refunds need an amount and a reason. Disputes go open_dispute, attach_evidence, "
    "submit_dispute. If you cannot help, say that you will escalate to a human."
)


def _live_client() -> Any:
    try:
        import anthropic
    except ImportError:
        raise UsageError(
            "the live demo needs the anthropic package: pip install 'guardrails-kit[anthropic]'"
        ) from None
    if not os.environ.get("ANTHROPIC_API_KEY"):
        raise UsageError("the live demo needs ANTHROPIC_API_KEY; without it, run the scripted demo")
    return anthropic.Anthropic()


def _play_live(
    client: Any, model: str, turn: Turn, number: int, scene: Scene, printer: Printer
) -> None:
    from ..integrations.anthropic import run_tool_loop

    printer.line(f"[{number}] {scene.title}")
    printer.line(f"    user: {scene.user}")
    done = run_tool_loop(
        client,
        turn,
        messages=[{"role": "user", "content": scene.user}],
        model=model,
        max_tokens=1024,
        system=SYSTEM,
        max_iterations=8,
    )
    if done.refusal is not None:
        printer.line(f"    refused by pre_turn: {done.refusal}")
    offered = [name for name in turn.engine.tools if name in (turn.offered or ())]
    printer.line(f"    offered to the model (last request): {', '.join(offered) or '(nothing)'}")
    results = iter(turn.results)
    for message in done.messages:
        for block in message["content"] if message["role"] == "assistant" else ():
            if read(block, "type") == "tool_use":
                printer.call(read(block, "name"), read(block, "input"), next(results))
    reply = " ".join(
        str(read(b, "text"))
        for b in read(done.message, "content") or ()
        if read(b, "type") == "text"
    )
    printer.line(f"    model replies: {reply}")
    _backstop(turn, reply, printer)


def _backstop(turn: Turn, reply: str, printer: Printer) -> None:
    report = turn.post_run(reply)
    for action in report.actions:
        outcome = action.outcome or "not repeated"
        printer.line(
            f"    backstop: {action.guard} called {action.tool} ({outcome}); the action is counted"
        )


def main(argv: list[str] | None = None) -> int:
    return run()


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """The ``guardrails demo`` subcommand's arguments."""
    parser.description = (
        "A scripted banking agent, turn by turn: each guard's verdict (pass, reject, "
        "not_evaluated), the outcome the model saw, the audit rows and the metrics. "
        "No network unless --live."
    )
    parser.add_argument(
        "--dir",
        default=None,
        help="where to write the audit database and metrics (default: a new temporary directory)",
    )
    parser.add_argument(
        "--live",
        metavar="MODEL",
        nargs="?",
        const="claude-sonnet-5-5",
        default=None,
        help="let a real model play the agent (needs ANTHROPIC_API_KEY and the anthropic extra)",
    )
    parser.set_defaults(func=_command)


def _command(args: argparse.Namespace) -> int:
    try:
        return run(directory=args.dir, model=args.live)
    except UsageError as exc:
        print(f"guardrails demo: {exc}", file=sys.stderr)
        return 2
    except OSError as exc:  # --dir is a file, or cannot be created
        where = exc.filename if exc.filename is not None else args.dir
        print(f"guardrails demo: {where}: {exc.strerror or type(exc).__name__}", file=sys.stderr)
        return 2


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
