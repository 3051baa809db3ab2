"""OpenAI Agents SDK: real ``Runner`` runs with ``ScriptedModel``, guarded by ``guard()``."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from tests.integrations import _frameworks as fw

fw.need("agents")

from agents import (  # noqa: E402
    Agent,
    AgentHooks,
    FunctionTool,
    InputGuardrailTripwireTriggered,
    ModelBehaviorError,
    Runner,
    function_tool,
    set_tracing_disabled,
)
from agents.testing import ScriptedModel, assistant_message, function_call  # noqa: E402

from guardrails import ConfigurationError, DuplicateNameError, Guardrails, Turn  # noqa: E402
from guardrails.integrations import openai_agents  # noqa: E402
from guardrails.testing import MemoryRecorder  # noqa: E402

set_tracing_disabled(True)


def scripted(*steps: list[tuple[str, str, dict[str, Any]]], final: str = fw.FINAL) -> ScriptedModel:
    return ScriptedModel(
        [
            *[[function_call(n, a, call_id=i) for i, n, a in step] for step in steps],
            [assistant_message(final)],
        ]
    )


def tools() -> list[FunctionTool]:
    return [function_tool(f) for f in (fw.lookup, fw.get_orders, fw.explode, fw.dump)]


def outputs(model: ScriptedModel) -> dict[str, str]:
    """The function_call_output items the model was sent last (this API has no error flag)."""
    return {
        i["call_id"]: i["output"]
        for i in model.calls[-1].input
        if isinstance(i, dict) and i.get("type") == "function_call_output"
    }


SENT = {call_id: content for call_id, (content, _) in fw.EXPECTED.items()}
context = fw.context


async def test_the_model_is_sent_our_outcomes_and_sentences_only() -> None:
    model = scripted(*fw.STEPS)
    reports: list[Any] = []
    agent = openai_agents.guard(
        Agent(name="support", tools=tools(), model=model),
        fw.rails(),
        tool_options=fw.BIND,
        on_report=reports.append,
    )
    result = await Runner.run(
        agent, "my orders", context=context(), run_config=openai_agents.run_config()
    )
    assert result.final_output == fw.FINAL
    assert outputs(model) == SENT
    [report] = reports
    assert report.text == fw.FINAL


def test_sync_run_sends_the_same() -> None:
    model = scripted(*fw.STEPS)
    agent = openai_agents.guard(
        Agent(name="support", tools=tools(), model=model), fw.rails(), tool_options=fw.BIND
    )
    with fw.default_loop_closed():
        Runner.run_sync(
            agent, "my orders", context=context(), run_config=openai_agents.run_config()
        )
    assert outputs(model) == SENT


async def test_without_guard_an_unknown_tool_ends_the_run_and_the_model_picks_the_account() -> None:
    model = scripted([fw.FIRST[4]], [fw.FIRST[3]])
    agent = Agent(name="support", tools=tools(), model=model)
    with pytest.raises(ModelBehaviorError, match="nope"):
        await Runner.run(agent, "my orders")
    assert outputs(model)["c5"] == "acc-666:open"


async def test_the_offered_schema_hides_bound_parameters_and_keeps_the_real_required() -> None:
    model = scripted([("c1", "lookup", {"order_id": "o-1"})])
    engine = fw.rails()
    agent = openai_agents.guard(
        Agent(name="support", tools=tools(), model=model), engine, tool_options=fw.BIND
    )
    await Runner.run(agent, "hi", context=context())
    offered = {t.name: t.params_json_schema for t in model.calls[0].tools}
    assert "account_id" not in offered["get_orders"]["properties"]
    # Strict mode lists every property as required for the model ...
    assert offered["lookup"]["required"] == ["order_id", "verbose"]
    # ... while tool_call requires what the function requires.
    assert engine.tools["lookup"].schema["required"] == ["order_id"]


async def test_pre_turn_withholds_tools_and_refuses_turns_as_an_input_guardrail() -> None:
    engine = fw.trigger_rails()
    model = scripted([("d1", "dump", {})])
    mine = tools()
    agent = openai_agents.guard(Agent(name="support", tools=mine, model=model), engine)
    await Runner.run(agent, fw.LOG_PROMPT, run_config=openai_agents.run_config())
    assert [t.name for t in model.calls[0].tools] == ["lookup", "get_orders", "explode"]
    assert outputs(model)["d1"] == fw.EXPECTED["c4"][0]

    refused = scripted()
    agent = openai_agents.guard(Agent(name="support", tools=mine, model=refused), engine)
    with pytest.raises(InputGuardrailTripwireTriggered) as raised:
        await Runner.run(agent, fw.REFUSED_PROMPT)
    assert raised.value.guardrail_result.output.output_info == fw.REFUSAL
    assert refused.calls == ()


async def test_a_turn_given_as_the_run_context_spans_runs() -> None:
    recorder = MemoryRecorder()
    engine = Guardrails(max_calls_per_turn=1, recorder=recorder)
    model = ScriptedModel(
        [
            [function_call("lookup", {"order_id": "o-1"}, call_id="r1")],
            [assistant_message("one")],
            [function_call("lookup", {"order_id": "o-2"}, call_id="r2")],
            [assistant_message("two")],
        ]
    )
    agent = openai_agents.guard(Agent(name="support", tools=tools(), model=model), engine)
    turn = engine.turn(tenant="acme")
    await Runner.run(agent, "first", context=turn)
    await Runner.run(agent, "second", context=turn)
    assert [r.outcome for r in turn.results] == ["ok", "limit"]
    assert isinstance(turn, Turn)


async def test_each_run_is_its_own_turn_and_every_call_is_recorded() -> None:
    recorder = MemoryRecorder()
    engine = fw.rails(recorder=recorder)
    model = scripted(*fw.STEPS)
    agent = openai_agents.guard(
        Agent(name="support", tools=tools(), model=model), engine, tool_options=fw.BIND
    )
    config = openai_agents.run_config()
    await Runner.run(agent, "hi", context=context(), run_config=config)
    assert {r.call_id: r.outcome for r in recorder.results} == fw.OUTCOMES
    again = scripted(fw.THIRD)
    await Runner.run(agent.clone(model=again), "again", context=context(), run_config=config)
    assert outputs(again) == {"c9": "order o-2"}


async def test_secrets_reach_action_tools_and_never_the_model() -> None:
    model = scripted([("s1", "charge", {"amount": 5})])
    agent = openai_agents.guard(
        Agent(name="support", tools=[function_tool(fw.charge)], model=model),
        fw.secret_rails(),
        tool_options=fw.SECRETS,
    )
    await Runner.run(agent, "hi")
    assert "api_key" not in model.calls[0].tools[0].params_json_schema["properties"]
    assert outputs(model)["s1"] == "charged 5.0"


def test_tool_options_for_a_tool_the_agent_lacks_are_refused() -> None:
    with pytest.raises(ConfigurationError, match="'nope'"):
        openai_agents.guard(
            Agent(name="support", tools=tools()), fw.rails(), tool_options={"nope": {}}
        )


def test_any_arguments_get_a_closed_answer() -> None:
    def answer(arguments: Any) -> tuple[str, None]:
        model = scripted([("h1", "lookup", arguments)])
        agent = openai_agents.guard(Agent(name="support", tools=tools(), model=model), fw.rails())
        asyncio.run(Runner.run(agent, "hi"))
        [content] = outputs(model).values()
        return content, None  # this API has no error flag

    fw.answers_to_any_lookup_arguments(answer)


async def test_tenant_and_session_come_from_the_run_context() -> None:
    engine, seen = fw.context_probe()
    model = scripted([fw.FIRST[0]])
    agent = openai_agents.guard(Agent(name="support", tools=tools(), model=model), engine)
    await Runner.run(agent, "hi", context={"tenant": "acme", "session": "s-9", "plan": "gold"})
    [ctx] = seen
    assert (ctx.tenant, ctx.session, ctx.get("plan")) == ("acme", "s-9", "gold")


async def test_the_agents_own_hooks_still_receive_every_event() -> None:
    events: list[str] = []

    class Hooks(AgentHooks):  # type: ignore[type-arg]
        async def on_start(self, context: Any, agent: Any) -> None:
            events.append("start")

        async def on_tool_end(self, context: Any, agent: Any, tool: Any, result: Any) -> None:
            events.append(f"tool_end {result}")

        async def on_end(self, context: Any, agent: Any, output: Any) -> None:
            events.append(f"end {output}")

    model = scripted([fw.FIRST[0]])
    reports: list[Any] = []
    agent = openai_agents.guard(
        Agent(name="support", tools=tools(), model=model, hooks=Hooks()),
        fw.rails(),
        on_report=reports.append,
    )
    await Runner.run(agent, "hi")
    assert events == ["start", "tool_end order o-1", f"end {fw.FINAL}"]
    assert len(reports) == 1


async def test_a_backstop_action_runs_the_agents_tool() -> None:
    engine, notify_human, notified = fw.backstop()
    reports: list[Any] = []
    agent = openai_agents.guard(
        Agent(
            name="support",
            tools=[function_tool(notify_human)],
            model=scripted(final=fw.ESCALATE),
        ),
        engine,
        tool_options=fw.BACKSTOP_BIND,
        on_report=reports.append,
    )
    await Runner.run(agent, "help", context=context())
    assert notified == fw.NOTIFIED
    assert [a.outcome for a in reports[0].actions] == ["ok"]


async def test_a_streamed_run_is_guarded_the_same() -> None:
    model = scripted(*fw.STEPS)
    agent = openai_agents.guard(
        Agent(name="support", tools=tools(), model=model), fw.rails(), tool_options=fw.BIND
    )
    streamed = Runner.run_streamed(
        agent, "my orders", context=context(), run_config=openai_agents.run_config()
    )
    async for _ in streamed.stream_events():
        pass
    assert streamed.final_output == fw.FINAL
    assert outputs(model) == SENT


def test_a_tool_registered_in_the_engine_under_the_same_name_is_refused() -> None:
    with pytest.raises(DuplicateNameError, match="'lookup'"):
        openai_agents.guard(Agent(name="support", tools=tools()), Guardrails([fw.lookup]))
    engine = fw.rails()
    agent = Agent(name="support", tools=tools())
    first = openai_agents.guard(agent, engine)
    again = openai_agents.guard(agent, engine)  # the same tools: registered once
    assert [t.name for t in first.tools] == [t.name for t in again.tools]
    assert sorted(engine.tools) == ["dump", "explode", "get_orders", "lookup"]


@pytest.mark.parametrize("strict", [True, False])
async def test_an_undeclared_argument_is_refused_and_audited_like_a_direct_call(
    strict: bool,
) -> None:
    # A tool made without strict mode has a schema that does not close itself.
    model = scripted([fw.UNDECLARED])
    recorder = MemoryRecorder()
    lookup = function_tool(fw.lookup, strict_mode=strict)
    agent = openai_agents.guard(
        Agent(name="support", tools=[lookup], model=model), fw.rails(recorder=recorder)
    )
    await Runner.run(agent, "hi")
    assert outputs(model) == {"u1": fw.UNDECLARED_SENTENCE}
    [result] = recorder.results
    assert (result.outcome, result.reason) == ("invalid_args", "undeclared_parameter")
