"""Tool allow-lists per phase and per tenant."""

from __future__ import annotations

import pytest

from guardrails import ConfigurationError, EscapeReason, Guardrails, Outcome, Verdict, tool
from guardrails.rules import allow_list


@tool
def search(query: str) -> str:
    """Search."""
    return query


@tool
def refund(order_id: str) -> str:
    """Refund."""
    return "refunded"


@tool
def export_data() -> str:
    """Export everything."""
    return "csv"


PHASES = {"browse": ["search"], "support": ["search", "refund"]}
TENANTS = {"acme": ["search", "refund", "export_data"], "small": ["search"]}


def engine(**options: object) -> Guardrails:
    rule = allow_list(by_phase=PHASES, by_tenant=TENANTS, **options)  # type: ignore[arg-type]
    return Guardrails([search, refund, export_data], [rule])


def test_a_tool_is_offered_only_when_phase_and_tenant_both_allow_it() -> None:
    assert engine().turn(tenant="acme", phase="support").pre_turn("").offered == (
        "search",
        "refund",
    )
    assert engine().turn(tenant="small", phase="support").pre_turn("").offered == ("search",)


def test_a_removal_is_a_reject_naming_the_removed_tools() -> None:
    decision = engine().turn(tenant="acme", phase="browse").pre_turn("")
    [record] = decision.verdicts
    assert record.verdict is Verdict.REJECT and record.reason == "not_allowed"
    assert record.evidence.detail == ["export_data", "refund"]


def test_all_candidates_allowed_is_a_pass() -> None:
    decision = engine().turn(tenant="acme", phase="support").pre_turn("", ["search", "refund"])
    assert decision.verdict is Verdict.PASS


@pytest.mark.parametrize(
    ("tenant", "phase", "reason"),
    [
        ("unknown", "browse", "tenant_not_configured"),
        ("acme", "unknown", "phase_not_configured"),
        (None, "browse", "tenant_not_configured"),
        ("acme", None, "phase_not_configured"),
    ],
)
def test_an_unknown_tenant_or_phase_fails_open_with_an_escape(
    tenant: str | None, phase: str | None, reason: str
) -> None:
    turn = engine().turn(tenant=tenant, phase=phase)
    decision = turn.pre_turn("")
    assert decision.offered == ("search", "refund", "export_data")
    assert decision.verdict is Verdict.NOT_EVALUATED
    assert decision.verdicts[0].reason == reason
    [escape] = decision.escapes
    assert escape.reason is EscapeReason.NOT_CONFIGURED and escape.guard == "allow_list"
    assert turn.call("export_data", {}).outcome is Outcome.OK


def test_fail_closed_offers_nothing_for_an_unknown_tenant() -> None:
    turn = engine(fail_closed=True).turn(tenant="unknown", phase="browse")
    decision = turn.pre_turn("")
    assert decision.offered == () and not decision.refused
    assert decision.verdict is Verdict.REJECT
    assert decision.escapes[0].reason is EscapeReason.NOT_CONFIGURED
    assert turn.call("search", {"query": "x"}).outcome is Outcome.UNAVAILABLE


def test_one_table_is_enough() -> None:
    rails = Guardrails([search, refund], [allow_list(by_tenant={"t": ["refund"]})])
    assert rails.turn(tenant="t").pre_turn("").offered == ("refund",)


def test_misconfiguration_fails_at_construction() -> None:
    with pytest.raises(ConfigurationError):
        allow_list()
    with pytest.raises(ConfigurationError):
        allow_list(by_phase={"browse": "search"})
    with pytest.raises(ConfigurationError):
        allow_list(by_phase=["browse"])  # type: ignore[arg-type]
