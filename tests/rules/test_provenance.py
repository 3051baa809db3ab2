"""Provenance: claims survive only with a trace captured from tool_call in this turn."""

from __future__ import annotations

from typing import Any

import pytest
from pydantic import BaseModel

from guardrails import ConfigurationError, EscapeReason, Guardrails, Verdict, tool
from guardrails.rules import Capture, provenance


class Order(BaseModel):
    id: str


@tool
def search_orders(query: str) -> dict[str, Any]:
    """Search orders."""
    return {"orders": [{"id": "A-1"}, {"id": 7}, {"id": None}]}


@tool
def get_order(order_id: str) -> Order:
    """One order."""
    return Order(id=order_id)


@tool
def failing(order_id: str) -> dict[str, str]:
    """Always fails."""
    raise RuntimeError("boom")


def build(**options: Any) -> tuple[Guardrails, Capture]:
    capture = Capture({"search_orders": "orders.*.id", "get_order": "id", "failing": "id"})
    rule = provenance(capture, claims="results", **options)
    return Guardrails([search_orders, get_order, failing], [rule], hooks=[capture]), capture


def test_capture_keeps_identifiers_that_tools_returned_per_turn() -> None:
    rails, capture = build()
    turn = rails.turn()
    turn.call("search_orders", {"query": "x"})
    turn.call("get_order", {"order_id": "B-2"})
    turn.call("failing", {"order_id": "C-3"})
    assert capture.ids(turn) == {"A-1", "7", "B-2"}
    assert capture.ids(rails.turn()) == frozenset()


def test_a_traced_claim_survives_and_an_untraced_one_is_downgraded_with_its_reasoning() -> None:
    rails, _ = build()
    turn = rails.turn()
    turn.call("search_orders", {"query": "x"})
    claims = {
        "results": [
            {"id": "A-1", "status": "found", "reasoning": "listed by search"},
            {"id": 7, "status": "found"},
            {"id": "Z-9", "status": "found", "reasoning": "it must exist"},
            {"id": "Q-1", "status": "not_found"},
        ]
    }
    report = turn.post_run("Found A-1, 7 and Z-9.", structured=claims)
    assert report.structured is not None
    statuses = [c["status"] for c in report.structured["results"]]
    assert statuses == ["found", "found", "not_found", "not_found"]
    record = report.verdict_of("provenance")
    assert record is not None and record.verdict is Verdict.REJECT
    assert record.reason == "claim_without_trace"
    assert record.evidence.detail == {
        "claims": [{"id": "Z-9", "status": "found", "reasoning": "it must exist"}],
        "text": "Found A-1, 7 and Z-9.",
    }
    assert report.structured["results"][2]["reasoning"] == "it must exist"


def test_a_claim_from_an_earlier_turn_has_no_trace_in_this_one() -> None:
    rails, _ = build()
    first = rails.turn()
    first.call("get_order", {"order_id": "B-2"})
    second = rails.turn()
    report = second.post_run(structured={"results": {"id": "B-2", "status": "found"}})
    assert report.structured == {"results": {"id": "B-2", "status": "not_found"}}


def test_the_not_found_values_are_declared() -> None:
    rails, _ = build(not_found={"status": "unknown", "id": None}, found="ok")
    report = rails.turn().post_run(structured={"results": [{"id": "X", "status": "ok"}]})
    assert report.structured == {"results": [{"id": None, "status": "unknown"}]}


def test_no_claims_pass_and_unreadable_output_does_not_evaluate() -> None:
    rails, _ = build()
    assert rails.turn().post_run(structured={"results": []}).verdict is Verdict.PASS
    report = rails.turn().post_run(structured="not json")
    assert report.verdict is Verdict.NOT_EVALUATED
    assert report.verdicts[0].reason == "not_json"
    assert report.escapes[0].reason is EscapeReason.DECLINED
    assert rails.turn().post_run(structured={"other": 1}).verdict is Verdict.NOT_EVALUATED


def test_bad_configuration_fails_at_construction() -> None:
    with pytest.raises(ConfigurationError):
        Capture({})
    with pytest.raises(ConfigurationError):
        Capture({"t": []})
    with pytest.raises(ConfigurationError):
        provenance(object())  # type: ignore[arg-type]
    with pytest.raises(ConfigurationError):
        provenance(Capture({"t": "id"}), not_found={})
