"""Microsoft Agent Framework: a real Agent run with an offline chat client, guarded and not."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from tests.integrations import _frameworks as fw

af = fw.need("agent_framework")

from guardrails import ConfigurationError, Guardrails, Outcome, tool  # noqa: E402
from guardrails.integrations.agent_framework import guard, tool_from  # noqa: E402
from guardrails.integrations.scripted_models import chat_client, tool_results  # noqa: E402
from guardrails.testing import MemoryRecorder  # noqa: E402
from guardrails.verdicts import model_sentence  # noqa: E402

# The shared scenario's tools, as the Agent Framework wraps them, and an async one.
lookup, get_orders, explode, dump, shout = (
    af.tool(f) for f in (fw.lookup, fw.get_orders, fw.explode, fw.dump, fw.shout)
)
ALL = [lookup, get_orders, explode, dump, shout]
# The Agent Framework sends the model a result's content with no error flag.
SENT = {call_id: content for call_id, (content, _) in fw.EXPECTED.items()}


def offered(client: Any, request: int = 0) -> dict[str, Any]:
    """The tools of a request, with the parameters the model was shown."""
    return {t.name: t.parameters() for t in client.requests[request][1]["tools"]}


def guarded(client: Any, rails: Guardrails, tools: list[Any] = ALL, **options: Any) -> Any:
    agent = af.Agent(client=client, tools=tools)
    return guard(agent, rails, **{"tool_options": fw.BIND, "context": fw.context(), **options})


async def test_every_call_is_answered_by_tool_call() -> None:
    client = chat_client(*fw.STEPS, fw.FINAL)
    recorder = MemoryRecorder()
    response = await guarded(client, fw.rails(recorder=recorder)).run("my orders")
    sent = tool_results(client)
    assert sent == SENT
    assert not any(fw.SECRET in text or "nope" in text for text in sent.values())
    assert {r.call_id: r.outcome for r in recorder.results} == fw.OUTCOMES
    assert response.text == fw.FINAL
    assert response.additional_properties["guardrails_post_run"].text == fw.FINAL


async def test_the_schema_is_the_tools_own_and_bound_parameters_are_hidden() -> None:
    rails = Guardrails()
    guard(af.Agent(client=chat_client(), tools=ALL), rails, tool_options=fw.BIND)
    assert "account_id" not in rails.tools["get_orders"].schema["properties"]
    assert rails.tools["lookup"].schema["required"] == ["order_id"]
    assert tool_from(lookup).schema["required"] == lookup.parameters()["required"]


async def test_the_model_is_offered_the_schema_without_bound_parameters() -> None:
    client = chat_client(fw.FINAL)
    await guarded(client, fw.rails()).run("hello")
    shown = offered(client)
    assert sorted(shown) == ["dump", "explode", "get_orders", "lookup", "shout"]
    assert "account_id" not in shown["get_orders"]["properties"]
    assert shown["lookup"]["required"] == ["order_id"]


async def test_a_per_turn_ceiling_answers_limit() -> None:
    client = chat_client([("shout", {"text": str(i)}) for i in range(3)], fw.FINAL)
    recorder = MemoryRecorder()
    await guarded(client, Guardrails(max_calls_per_turn=2, recorder=recorder)).run("go")
    sent = tool_results(client)
    assert sorted(sent.values()) == sorted(["0", "1", model_sentence(Outcome.LIMIT)])
    assert recorder.outcomes.count(Outcome.LIMIT) == 1


async def test_each_run_is_a_new_turn_so_the_ceiling_starts_again() -> None:
    client = chat_client([("shout", {"text": "a"})], "one", [("shout", {"text": "b"})], "two")
    recorder = MemoryRecorder()
    agent = guarded(client, Guardrails(max_calls_per_turn=1, recorder=recorder))
    await agent.run("one")
    await agent.run("two")
    assert recorder.outcomes == [Outcome.OK, Outcome.OK]


async def test_pre_turn_decides_what_each_request_offers() -> None:
    rails = fw.trigger_rails()
    client = chat_client([("d1", "dump", {})], fw.FINAL)
    await guarded(client, rails, tool_options=None).run(fw.LOG_PROMPT)
    assert sorted(offered(client)) == ["explode", "get_orders", "lookup", "shout"]
    assert tool_results(client)["d1"] == fw.EXPECTED["c4"][0]
    # The same engine, another run: pre_turn reads this run's input.
    client = chat_client(fw.FINAL)
    await guard(af.Agent(client=client, tools=ALL), rails).run("hello")
    assert sorted(offered(client)) == ["dump", "explode", "get_orders", "lookup", "shout"]


async def test_the_session_id_of_the_run_is_the_turns_session() -> None:
    client = chat_client([("shout", {"text": "a"})], fw.FINAL)
    seen: list[Any] = []
    agent = guard(af.Agent(client=client, tools=[shout]), Guardrails(), on_report=seen.append)
    session = agent.create_session(session_id="s-42")
    await agent.run("hello", session=session)
    assert seen[0].context.session == "s-42"


def test_options_for_a_tool_the_agent_lacks_are_rejected_naming_it() -> None:
    with pytest.raises(ConfigurationError, match="'transfer'"):
        guarded(chat_client(), Guardrails(), tool_options={"transfer": {}})


def test_a_binding_that_is_not_a_parameter_fails_when_guarding() -> None:
    with pytest.raises(ConfigurationError, match="'get_orders'"):
        guarded(chat_client(), Guardrails(), tool_options={"get_orders": {"bind": {"nope": "x"}}})


def test_a_tool_the_application_registered_is_kept_and_options_for_it_are_refused() -> None:
    mine = tool(fw.lookup)
    rails = Guardrails([mine])
    guard(af.Agent(client=chat_client(), tools=ALL), rails)
    assert rails.tools["lookup"] is mine
    with pytest.raises(ConfigurationError, match="'lookup' is already registered"):
        guard(af.Agent(client=chat_client(), tools=ALL), rails, tool_options={"lookup": {}})


async def test_without_the_adapter_the_framework_leaks_and_uses_what_the_model_chose() -> None:
    client = chat_client(fw.FIRST, fw.FINAL)
    agent = af.Agent(client=client, tools=ALL, default_options={})
    client.function_invocation_configuration["include_detailed_errors"] = True
    await agent.run("my orders")
    sent = tool_results(client)
    assert sent["c2"].startswith("Error: Argument parsing failed.")
    assert "input_value=7" in sent["c3"]
    assert "nope" in sent["c4"]
    assert sent["c5"] == "acc-666:open"
    assert fw.SECRET in sent["c6"]
    assert sent["c7"] == fw.dump()


async def test_a_streamed_run_is_guarded_and_checked_at_its_end() -> None:
    client = chat_client([("shout", {"text": "hi"}), ("no_such_tool", {})], "done")
    reports: list[Any] = []
    agent = guard(af.Agent(client=client, tools=[shout]), Guardrails(), on_report=reports.append)
    stream = agent.run("hello", stream=True)
    async for _ in stream:
        pass
    final = await stream.get_final_response()
    assert tool_results(client) == {"call_0": "HI", "call_1": model_sentence(Outcome.UNAVAILABLE)}
    assert final.text == "done"
    assert [r.text for r in reports] == ["done"]


async def test_a_refused_turn_never_calls_the_model() -> None:
    client = chat_client(fw.FINAL)
    response = await guarded(client, fw.trigger_rails(), tool_options=None).run(fw.REFUSED_PROMPT)
    assert client.requests == []
    assert response.messages == []
    assert response.additional_properties["guardrails_refusal"] == fw.REFUSAL


def test_whatever_arguments_the_model_sends_it_reads_a_result_or_a_fixed_sentence() -> None:
    def answer(arguments: Any) -> tuple[str, None]:
        client = chat_client([("h1", "lookup", arguments)], fw.FINAL)
        recorder = MemoryRecorder()
        asyncio.run(guarded(client, fw.rails(recorder=recorder)).run("orders"))
        [result] = recorder.results
        sent = tool_results(client)["h1"]
        assert sent == result.content
        return sent, None  # the Agent Framework sends no error flag

    # Its schema does not forbid extra keys (its validator drops them).
    fw.answers_to_any_lookup_arguments(answer, text=False, closed=False, examples=80)


async def test_a_secret_reaches_an_action_tool_and_nothing_else() -> None:
    client = chat_client([("s1", "charge", {"amount": 5})], fw.FINAL)
    recorder = MemoryRecorder()
    rails = fw.secret_rails(recorder=recorder)
    await guarded(client, rails, tools=[af.tool(fw.charge)], tool_options=fw.SECRETS).run("pay")
    assert tool_results(client)["s1"] == "charged 5.0"
    assert fw.API_KEY not in repr(recorder.results)
    assert "api_key" not in str(offered(client))
