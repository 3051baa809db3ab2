"""Google ADK: a real Runner run with an offline model, guarded by the plugin and not."""

from __future__ import annotations

import os
from typing import Any

import pydantic
import pytest

from guardrails import (
    ConfigurationError,
    Guardrails,
    GuardResult,
    Outcome,
    Secret,
    TurnContext,
)
from guardrails import guard as make_guard
from guardrails.rules.effects import Restrict
from guardrails.testing import MemoryRecorder
from guardrails.verdicts import model_sentence

if os.environ.get("GUARDRAILS_REQUIRE_FRAMEWORKS") != "1":
    pytest.importorskip("google.adk", reason="google-adk is not installed")

from google.adk.agents import LlmAgent
from google.adk.apps import App
from google.adk.models.base_llm import BaseLlm
from google.adk.models.llm_response import LlmResponse
from google.adk.runners import InMemoryRunner
from google.adk.tools import FunctionTool
from google.genai import types

from guardrails.integrations.google_adk import plugin, tool_from

SECRET = "token=sk-live-123"
BIG = "x" * 5_000


class ScriptedModel(BaseLlm):
    """Answers each request with the next scripted content; keeps what it was sent."""

    turns: list[Any] = pydantic.Field(default_factory=list)
    requests: list[Any] = pydantic.Field(default_factory=list)

    async def generate_content_async(self, llm_request: Any, stream: bool = False) -> Any:
        self.requests.append(llm_request.model_copy(deep=True))
        yield LlmResponse(content=self.turns.pop(0))


def calls(*wanted: tuple[str, dict[str, Any]]) -> Any:
    return types.Content(
        role="model",
        parts=[
            types.Part(function_call=types.FunctionCall(id=f"c{i}", name=name, args=args))
            for i, (name, args) in enumerate(wanted)
        ],
    )


def answer(text: str = "done") -> Any:
    return types.Content(role="model", parts=[types.Part(text=text)])


def model(*turns: Any) -> ScriptedModel:
    return ScriptedModel(model="scripted", turns=list(turns), requests=[])


def results_sent(llm: ScriptedModel) -> dict[str, Any]:
    """What the model was sent back for each call id, in its last request."""
    return {
        p.function_response.id: p.function_response.response
        for c in llm.requests[-1].contents
        for p in c.parts
        if p.function_response is not None
    }


def offered(request: Any) -> list[str]:
    return sorted(request.tools_dict)


async def run(
    runner: InMemoryRunner, text: str = "show my orders", session: str | None = None
) -> str:
    made = await runner.session_service.create_session(
        app_name="shop", user_id="u", session_id=session
    )
    message = types.Content(role="user", parts=[types.Part(text=text)])
    async for _ in runner.run_async(user_id="u", session_id=made.id, new_message=message):
        pass
    return str(made.id)


def runner_for(agent: Any, *plugins: Any) -> InMemoryRunner:
    return InMemoryRunner(app=App(name="shop", root_agent=agent, plugins=list(plugins)))


def get_orders(status: str, account: str, limit: int = 10) -> str:
    """The account's orders."""
    return f"{account}:{status}:{limit}"


def explode() -> str:
    """Always fails."""
    raise RuntimeError(SECRET)


def dump_log() -> str:
    """A very long log."""
    return BIG


async def shout(text: str) -> str:
    """An async tool."""
    return text.upper()


ALL = [get_orders, explode, dump_log, shout]
SCRIPT = [
    ("get_orders", {"status": "open"}),
    ("get_orders", {}),
    ("get_orders", {"status": 3}),
    ("no_such_tool", {"a": 1}),
    ("get_orders", {"status": "open", "account": "someone-else"}),
    ("explode", {}),
    ("dump_log", {}),
    ("shout", {"text": "hi"}),
]


def guarded(llm: ScriptedModel, **engine: Any) -> tuple[InMemoryRunner, MemoryRecorder, list[Any]]:
    recorder = MemoryRecorder()
    reports: list[Any] = []
    rails = Guardrails(recorder=recorder, max_result_chars=1_000, **engine)
    agent = LlmAgent(name="shop", model=llm, tools=ALL)
    guard = plugin(
        agent,
        rails,
        tool_options={"get_orders": {"bind": {"account": "tenant"}}},
        context=lambda invocation: TurnContext(tenant="acme", session=invocation.session.id),
        on_report=reports.append,
    )
    return runner_for(agent, guard), recorder, reports


