"""A guard scoped to tools (``@guard(tools=[...])``): checked at once when the engine
knows its tools, waiting for them when an adapter registers them later."""

from __future__ import annotations

import asyncio
import logging

import pytest

from guardrails import ConfigurationError, Guardrails, Invocation, Verdict, guard, tool


@tool
def transfer(amount: float) -> str:
    """Move money."""
    return "moved"


@tool
def lookup(q: str) -> str:
    """Look something up."""
    return "found"


def _limit() -> object:
    @guard(outcome="limit", tools=["transfer"])
    def under_limit(call: Invocation) -> Verdict:
        return Verdict.REJECT if call.arguments["amount"] > 100 else Verdict.PASS

    return under_limit


def test_a_scope_naming_a_tool_registered_later_waits_for_it() -> None:
    rails = Guardrails(guards=[_limit()])  # the adapter path: no tool yet
    assert dict(rails.pending_scopes) == {"under_limit": frozenset({"transfer"})}
    rails.add_tool(lookup)
    assert dict(rails.pending_scopes) == {"under_limit": frozenset({"transfer"})}
    rails.add_tool(transfer)
    assert dict(rails.pending_scopes) == {}
    refused = rails.call("transfer", {"amount": 101})
    assert (refused.outcome, refused.reason) == ("limit", "guard")
    assert rails.call("transfer", {"amount": 100}).outcome == "ok"
    assert [v.guard for v in rails.call("lookup", {"q": "x"}).verdicts] == []


@pytest.mark.parametrize("scope", ["transfr", "Transfer", "transfer ", "transfers"])
def test_a_misspelled_scope_fails_at_construction_when_the_tools_are_given(scope: str) -> None:
    g = guard(lambda c: Verdict.PASS, name="g", tools=[scope])
    with pytest.raises(ConfigurationError) as caught:
        Guardrails([transfer, lookup], [g])
    assert str(caught.value).startswith("guard 'g' (")
    assert str(caught.value).endswith(f"unknown tool {scope!r}")


def test_add_guard_checks_at_once_when_the_engine_has_tools() -> None:
    rails = Guardrails([lookup])
    with pytest.raises(ConfigurationError, match="unknown tool 'transfer'"):
        rails.add_guard(_limit())  # type: ignore[arg-type]
    empty = Guardrails()
    empty.add_guard(_limit())  # type: ignore[arg-type]
    assert dict(empty.pending_scopes) == {"under_limit": frozenset({"transfer"})}


def test_a_name_never_registered_is_logged_once_at_the_end_of_the_first_turn(
    caplog: pytest.LogCaptureFixture,
) -> None:
    rails = Guardrails(guards=[_limit(), guard(lambda c: Verdict.PASS, name="g", tools=["a", "b"])])
    rails.add_tool(transfer)
    turn = rails.turn()
    assert caplog.records == []  # a run may still register its tools
    with caplog.at_level(logging.WARNING, logger="guardrails"):
        turn.post_run("done")
        rails.turn().post_run("done")  # once, not at every turn
    messages = [r.getMessage() for r in caplog.records]
    assert len(messages) == 2
    for name, message in zip("ab", messages, strict=True):
        assert message.startswith("guard 'g' (")
        assert message.endswith(
            f"is scoped to tool {name!r}, which was not registered by the end of the first "
            "turn: the guard applies to it only once a tool of that name is registered"
        )
    assert dict(rails.pending_scopes) == {"g": frozenset({"a", "b"})}


def test_nothing_is_logged_when_every_scope_arrived(caplog: pytest.LogCaptureFixture) -> None:
    rails = Guardrails(guards=[_limit()])
    rails.add_tool(transfer)
    with caplog.at_level(logging.WARNING, logger="guardrails"):
        rails.turn().end()
    assert caplog.records == []


def test_a_guard_scoped_to_a_framework_tool_guards_it_through_the_adapter() -> None:
    pytest.importorskip("pydantic_ai")
    from pydantic_ai import Agent
    from pydantic_ai.messages import ModelResponse, TextPart, ToolCallPart, ToolReturnPart
    from pydantic_ai.models.function import FunctionModel

    from guardrails.integrations import pydantic_ai

    def move(amount: float) -> str:
        """Move money (the framework's tool)."""
        return "moved"

    def model(messages: list[object], info: object) -> ModelResponse:
        if len(messages) == 1:
            return ModelResponse(
                parts=[
                    ToolCallPart("move", {"amount": 5000}, tool_call_id="c1"),
                    ToolCallPart("move", {"amount": 5}, tool_call_id="c2"),
                ]
            )
        return ModelResponse(parts=[TextPart("Done.")])

    @guard(outcome="limit", tools=["move"])
    def under_limit(call: Invocation) -> Verdict:
        return Verdict.REJECT if call.arguments["amount"] > 100 else Verdict.PASS

    rails = Guardrails(guards=[under_limit])  # raised "unknown tool 'move'" before
    agent = Agent(FunctionModel(model), tools=[move])
    result = asyncio.run(agent.run("move", capabilities=[pydantic_ai.capability(rails)]))
    answers = {
        p.tool_call_id: p.content
        for m in result.all_messages()
        for p in m.parts
        if isinstance(p, ToolReturnPart)
    }
    assert answers == {"c1": "A usage limit was reached. Do not retry this call.", "c2": "moved"}
    assert dict(rails.pending_scopes) == {}
