"""Microsoft Agent Framework: a real Agent run with an offline chat client, guarded and not."""

from __future__ import annotations

import os
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from guardrails import ConfigurationError, Guardrails, GuardResult, Outcome, TurnContext
from guardrails import guard as make_guard
from guardrails.rules.effects import Restrict
from guardrails.testing import MemoryRecorder
from guardrails.verdicts import model_sentence

if os.environ.get("GUARDRAILS_REQUIRE_FRAMEWORKS") == "1":
    import agent_framework as af
else:
    af = pytest.importorskip("agent_framework", reason="agent-framework-core is not installed")

from agent_framework.observability import ChatTelemetryLayer

from guardrails.integrations.agent_framework import guard, tool_from
from guardrails.integrations.scripted_models import chat_client, tool_results

SECRET = "token=sk-live-123"
BIG = "x" * 5_000


class ScriptedClient(
    af.FunctionInvocationLayer, af.ChatMiddlewareLayer, ChatTelemetryLayer, af.BaseChatClient
):  # type: ignore[misc]
    """Answers each request with the next scripted message; keeps what it was sent."""

    def __init__(self, *turns: Any) -> None:
        super().__init__()
        self.turns = list(turns)
        self.requests: list[tuple[list[Any], dict[str, Any]]] = []

    async def _inner_get_response(
        self, *, messages: Any, stream: bool, options: Any, **kw: Any
    ) -> Any:
        self.requests.append((list(messages), dict(options)))
        return af.ChatResponse(messages=[self.turns.pop(0)])


def calls(*wanted: tuple[str, dict[str, Any]]) -> Any:
    return af.Message(
        role="assistant",
        contents=[
            af.Content.from_function_call(call_id=f"c{i}", name=name, arguments=arguments)
            for i, (name, arguments) in enumerate(wanted)
        ],
    )


def answer(text: str = "done") -> Any:
    return af.Message(role="assistant", contents=[text])


def results_sent(client: ScriptedClient) -> dict[str, str]:
    """What the model was sent back for each call id, in its last request."""
    messages, _ = client.requests[-1]
    return {
        c.call_id: c.result for m in messages for c in m.contents if c.type == "function_result"
    }


@af.tool
def get_orders(status: str, account: str, limit: int = 10) -> str:
    """The account's orders."""
    return f"{account}:{status}:{limit}"


@af.tool
def explode() -> str:
    """Always fails."""
    raise RuntimeError(SECRET)


@af.tool
def dump_log() -> str:
    """A very long log."""
    return BIG


@af.tool
async def slow_echo(text: str) -> str:
    """An async tool."""
    return text.upper()


ALL = [get_orders, explode, dump_log, slow_echo]
SCRIPT = [
    ("get_orders", {"status": "open"}),
    ("get_orders", {}),
    ("get_orders", {"status": 3}),
    ("no_such_tool", {"a": 1}),
    ("get_orders", {"status": "open", "account": "someone-else"}),
    ("explode", {}),
    ("dump_log", {}),
    ("slow_echo", {"text": "hi"}),
]


def guarded(client: ScriptedClient, **engine: Any) -> tuple[Any, MemoryRecorder]:
    recorder = MemoryRecorder()
    rails = Guardrails(recorder=recorder, max_result_chars=1_000, **engine)
    agent = guard(
        af.Agent(client=client, tools=ALL),
        rails,
        tool_options={"get_orders": {"bind": {"account": "tenant"}}},
        context=TurnContext(tenant="acme"),
    )
    return agent, recorder


async def test_every_call_is_answered_by_tool_call() -> None:
    client = ScriptedClient(calls(*SCRIPT), answer())
    agent, recorder = guarded(client)
    response = await agent.run("show my orders")
    sent = results_sent(client)
    assert sent["c0"] == "acme:open:10"
    assert sent["c1"] == model_sentence(Outcome.INVALID_ARGS, ["status"])
    assert sent["c2"] == model_sentence(Outcome.INVALID_ARGS, ["status"])
    assert sent["c3"] == model_sentence(Outcome.UNAVAILABLE)
    assert sent["c4"] == model_sentence(Outcome.INVALID_ARGS)
    assert sent["c5"] == model_sentence(Outcome.ERROR)
    assert len(sent["c6"]) < 1_100 and sent["c6"].startswith("x")
    assert sent["c7"] == "HI"
    assert not any(SECRET in text or "no_such_tool" in text for text in sent.values())
    assert sorted(r.call_id for r in recorder.results) == [f"c{i}" for i in range(8)]
    assert response.text == "done"
    assert response.additional_properties["guardrails_post_run"].text == "done"