async def test_every_call_is_answered_by_tool_call() -> None:
    llm = model(calls(*SCRIPT), answer())
    runner, recorder, reports = guarded(llm)
    session = await run(runner)
    sent = results_sent(llm)
    assert sent["c0"] == {"result": "acme:open:10"}
    assert sent["c1"] == {"error": model_sentence(Outcome.INVALID_ARGS, ["status"])}
    assert sent["c2"] == {"error": model_sentence(Outcome.INVALID_ARGS, ["status"])}
    assert sent["c3"] == {"error": model_sentence(Outcome.UNAVAILABLE)}
    assert sent["c4"] == {"error": model_sentence(Outcome.INVALID_ARGS)}
    assert sent["c5"] == {"error": model_sentence(Outcome.ERROR)}
    assert len(sent["c6"]["result"]) < 1_100
    assert sent["c7"] == {"result": "HI"}
    assert SECRET not in repr(sent) and "no_such_tool" not in repr(sent)
    assert sorted(r.call_id for r in recorder.results) == [f"c{i}" for i in range(8)]
    [report] = reports
    assert report.text == "done"
    assert report.context.session == session


async def test_the_schema_is_the_tools_own_and_bound_parameters_are_hidden() -> None:
    rails = Guardrails()
    agent = LlmAgent(name="shop", model=model(), tools=[get_orders])
    plugin(agent, rails, tool_options={"get_orders": {"bind": {"account": "tenant"}}})
    assert rails.tools["get_orders"].schema["required"] == ["status"]
    assert "account" not in rails.tools["get_orders"].schema["properties"]
    declared = FunctionTool(get_orders)._get_declaration().parameters_json_schema
    assert tool_from(get_orders).schema["required"] == declared["required"]


async def test_bound_parameters_are_hidden_from_the_model_request() -> None:
    llm = model(answer())
    runner, _, _ = guarded(llm)
    await run(runner)
    [tool] = llm.requests[0].config.tools
    declared = {d.name: d for d in tool.function_declarations}
    assert offered(llm.requests[0]) == ["dump_log", "explode", "get_orders", "shout"]
    schema = declared["get_orders"].parameters_json_schema
    assert schema["required"] == ["status"]
    assert "account" not in schema["properties"]


async def test_a_per_turn_ceiling_answers_limit() -> None:
    llm = model(calls(*[("shout", {"text": str(i)}) for i in range(3)]), answer())
    runner, recorder, _ = guarded(llm, max_calls_per_turn=2)
    await run(runner)
    sent = results_sent(llm)
    assert sorted(map(str, sent.values())) == sorted(
        map(str, [{"result": "0"}, {"result": "1"}, {"error": model_sentence(Outcome.LIMIT)}])
    )
    assert recorder.outcomes.count(Outcome.LIMIT) == 1


async def test_each_run_is_a_new_turn() -> None:
    llm = model(
        calls(("shout", {"text": "a"})), answer(), calls(("shout", {"text": "b"})), answer()
    )
    runner, recorder, reports = guarded(llm, max_calls_per_turn=1)
    await run(runner)
    await run(runner)
    assert recorder.outcomes == [Outcome.OK, Outcome.OK]
    assert len(reports) == 2


async def test_pre_turn_decides_what_each_request_offers() -> None:
    seen: list[str] = []

    @make_guard(at="pre_turn")
    def no_logs(request: Any) -> Any:
        seen.append(request.text.raw)
        if "logs" in request.text.raw:
            return GuardResult.passed()
        return GuardResult.rejected("no_logs", evidence=Restrict(frozenset({"dump_log"})))

    llm = model(calls(("dump_log", {})), answer())
    rails = Guardrails(guards=[no_logs])
    agent = LlmAgent(name="shop", model=llm, tools=[dump_log, shout])
    runner = runner_for(agent, plugin(agent, rails))
    await run(runner)
    assert offered(llm.requests[0]) == ["shout"]
    [tool] = llm.requests[0].config.tools
    assert [d.name for d in tool.function_declarations] == ["shout"]
    assert results_sent(llm)["c0"] == {"error": model_sentence(Outcome.UNAVAILABLE)}
    llm = model(answer())
    agent = LlmAgent(name="shop", model=llm, tools=[dump_log, shout])
    await run(runner_for(agent, plugin(agent, rails)), "my logs please")
    assert offered(llm.requests[0]) == ["dump_log", "shout"]
    assert seen == ["show my orders", "my logs please"]


