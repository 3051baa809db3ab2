"""Tool-call ceiling per session, across turns."""

from __future__ import annotations

import threading

import pytest
from hypothesis import example, given
from hypothesis import strategies as st

from guardrails import ConfigurationError, EscapeReason, Guardrails, Outcome, TurnContext, tool
from guardrails.rules import MemoryCounter, SessionCeiling


@tool
def ping() -> str:
    """Ping."""
    return "pong"


def test_calls_past_the_session_limit_get_limit_across_turns() -> None:
    rails = Guardrails([ping], hooks=[SessionCeiling(3)])
    outcomes = []
    for _ in range(2):
        turn = rails.turn(tenant="t", session="s1")
        outcomes += [turn.call("ping", {}).outcome for _ in range(2)]
    assert outcomes == [Outcome.OK] * 3 + [Outcome.LIMIT]
    other = rails.turn(tenant="t", session="s2")
    assert other.call("ping", {}).outcome is Outcome.OK


def test_sessions_of_different_tenants_are_counted_apart() -> None:
    rails = Guardrails([ping], hooks=[SessionCeiling(1)])
    assert rails.turn(tenant="a", session="s").call("ping", {}).outcome is Outcome.OK
    assert rails.turn(tenant="b", session="s").call("ping", {}).outcome is Outcome.OK
    assert rails.turn(tenant="a", session="s").call("ping", {}).outcome is Outcome.LIMIT


def test_no_session_fails_open_with_an_escape_or_closed_with_limit() -> None:
    open_result = Guardrails([ping], hooks=[SessionCeiling(1)]).turn().call("ping", {})
    assert open_result.outcome is Outcome.OK
    assert [e.reason for e in open_result.escapes] == [EscapeReason.NOT_CONFIGURED]
    closed = Guardrails([ping], hooks=[SessionCeiling(1, fail_closed=True)]).turn()
    assert closed.call("ping", {}).outcome is Outcome.LIMIT


class BrokenCounter:
    def incr(self, key: str, /) -> int:
        raise ConnectionError("store down")


def test_a_failing_counter_is_a_store_unavailable_escape() -> None:
    rails = Guardrails([ping], hooks=[SessionCeiling(1, BrokenCounter())])
    result = rails.turn(session="s").call("ping", {})
    assert result.outcome is Outcome.OK
    assert result.escapes[0].reason is EscapeReason.STORE_UNAVAILABLE


def test_memory_counter_is_atomic_under_threads() -> None:
    counter = MemoryCounter()
    threads = [
        threading.Thread(target=lambda: [counter.incr("k") for _ in range(1000)]) for _ in range(4)
    ]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert counter.get("k") == 4000


def test_bad_configuration_fails_at_construction() -> None:
    with pytest.raises(ConfigurationError):
        SessionCeiling(-1)
    with pytest.raises(ConfigurationError):
        SessionCeiling(True)
    with pytest.raises(ConfigurationError):
        SessionCeiling(1, object())  # type: ignore[arg-type]


def test_at_pre_turn_offers_nothing_once_the_session_ceiling_is_reached() -> None:
    ceiling = SessionCeiling(2)
    rails = Guardrails([ping], [ceiling.at_pre_turn()], hooks=[ceiling])
    first = rails.turn(session="s")
    assert first.pre_turn("").offered == ("ping",)
    first.call("ping", {})
    first.call("ping", {})
    second = rails.turn(session="s")
    decision = second.pre_turn("")
    assert decision.offered == () and not decision.refused
    assert decision.verdicts[0].reason == "ceiling_reached"


def test_at_pre_turn_without_session_or_readable_counter_fails_open() -> None:
    class WriteOnly:
        def incr(self, key: str, /) -> int:
            return 1

    for ceiling, session in ((SessionCeiling(1), None), (SessionCeiling(1, WriteOnly()), "s")):
        decision = Guardrails([ping], [ceiling.at_pre_turn()]).turn(session=session).pre_turn("")
        assert decision.offered == ("ping",)
        assert decision.escapes[0].reason is EscapeReason.NOT_CONFIGURED


@example(("a:b", "c"), ("a", "b:c"))
@example(("a%3A", "c"), ("a:", "c"))
@example((None, "s"), ("", "s"))
@given(
    st.tuples(st.none() | st.text(":%ab", max_size=6), st.text(":%ab", max_size=6)),
    st.tuples(st.none() | st.text(":%ab", max_size=6), st.text(":%ab", max_size=6)),
)
def test_distinct_tenant_and_session_pairs_never_share_a_counter_key(
    first: tuple[str | None, str], second: tuple[str | None, str]
) -> None:
    ceiling = SessionCeiling(1)
    a = ceiling.key(TurnContext(tenant=first[0], session=first[1]))
    b = ceiling.key(TurnContext(tenant=second[0], session=second[1]))
    same = (first[0] or "", first[1]) == (second[0] or "", second[1])
    assert (a == b) == same