async def test_the_schema_is_the_tools_own_and_bound_parameters_are_hidden() -> None:
    rails = Guardrails()
    guard(
        af.Agent(client=ScriptedClient(), tools=[get_orders]),
        rails,
        tool_options={"get_orders": {"bind": {"account": "tenant"}}},
    )
    registered = rails.tools["get_orders"]
    assert registered.schema["required"] == ["status"]
    assert "account" not in registered.schema["properties"]
    assert tool_from(get_orders).schema["required"] == get_orders.parameters()["required"]


async def test_the_model_is_offered_the_schema_without_bound_parameters() -> None:
    client = ScriptedClient(answer())
    agent, _ = guarded(client)
    await agent.run("hello")
    shown = {t.name: t.parameters() for t in client.requests[0][1]["tools"]}
    assert sorted(shown) == ["dump_log", "explode", "get_orders", "slow_echo"]
    assert "account" not in shown["get_orders"]["properties"]
    assert shown["get_orders"]["required"] == ["status"]


async def test_a_per_turn_ceiling_answers_limit() -> None:
    client = ScriptedClient(calls(*[("slow_echo", {"text": str(i)}) for i in range(3)]), answer())
    agent, recorder = guarded(client, max_calls_per_turn=2)
    await agent.run("go")
    sent = results_sent(client)
    assert sorted(sent.values()) == sorted(["0", "1", model_sentence(Outcome.LIMIT)])
    assert recorder.outcomes.count(Outcome.LIMIT) == 1


async def test_each_run_is_a_new_turn_so_the_ceiling_starts_again() -> None:
    client = ScriptedClient(
        calls(("slow_echo", {"text": "a"})), answer(), calls(("slow_echo", {"text": "b"})), answer()
    )
    agent, recorder = guarded(client, max_calls_per_turn=1)
    await agent.run("one")
    await agent.run("two")
    assert recorder.outcomes == [Outcome.OK, Outcome.OK]


async def test_pre_turn_decides_what_each_request_offers() -> None:
    seen: list[str] = []

    @make_guard(at="pre_turn")
    def no_logs(request: Any) -> Any:
        seen.append(request.text.raw)
        if "logs" in request.text.raw:
            return GuardResult.passed()
        return GuardResult.rejected("no_logs", evidence=Restrict(frozenset({"dump_log"})))

    client = ScriptedClient(calls(("dump_log", {})), answer())
    recorder = MemoryRecorder()
    rails = Guardrails(guards=[no_logs], recorder=recorder)
    agent = guard(af.Agent(client=client, tools=[dump_log, slow_echo]), rails)
    await agent.run("hello")
    offered = [t.name for t in client.requests[0][1]["tools"]]
    assert offered == ["slow_echo"]
    assert results_sent(client)["c0"] == model_sentence(Outcome.UNAVAILABLE)
    client = ScriptedClient(answer())
    await guard(af.Agent(client=client, tools=[dump_log, slow_echo]), rails).run("my logs please")
    assert [t.name for t in client.requests[0][1]["tools"]] == ["dump_log", "slow_echo"]
    assert seen == ["hello", "my logs please"]


async def test_the_session_id_of_the_run_is_the_turns_session() -> None:
    client = ScriptedClient(calls(("slow_echo", {"text": "a"})), answer())
    seen: list[Any] = []
    rails = Guardrails()
    agent = guard(af.Agent(client=client, tools=[slow_echo]), rails, on_report=seen.append)
    session = agent.create_session(session_id="s-42")
    await agent.run("hello", session=session)
    assert seen[0].context.session == "s-42"


def test_options_for_a_tool_the_agent_lacks_are_rejected_naming_it() -> None:
    with pytest.raises(ConfigurationError, match="'transfer'"):
        guard(
            af.Agent(client=ScriptedClient(), tools=[slow_echo]),
            Guardrails(),
            tool_options={"transfer": {}},
        )


def test_a_binding_that_is_not_a_parameter_fails_when_guarding() -> None:
    with pytest.raises(ConfigurationError, match="'get_orders'"):
        guard(
            af.Agent(client=ScriptedClient(), tools=[get_orders]),
            Guardrails(),
            tool_options={"get_orders": {"bind": {"nope": "tenant"}}},
        )