async def test_a_secret_reaches_an_action_tool_and_nothing_else() -> None:
    seen: list[str] = []

    def charge(amount: int, api_key: str) -> str:
        """Charge the card."""
        seen.append(api_key)
        return f"charged {amount}"

    llm = model(calls(("charge", {"amount": 5})), answer())
    recorder = MemoryRecorder()
    rails = Guardrails(recorder=recorder, secrets=lambda name: "sk-secret-1")
    agent = LlmAgent(name="shop", model=llm, tools=[charge])
    options = {"charge": {"bind": {"api_key": Secret("stripe")}, "effect": True}}
    runner = runner_for(agent, plugin(agent, rails, tool_options=options))
    await run(runner)
    assert seen == ["sk-secret-1"]
    assert results_sent(llm)["c0"] == {"result": "charged 5"}
    assert "sk-secret-1" not in repr(recorder.results)
    assert "api_key" not in str(llm.requests[0].config.tools)


def test_options_for_a_tool_the_agent_lacks_are_rejected_naming_it() -> None:
    agent = LlmAgent(name="shop", model=model(), tools=[shout])
    with pytest.raises(ConfigurationError, match="'transfer'"):
        plugin(agent, Guardrails(), tool_options={"transfer": {}})


async def test_without_the_plugin_adk_runs_what_the_model_chose() -> None:
    script = [
        ("get_orders", {}),
        ("get_orders", {"status": 3, "account": "mine"}),
        ("get_orders", {"status": "open", "account": "someone-else"}),
        ("no_such_tool", {}),
        ("dump_log", {}),
    ]
    llm = model(calls(*script), answer())
    agent = LlmAgent(name="shop", model=llm, tools=ALL)
    await run(runner_for(agent))
    sent = results_sent(llm)
    assert "mandatory input parameters" in sent["c0"]["error"]
    assert sent["c1"] == {"result": "mine:3:10"}
    assert sent["c2"] == {"result": "someone-else:open:10"}
    assert "get_orders, explode, dump_log, shout" in sent["c3"]["error"]
    assert sent["c4"] == {"result": BIG}


async def test_without_the_plugin_a_raising_tool_aborts_the_run_with_its_text() -> None:
    llm = model(calls(("explode", {})), answer())
    agent = LlmAgent(name="shop", model=llm, tools=ALL)
    with pytest.raises(RuntimeError, match=SECRET):
        await run(runner_for(agent))


def test_the_sync_runner_is_guarded_too() -> None:
    llm = model(calls(("get_orders", {"status": "open"}), ("get_orders", {})), answer())
    runner, recorder, reports = guarded(llm)
    session = runner.session_service.create_session_sync(app_name="shop", user_id="u")
    message = types.Content(role="user", parts=[types.Part(text="orders")])
    for _ in runner.run(user_id="u", session_id=session.id, new_message=message):
        pass
    assert results_sent(llm) == {
        "c0": {"result": "acme:open:10"},
        "c1": {"error": model_sentence(Outcome.INVALID_ARGS, ["status"])},
    }
    assert len(reports) == 1
    assert recorder.outcomes == [Outcome.OK, Outcome.INVALID_ARGS]


async def test_a_refused_turn_offers_no_tool() -> None:
    @make_guard(at="pre_turn")
    def no_deletions(request: Any) -> Any:
        if "delete" in request.text.raw:
            return GuardResult.rejected("deletion_requested")
        return GuardResult.passed()

    llm = model(calls(("shout", {"text": "x"})), answer())
    agent = LlmAgent(name="shop", model=llm, tools=[shout, dump_log])
    await run(runner_for(agent, plugin(agent, Guardrails(guards=[no_deletions]))), "delete all")
    assert offered(llm.requests[0]) == []
    assert results_sent(llm)["c0"] == {"error": model_sentence(Outcome.UNAVAILABLE)}


async def test_a_failed_run_leaves_no_turn_behind() -> None:
    class Broken(ScriptedModel):
        async def generate_content_async(self, llm_request: Any, stream: bool = False) -> Any:
            raise ConnectionError("model down")
            yield  # an async generator

    agent = LlmAgent(name="shop", model=Broken(model="broken"), tools=[shout])
    guard = plugin(agent, Guardrails())
    with pytest.raises(ConnectionError):
        await run(runner_for(agent, guard))
    assert guard.runs == {}


def test_the_tools_of_sub_agents_are_registered_too() -> None:
    helper = LlmAgent(name="helper", model=model(), tools=[dump_log])
    root = LlmAgent(name="shop", model=model(), tools=[shout], sub_agents=[helper])
    rails = Guardrails()
    plugin(root, rails)
    assert sorted(rails.tools) == ["dump_log", "shout"]
