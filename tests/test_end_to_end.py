"""A scripted two-turn agent conversation through pre_turn, tool_call and post_run."""

from __future__ import annotations

from typing import Any

from guardrails import Guardrails, Outcome, Verdict, tool
from guardrails.rules import Capture, provenance, required_action, trigger
from guardrails.testing import MemoryRecorder

ORDERS = {"A-1": {"id": "A-1", "status": "shipped"}}
NOTIFIED: list[dict[str, Any]] = []


@tool
def find_order(order_id: str) -> dict[str, Any] | None:
    """Look an order up."""
    return ORDERS.get(order_id)


@tool(bind={"customer": "customer_id"}, effect=True)
def refund(customer: str, order_id: str) -> str:
    """Refund an order."""
    raise AssertionError("refund must never run in this conversation")


@tool(bind={"customer": "customer_id"}, effect=True)
def notify_human(customer: str, reason: str) -> str:
    """Hand the conversation to a person."""
    NOTIFIED.append({"customer": customer, "reason": reason})
    return "ticket-7"


def promised_escalation(run: Any) -> bool:
    return run.text is not None and "a colleague will contact you" in run.text


def build() -> tuple[Guardrails, MemoryRecorder]:
    recorder = MemoryRecorder()
    capture = Capture({"find_order": "id"})
    rails = Guardrails(
        [find_order, refund, notify_human],
        [
            trigger(["refund", "chargeback"], remove=["refund"], name="money_subjects"),
            provenance(capture, claims="orders", not_found={"status": "not_found"}),
            required_action(
                "notify_human", when=promised_escalation, arguments={"reason": "promised"}
            ),
        ],
        hooks=[capture],
        recorder=recorder,
    )
    return rails, recorder


def test_two_turn_conversation_through_all_three_choke_points() -> None:
    NOTIFIED.clear()
    rails, recorder = build()
    candidates = [t.to_anthropic() for t in rails.tools.values()]
    context = {"tenant": "acme", "session": "s-1", "values": {"customer_id": "cust-9"}}

    # Turn 1: the model looks one order up, then claims two were found.
    messages: list[dict[str, Any]] = [
        {"role": "user", "content": [{"type": "text", "text": "Where are orders A-1 and B-2?"}]}
    ]
    turn = rails.turn(**context)
    offer = turn.pre_turn(messages, candidates)
    assert offer.offered == ("find_order", "refund", "notify_human")
    assert offer.tools == tuple(candidates)
    assert turn.call("find_order", {"order_id": "A-1"}).outcome is Outcome.OK
    answer = {
        "orders": [
            {"id": "A-1", "status": "found", "reasoning": "the tool returned it"},
            {"id": "B-2", "status": "found", "reasoning": "no other order matched, so B-2 exists"},
        ]
    }
    report = turn.post_run("Both orders were found.", structured=answer)
    assert report.structured is not None
    assert report.structured["orders"][0]["status"] == "found"
    assert report.structured["orders"][1]["status"] == "not_found"
    downgraded = report.verdict_of("provenance")
    assert downgraded is not None and downgraded.verdict is Verdict.REJECT
    kept = downgraded.evidence.detail["claims"]
    assert kept == [answer["orders"][1]]
    assert "no other order matched" in kept[0]["reasoning"]
    assert report.actions == ()

    # Turn 2: a forbidden subject removes refund; the model calls it anyway.
    messages += [
        {"role": "assistant", "content": [{"type": "text", "text": "A-1 has shipped."}]},
        {
            "role": "user",
            "content": [
                {"type": "text", "text": "Then I want a ＲＥＦＵＮＤ for B-2."},
                {"type": "image", "source": {"type": "base64", "data": "AAAA"}},
            ],
        },
    ]
    turn = rails.turn(**context)
    offer = turn.pre_turn(messages, candidates)
    assert "refund" not in offer.offered
    assert offer.withheld == {"refund": ("money_subjects",)}
    refused = turn.call("refund", {"order_id": "B-2"})
    assert refused.outcome is Outcome.UNAVAILABLE
    report = turn.post_run("I cannot do that here; a colleague will contact you.")
    [action] = report.actions
    assert action.tool == "notify_human"
    assert action.outcome is Outcome.OK
    assert NOTIFIED == [{"customer": "cust-9", "reason": "promised"}]
    assert turn.counters["backstop"] == 1

    kinds = [kind for kind, _ in recorder.events]
    assert kinds == ["pre_turn", "post_run", "pre_turn", "backstop", "post_run"]
    assert [r.outcome for r in recorder.results] == [Outcome.OK, Outcome.UNAVAILABLE, Outcome.OK]