async def test_without_the_adapter_the_framework_leaks_and_uses_what_the_model_chose() -> None:
    client = ScriptedClient(calls(*SCRIPT), answer())
    agent = af.Agent(
        client=client,
        tools=ALL,
        default_options={},
    )
    client.function_invocation_configuration["include_detailed_errors"] = True
    await agent.run("show my orders")
    sent = results_sent(client)
    assert sent["c1"].startswith("Error: Argument parsing failed.")
    assert "input_value=3" in sent["c2"]
    assert SECRET in sent["c5"]
    assert "no_such_tool" in sent["c3"]
    assert sent["c4"] == "someone-else:open:10"
    assert sent["c6"] == BIG


async def test_a_streamed_run_is_guarded_and_checked_at_its_end() -> None:
    client = chat_client([("slow_echo", {"text": "hi"}), ("no_such_tool", {})], "done")
    reports: list[Any] = []
    agent = guard(
        af.Agent(client=client, tools=[slow_echo]), Guardrails(), on_report=reports.append
    )
    stream = agent.run("hello", stream=True)
    async for _ in stream:
        pass
    final = await stream.get_final_response()
    assert tool_results(client) == {"call_0": "HI", "call_1": model_sentence(Outcome.UNAVAILABLE)}
    assert final.text == "done"
    assert [r.text for r in reports] == ["done"]


async def test_a_refused_turn_never_calls_the_model() -> None:
    @make_guard(at="pre_turn")
    def no_deletions(request: Any) -> Any:
        if "delete" in request.text.raw:
            return GuardResult.rejected("deletion_requested")
        return GuardResult.passed()

    client = chat_client("done")
    agent = guard(af.Agent(client=client, tools=[slow_echo]), Guardrails(guards=[no_deletions]))
    response = await agent.run("delete everything")
    assert client.requests == []
    assert response.messages == []
    assert response.additional_properties["guardrails_refusal"] == "deletion_requested"


JSON_VALUES = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=8),
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=5), inner, max_size=3)
    ),
    max_leaves=8,
)
MODEL_ARGUMENTS = st.one_of(
    st.fixed_dictionaries({"status": st.text(max_size=8)}),
    st.fixed_dictionaries(
        {"status": st.text(max_size=8)}, optional={"limit": JSON_VALUES, "account": JSON_VALUES}
    ),
    st.dictionaries(
        st.sampled_from(["status", "limit", "account", "other"]), JSON_VALUES, max_size=4
    ),
)
SENTENCES = {model_sentence(o) for o in Outcome if o is not Outcome.OK}


def test_whatever_arguments_the_model_sends_it_reads_a_result_or_a_fixed_sentence() -> None:
    import asyncio

    seen: set[Outcome] = set()

    @settings(max_examples=80, deadline=None)
    @given(arguments=MODEL_ARGUMENTS)
    def check(arguments: dict[str, Any]) -> None:
        client = ScriptedClient(calls(("get_orders", arguments)), answer())
        agent, recorder = guarded(client)
        asyncio.run(agent.run("orders"))
        [result] = recorder.results
        seen.add(result.outcome)
        sent = results_sent(client)["c0"]
        assert sent == result.content
        if result.outcome is Outcome.OK:
            assert sent.startswith("acme:")
        else:
            assert sent.split(" Check these parameters:")[0].split(" Send only")[0] in SENTENCES

    check()
    assert {Outcome.OK, Outcome.INVALID_ARGS} <= seen


async def test_a_secret_reaches_an_action_tool_and_nothing_else() -> None:
    from guardrails import Secret

    seen: list[str] = []

    @af.tool
    def charge(amount: int, api_key: str) -> str:
        """Charge the card."""
        seen.append(api_key)
        return f"charged {amount}"

    client = ScriptedClient(calls(("charge", {"amount": 5})), answer())
    recorder = MemoryRecorder()
    rails = Guardrails(recorder=recorder, secrets=lambda name: "sk-secret-1")
    options = {"charge": {"bind": {"api_key": Secret("stripe")}, "effect": True}}
    await guard(af.Agent(client=client, tools=[charge]), rails, tool_options=options).run("pay")
    assert seen == ["sk-secret-1"]
    assert results_sent(client)["c0"] == "charged 5"
    assert "sk-secret-1" not in repr(recorder.results)
    assert "api_key" not in str([t.parameters() for t in client.requests[0][1]["tools"]])
