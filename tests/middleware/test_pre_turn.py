"""The pre_turn choke-point: what is offered, refusals, escapes, formats, records."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from guardrails import (
    EscapeReason,
    Guardrails,
    GuardResult,
    Outcome,
    Tool,
    UsageError,
    Verdict,
    guard,
    tool,
)
from guardrails.middleware.pre_turn import PreTurnRequest, decide, tool_name
from guardrails.rules import Restrict, allow_list, trigger
from guardrails.testing import MemoryRecorder
from guardrails.text import Text, user_text
from guardrails.verdicts import ChokePoint


@tool
def search(query: str) -> str:
    """Search the catalogue."""
    return f"results for {query}"


@tool
def refund(order_id: str) -> str:
    """Refund an order."""
    return "refunded"


@tool
def delete_account() -> str:
    """Delete the account."""
    return "deleted"


def rails(*guards: Any, recorder: MemoryRecorder | None = None) -> Guardrails:
    return Guardrails([search, refund, delete_account], guards, recorder=recorder)


def test_without_pre_turn_guards_every_candidate_is_offered_and_not_evaluated() -> None:
    turn = rails().turn()
    decision = turn.pre_turn("hello")
    assert decision.offered == ("search", "refund", "delete_account")
    assert decision.verdict is Verdict.NOT_EVALUATED
    assert not decision.refused


def test_tools_come_back_in_the_callers_format() -> None:
    engine = rails(allow_list(by_phase={"browse": ["search"]}))
    for candidates in (
        [search.to_anthropic(), refund.to_anthropic()],
        [search.to_openai(), refund.to_openai()],
        [search.to_mcp(), refund.to_mcp()],
        ["search", "refund"],
        [search, refund],
    ):
        decision = engine.turn(phase="browse").pre_turn("hi", candidates)
        assert decision.tools == (candidates[0],)
        assert decision.offered == ("search",)


def test_what_was_not_offered_is_unavailable_at_tool_call() -> None:
    turn = rails(allow_list(by_phase={"browse": ["search"]})).turn(phase="browse")
    turn.pre_turn("hi")
    assert turn.call("search", {"query": "x"}).outcome is Outcome.OK
    result = turn.call("refund", {"order_id": "1"})
    assert result.outcome is Outcome.UNAVAILABLE
    assert result.reason == "not_offered"


def test_a_restrict_that_names_a_gate_puts_its_reject_on_a_call_of_the_tool() -> None:
    @guard(at="pre_turn")
    def money_gate(request: PreTurnRequest) -> GuardResult:
        gates = {"refund": "refund_gate", "delete_account": "not_removed_here"}
        return GuardResult.rejected("no_money_words", evidence=Restrict({"refund"}, gates=gates))

    @guard(at="pre_turn")
    def quiet(request: PreTurnRequest) -> GuardResult:
        return GuardResult.rejected("quiet", evidence=Restrict({"refund"}))

    @guard(at="pre_turn")
    def other(request: PreTurnRequest) -> GuardResult:
        return GuardResult.rejected("other", evidence=Restrict({"delete_account"}))

    turn = rails(money_gate, quiet, other).turn()
    turn.pre_turn("hi")
    assert turn.call("delete_account", {}).verdicts == ()  # withheld, not by the gate
    refused = turn.call("refund", {"order_id": "1"})
    assert (refused.outcome, refused.reason) == (Outcome.UNAVAILABLE, "not_offered")
    assert [(v.guard, v.choke_point, v.verdict, v.reason) for v in refused.verdicts] == [
        ("refund_gate", ChokePoint.TOOL_CALL, Verdict.REJECT, "no_money_words")
    ]
    assert turn.call("search", {"query": "x"}).verdicts == ()
    turn.offer(["search"])  # offered again by the application: the gate's record stays
    assert turn.call("refund", {"order_id": "1"}).verdicts[0].guard == "refund_gate"


def test_a_reject_without_restrict_refuses_the_turn_with_its_reason_as_code() -> None:
    @guard(at="pre_turn")
    def no_legal_advice(request: PreTurnRequest) -> GuardResult | Verdict:
        if "lawsuit" in request.text.normalised:
            return GuardResult.rejected("legal_topic")
        return Verdict.PASS

    turn = rails(no_legal_advice).turn()
    decision = turn.pre_turn("I will file a LAWSUIT")
    assert decision.refused
    assert decision.refusal is not None
    assert decision.refusal.code == "legal_topic"
    assert decision.refusal.guard == "no_legal_advice"
    assert decision.offered == () and decision.tools == ()
    assert turn.call("search", {"query": "x"}).outcome is Outcome.UNAVAILABLE


def test_a_raising_pre_turn_guard_is_an_escape_and_the_offer_stands() -> None:
    @guard(at="pre_turn")
    def broken(request: PreTurnRequest) -> Verdict:
        raise RuntimeError("secret detail")

    recorder = MemoryRecorder()
    decision = rails(broken, recorder=recorder).turn().pre_turn("hi")
    assert decision.offered == ("search", "refund", "delete_account")
    assert decision.verdict is Verdict.NOT_EVALUATED
    [escape] = decision.escapes
    assert (escape.guard, escape.choke_point, escape.reason) == (
        "broken",
        ChokePoint.PRE_TURN,
        EscapeReason.RAISED,
    )
    assert recorder.events == [("pre_turn", decision)]


def test_a_raising_fail_closed_guard_refuses_the_turn() -> None:
    @guard(at="pre_turn", fail_closed=True)
    def broken(request: PreTurnRequest) -> Verdict:
        raise RuntimeError("down")

    decision = rails(broken).turn().pre_turn("hi")
    assert decision.refused and decision.offered == ()
    assert decision.escapes[0].reason is EscapeReason.RAISED


def test_an_observe_mode_reject_changes_nothing_and_is_an_escape() -> None:
    decision = (
        rails(trigger(["refund"], remove=["refund"], observe=True)).turn().pre_turn("a refund")
    )
    assert "refund" in decision.offered
    assert decision.escapes[0].reason is EscapeReason.OBSERVE_ONLY


def test_tool_call_guards_do_not_run_at_pre_turn() -> None:
    seen: list[Any] = []

    @guard
    def at_tool_call(call: Any) -> Verdict:
        seen.append(call)
        return Verdict.PASS

    rails(at_tool_call).turn().pre_turn("hi")
    assert seen == []


def test_withheld_names_every_guard_that_removed_a_tool() -> None:
    engine = rails(
        trigger(["refund"], remove=["refund"], name="money"),
        allow_list(by_tenant={"acme": ["search"]}),
    )
    decision = engine.turn(tenant="acme").pre_turn("refund please")
    assert decision.offered == ("search",)
    assert decision.withheld == {
        "refund": ("allow_list", "money"),
        "delete_account": ("allow_list",),
    }


async def test_apre_turn_matches_pre_turn() -> None:
    @guard(at="pre_turn")
    async def async_rule(request: PreTurnRequest) -> GuardResult:
        return GuardResult.rejected("x", evidence=Restrict(remove=frozenset({"delete_account"})))

    engine = rails(async_rule, trigger(["refund"], remove=["refund"]))
    turn = engine.turn()
    decision = await turn.apre_turn("refund now")
    assert decision.offered == ("search",)
    assert (await turn.acall("refund", {"order_id": "1"})).outcome is Outcome.UNAVAILABLE


async def test_sync_and_async_pre_turn_decide_the_same() -> None:
    engine = rails(trigger(["refund"], remove=["refund"]), allow_list(by_tenant={"t": ["refund"]}))
    for text, tenant in (("refund", "t"), ("hello", "t"), ("refund", "unknown")):
        sync = engine.turn(tenant=tenant).pre_turn(text)
        asynchronous = await engine.turn(tenant=tenant).apre_turn(text)
        assert (sync.offered, sync.refusal, sync.verdict, sync.withheld) == (
            asynchronous.offered,
            asynchronous.refusal,
            asynchronous.verdict,
            asynchronous.withheld,
        )


def test_empty_input_is_evaluated_and_offers_everything() -> None:
    engine = rails(trigger(["refund"], remove=["refund"]))
    for empty in ("", [], None):
        decision = engine.turn().pre_turn(empty)
        assert decision.offered == ("search", "refund", "delete_account")
        assert decision.verdict is Verdict.PASS


def test_a_10_mb_input_is_scanned() -> None:
    text = ("lorem ipsum dolor sit amet " * 400_000)[:10_000_000] + " refund"
    decision = rails(trigger(["refund"], remove=["refund"])).turn().pre_turn(text)
    assert "refund" not in decision.offered


def test_input_of_the_wrong_shape_is_a_usage_error() -> None:
    turn = rails().turn()
    with pytest.raises(UsageError):
        turn.pre_turn(42)
    with pytest.raises(UsageError):
        turn.pre_turn("hi", "search")
    with pytest.raises(UsageError):
        turn.pre_turn("hi", [{"description": "no name"}])


def test_tool_name_reads_every_format() -> None:
    for item in (search, "search", search.to_anthropic(), search.to_openai(), search.to_mcp()):
        assert tool_name(item) == "search"
    assert tool_name(search.to_openai()["function"]) == "search"


def test_duplicate_candidates_are_offered_once() -> None:
    decision = rails().turn().pre_turn("hi", ["search", "search", search])
    assert decision.offered == ("search",)
    assert isinstance(decision.tools[0], str)
    assert not isinstance(decision.tools[0], Tool)


_names = st.lists(st.sampled_from(["a", "b", "c", "d"]), unique=True)


def _record(evidence: Any, verdict: Verdict = Verdict.REJECT, name: str = "g") -> Any:
    from guardrails import VerdictRecord

    return (VerdictRecord(name, ChokePoint.PRE_TURN, verdict, "code", evidence), None, ())


@given(
    st.lists(
        st.tuples(
            st.sampled_from(list(Verdict)),
            st.one_of(
                st.none(),
                st.builds(Restrict, remove=st.frozensets(st.sampled_from("abcd"))),
                st.builds(
                    Restrict,
                    only=st.frozensets(st.sampled_from("abcd")),
                ),
            ),
            st.sampled_from(["g1", "g2", "g3"]),
        ),
        max_size=5,
    ),
    _names,
)
def test_decide_is_order_independent(entries: list[Any], names: list[str]) -> None:
    outcomes = [_record(e, v, n) for v, e, n in entries]
    offered, refusal, withheld = decide(names, outcomes)
    offered2, refusal2, withheld2 = decide(names, list(reversed(outcomes)))
    assert offered == offered2 and refusal == refusal2 and withheld == withheld2
    assert set(offered) <= set(names)
    assert offered == [n for n in names if n in offered]
    if refusal is not None:
        assert offered == []


# -- the user's text ---------------------------------------------------------------


def test_user_text_of_anthropic_messages_keeps_text_blocks_only() -> None:
    messages = [
        {"role": "user", "content": "first"},
        {"role": "assistant", "content": [{"type": "text", "text": "not the user"}]},
        {
            "role": "user",
            "content": [
                {"type": "tool_result", "tool_use_id": "t1", "content": "tool output"},
                {"type": "image", "source": {"type": "base64", "media_type": "image/png"}},
                {"type": "text", "text": "second"},
                {"type": "document", "source": {}},
            ],
        },
    ]
    assert user_text(messages) == "first\nsecond"
    assert user_text(messages, last_only=True) == "second"


def test_user_text_of_openai_chat_and_responses_input() -> None:
    chat = [
        {"role": "system", "content": "be nice"},
        {"role": "user", "content": [{"type": "text", "text": "hi"}, {"type": "image_url"}]},
        {"role": "tool", "content": "42", "tool_call_id": "c1"},
    ]
    assert user_text(chat) == "hi"
    responses = [
        {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "yo"}]},
        {"type": "function_call_output", "call_id": "c1", "output": "x"},
    ]
    assert user_text(responses) == "yo"
    with pytest.raises(UsageError):
        user_text([{"no": "role"}])
    with pytest.raises(UsageError):
        user_text([42])


def test_user_text_reads_sdk_message_objects() -> None:
    from anthropic.types import MessageParam, TextBlock

    block = TextBlock(type="text", text="from an object")
    message: MessageParam = {"role": "user", "content": [block]}  # type: ignore[list-item]
    assert user_text([message]) == "from an object"
    assert user_text({"role": "user", "content": "one message"}) == "one message"


def test_text_normalises_nfkc_and_casefold_once() -> None:
    text = Text("ＲＥＦＵＮＤ Straße")
    assert text.normalised == "refund strasse"
    assert text.words == ["refund", "strasse"]
    ascii_text = Text("Refund, NOW!")
    assert ascii_text.words == ["refund", "now"]
    assert Text("“Café” — OK").word_bytes.split() == [b"caf\xc3\xa9", b"ok"]


def test_mcp_sdk_tool_objects_are_filtered_and_returned_as_given() -> None:
    from mcp.types import Tool as McpTool

    listed = [
        McpTool(name="search", inputSchema={"type": "object", "properties": {}}),
        McpTool(name="refund", inputSchema={"type": "object", "properties": {}}),
    ]
    turn = rails(trigger(["refund"], remove=["refund"])).turn()
    decision = turn.pre_turn("a refund please", listed)
    assert decision.tools == (listed[0],)
    assert decision.tools[0] is listed[0]
