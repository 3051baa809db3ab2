"""Required action: the predicate, the arguments, the guard's name, misconfiguration."""

from __future__ import annotations

from typing import Any

import pytest

from guardrails import ConfigurationError, Guardrails, Outcome, Verdict, tool
from guardrails.middleware.post_run import RunRecord
from guardrails.rules import Perform, required_action

SENT: list[str] = []


@tool
def send_receipt(order_id: str) -> str:
    """Send the receipt."""
    SENT.append(order_id)
    return "sent"


@tool
def charge(order_id: str) -> str:
    """Charge."""
    return "charged"


def charged(run: RunRecord) -> bool:
    return run.called_ok("charge")


def receipt_arguments(run: RunRecord) -> dict[str, Any]:
    [call] = run.calls("charge")
    return {"order_id": call.value and "o-1"}


def test_arguments_may_be_computed_from_the_run() -> None:
    SENT.clear()
    rule = required_action("send_receipt", when=charged, arguments=receipt_arguments)
    turn = Guardrails([send_receipt, charge], [rule]).turn()
    assert turn.post_run("").actions == ()
    turn.call("charge", {"order_id": "o-1"})
    report = turn.post_run("")
    assert [a.outcome for a in report.actions] == [Outcome.OK]
    record = report.verdict_of("required_send_receipt")
    assert record is not None and record.verdict is Verdict.REJECT
    assert record.evidence == Perform("send_receipt", {"order_id": "o-1"})
    assert SENT == ["o-1"]


def test_a_predicate_that_raises_is_an_escape_and_nothing_is_called() -> None:
    def broken(run: RunRecord) -> bool:
        raise KeyError("x")

    rule = required_action("send_receipt", when=broken, name="receipts")
    report = Guardrails([send_receipt], [rule]).turn().post_run("")
    assert report.actions == () and report.escapes[0].guard == "receipts"


def test_bad_configuration_fails_at_construction() -> None:
    with pytest.raises(ConfigurationError):
        required_action("", when=charged)
    with pytest.raises(ConfigurationError):
        required_action("x", when=True)  # type: ignore[arg-type]
    with pytest.raises(ConfigurationError):
        required_action("x", when=charged, arguments=3)  # type: ignore[arg-type]
