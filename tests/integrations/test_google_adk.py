"""Google ADK: a real Runner run with an offline model, guarded by the plugin and not."""

from __future__ import annotations

from typing import Any

import pytest

from tests.integrations import _frameworks as fw

fw.need("google.adk")

from google.adk.agents import LlmAgent  # noqa: E402
from google.adk.apps import App  # noqa: E402
from google.adk.models.base_llm import BaseLlm  # noqa: E402
from google.adk.plugins.base_plugin import BasePlugin  # noqa: E402
from google.adk.runners import InMemoryRunner  # noqa: E402
from google.adk.tools import FunctionTool  # noqa: E402
from google.genai import types  # noqa: E402

from guardrails import ConfigurationError, Guardrails, Outcome, TurnContext, tool  # noqa: E402
from guardrails.audit import AuditLog  # noqa: E402
from guardrails.integrations.google_adk import plugin, tool_from  # noqa: E402
from guardrails.integrations.scripted_models import adk_model, tool_results  # noqa: E402
from guardrails.middleware._render import TRUNCATION_MARKER  # noqa: E402
from guardrails.store import MemoryStore  # noqa: E402
from guardrails.testing import MemoryRecorder  # noqa: E402
from guardrails.verdicts import model_sentence  # noqa: E402

# The shared scenario's tools (ADK wraps plain functions itself), and an async one.
ALL = [fw.lookup, fw.get_orders, fw.explode, fw.dump, fw.shout]
# ADK sends the model {"result": content} for ok, {"error": content} for the other outcomes.
SENT = {
    call_id: {"error" if is_error else "result": content}
    for call_id, (content, is_error) in fw.EXPECTED.items()
}


def offered(request: Any) -> list[str]:
    return sorted(request.tools_dict)


async def run(runner: InMemoryRunner, text: str = "my orders", session: str | None = None) -> str:
    made = await runner.session_service.create_session(
        app_name="shop", user_id="u", session_id=session
    )
    message = types.Content(role="user", parts=[types.Part(text=text)])
    async for _ in runner.run_async(user_id="u", session_id=made.id, new_message=message):
        pass
    return str(made.id)


def runner_for(agent: Any, *plugins: Any) -> InMemoryRunner:
    return InMemoryRunner(app=App(name="shop", root_agent=agent, plugins=list(plugins)))


def guarded(
    llm: Any, rails: Guardrails, tools: list[Any] = ALL, **options: Any
) -> tuple[InMemoryRunner, list[Any]]:
    """A runner for an agent guarded by the plugin; the post_run reports it made."""
    reports: list[Any] = []
    agent = LlmAgent(name="shop", model=llm, tools=tools)

    def context(invocation: Any) -> TurnContext:
        return fw.context().evolve(session=invocation.session.id)

    given = {"tool_options": fw.BIND, "context": context, "on_report": reports.append, **options}
    return runner_for(agent, plugin(agent, rails, **given)), reports


async def test_every_call_is_answered_by_tool_call() -> None:
    llm = adk_model(*fw.STEPS, fw.FINAL)
    recorder = MemoryRecorder()
    runner, reports = guarded(llm, fw.rails(recorder=recorder))
    session = await run(runner)
    sent = tool_results(llm)
    assert sent == SENT
    assert fw.SECRET not in repr(sent) and "nope" not in repr(sent)
    assert {r.call_id: r.outcome for r in recorder.results} == fw.OUTCOMES
    [report] = reports
    assert report.text == fw.FINAL
    assert report.context.session == session


async def test_the_schema_is_the_tools_own_and_bound_parameters_are_hidden() -> None:
    rails = Guardrails()
    plugin(LlmAgent(name="shop", model=adk_model(), tools=ALL), rails, tool_options=fw.BIND)
    assert "account_id" not in rails.tools["get_orders"].schema["properties"]
    assert rails.tools["lookup"].schema["required"] == ["order_id"]
    declared = FunctionTool(fw.lookup)._get_declaration().parameters_json_schema
    assert tool_from(fw.lookup).schema["required"] == declared["required"]


async def test_bound_parameters_are_hidden_from_the_model_request() -> None:
    llm = adk_model(fw.FINAL)
    runner, _ = guarded(llm, fw.rails())
    await run(runner)
    [tool_list] = llm.requests[0].config.tools
    declared = {d.name: d for d in tool_list.function_declarations}
    assert offered(llm.requests[0]) == ["dump", "explode", "get_orders", "lookup", "shout"]
    assert "account_id" not in declared["get_orders"].parameters_json_schema["properties"]
    assert declared["lookup"].parameters_json_schema["required"] == ["order_id"]


async def test_a_per_turn_ceiling_answers_limit() -> None:
    llm = adk_model([("shout", {"text": str(i)}) for i in range(3)], fw.FINAL)
    recorder = MemoryRecorder()
    runner, _ = guarded(llm, Guardrails(max_calls_per_turn=2, recorder=recorder))
    await run(runner)
    sent = tool_results(llm)
    assert sorted(map(str, sent.values())) == sorted(
        map(str, [{"result": "0"}, {"result": "1"}, {"error": model_sentence(Outcome.LIMIT)}])
    )
    assert recorder.outcomes.count(Outcome.LIMIT) == 1


async def test_each_run_is_a_new_turn() -> None:
    llm = adk_model([("shout", {"text": "a"})], "one", [("shout", {"text": "b"})], "two")
    recorder = MemoryRecorder()
    runner, reports = guarded(llm, Guardrails(max_calls_per_turn=1, recorder=recorder))
    await run(runner)
    await run(runner)
    assert recorder.outcomes == [Outcome.OK, Outcome.OK]
    assert len(reports) == 2


async def test_pre_turn_decides_what_each_request_offers() -> None:
    rails = fw.trigger_rails()
    llm = adk_model([("d1", "dump", {})], fw.FINAL)
    runner, _ = guarded(llm, rails, tool_options=None)
    await run(runner, fw.LOG_PROMPT)
    assert offered(llm.requests[0]) == ["explode", "get_orders", "lookup", "shout"]
    [tool_list] = llm.requests[0].config.tools
    assert "dump" not in [d.name for d in tool_list.function_declarations]
    assert tool_results(llm)["d1"] == SENT["c4"]
    # The same engine, another run: pre_turn reads this run's input.
    llm = adk_model(fw.FINAL)
    agent = LlmAgent(name="shop", model=llm, tools=ALL)
    await run(runner_for(agent, plugin(agent, rails)), "hello")
    assert offered(llm.requests[0]) == ["dump", "explode", "get_orders", "lookup", "shout"]


async def test_a_secret_reaches_an_action_tool_and_nothing_else() -> None:
    llm = adk_model([("s1", "charge", {"amount": 5})], fw.FINAL)
    recorder = MemoryRecorder()
    rails = fw.secret_rails(recorder=recorder)
    runner, _ = guarded(llm, rails, tools=[fw.charge], tool_options=fw.SECRETS)
    await run(runner)
    assert tool_results(llm)["s1"] == {"result": "charged 5"}
    assert fw.API_KEY not in repr(recorder.results)
    assert "api_key" not in str(llm.requests[0].config.tools)


def test_options_for_a_tool_the_agent_lacks_are_rejected_naming_it() -> None:
    agent = LlmAgent(name="shop", model=adk_model(), tools=ALL)
    with pytest.raises(ConfigurationError, match="'transfer'"):
        plugin(agent, Guardrails(), tool_options={"transfer": {}})


def test_a_tool_the_application_registered_is_kept_and_options_for_it_are_refused() -> None:
    mine = tool(fw.lookup)
    rails = Guardrails([mine])
    agent = LlmAgent(name="shop", model=adk_model(), tools=ALL)
    plugin(agent, rails)
    assert rails.tools["lookup"] is mine
    with pytest.raises(ConfigurationError, match="'lookup' is already registered"):
        plugin(agent, rails, tool_options={"lookup": {}})


async def test_without_the_plugin_adk_runs_what_the_model_chose() -> None:
    # Every call of the scenario's first step but the raising one (next test).
    llm = adk_model([call for call in fw.FIRST if call[1] != "explode"], fw.FINAL)
    await run(runner_for(LlmAgent(name="shop", model=llm, tools=ALL)))
    sent = tool_results(llm)
    assert "mandatory input parameters" in sent["c2"]["error"]
    assert sent["c3"] == {"result": "order 7"}
    assert "lookup, get_orders, explode, dump, shout" in sent["c4"]["error"]
    assert sent["c5"] == {"result": "acc-666:open"}
    assert sent["c7"] == {"result": fw.dump()}


async def test_without_the_plugin_a_raising_tool_aborts_the_run_with_its_text() -> None:
    llm = adk_model([("c6", "explode", {"x": 1})], fw.FINAL)
    with pytest.raises(RuntimeError, match=fw.SECRET):
        await run(runner_for(LlmAgent(name="shop", model=llm, tools=ALL)))


def test_the_sync_runner_is_guarded_too() -> None:
    llm = adk_model([fw.FIRST[0], fw.FIRST[1]], fw.FINAL)
    recorder = MemoryRecorder()
    runner, reports = guarded(llm, fw.rails(recorder=recorder))
    session = runner.session_service.create_session_sync(app_name="shop", user_id="u")
    message = types.Content(role="user", parts=[types.Part(text="orders")])
    for _ in runner.run(user_id="u", session_id=session.id, new_message=message):
        pass
    assert tool_results(llm) == {"c1": SENT["c1"], "c2": SENT["c2"]}
    assert len(reports) == 1
    assert recorder.outcomes == [Outcome.OK, Outcome.INVALID_ARGS]


async def test_a_refused_turn_offers_no_tool() -> None:
    llm = adk_model([("r1", "shout", {"text": "x"})], fw.FINAL)
    runner, _ = guarded(llm, fw.trigger_rails(), tool_options=None)
    await run(runner, fw.REFUSED_PROMPT)
    assert offered(llm.requests[0]) == []
    assert tool_results(llm)["r1"] == {"error": model_sentence(Outcome.UNAVAILABLE)}


async def test_a_failed_run_leaves_no_turn_behind() -> None:
    class Broken(BaseLlm):  # type: ignore[misc]
        async def generate_content_async(self, llm_request: Any, stream: bool = False) -> Any:
            raise ConnectionError("model down")
            yield  # an async generator

    agent = LlmAgent(name="shop", model=Broken(model="broken"), tools=[fw.shout])
    guard = plugin(agent, Guardrails())
    with pytest.raises(ConnectionError):
        await run(runner_for(agent, guard))
    assert guard.runs == {}


def test_the_tools_of_sub_agents_are_registered_too() -> None:
    helper = LlmAgent(name="helper", model=adk_model(), tools=[fw.dump])
    root = LlmAgent(name="shop", model=adk_model(), tools=[fw.shout], sub_agents=[helper])
    rails = Guardrails()
    plugin(root, rails)
    assert sorted(rails.tools) == ["dump", "shout"]


async def test_an_undeclared_argument_is_refused_and_audited_like_a_direct_call() -> None:
    llm = adk_model([fw.UNDECLARED], fw.FINAL)
    recorder = MemoryRecorder()
    runner, _ = guarded(llm, fw.rails(recorder=recorder))
    await run(runner)
    assert tool_results(llm) == {"u1": {"error": fw.UNDECLARED_SENTENCE}}
    [result] = recorder.results
    assert (result.outcome, result.reason) == ("invalid_args", "undeclared_parameter")


# -- the application's own checks stay in place, in ADK's order ---------------------------


def refuse_explode(tool: Any, args: Any, tool_context: Any) -> Any:
    """The application's own check: ``explode`` never runs."""
    return {"error": "not today"} if tool.name == "explode" else None


class Seen(BasePlugin):  # type: ignore[misc]
    """An application plugin: notes every call it is asked about; refuses ``refuse``."""

    def __init__(self, name: str, refuse: str = "") -> None:
        super().__init__(name=name)
        self.asked: list[str] = []
        self.refuse = refuse

    async def before_tool_callback(self, *, tool: Any, tool_args: Any, tool_context: Any) -> Any:
        self.asked.append(tool.name)
        return {"error": f"{self.name} says no"} if tool.name == self.refuse else None


async def test_the_agents_own_before_tool_callback_runs_and_its_refusal_is_audited() -> None:
    llm = adk_model([fw.FIRST[0], ("c6", "explode", {"x": 1})], fw.FINAL)
    recorder = MemoryRecorder()
    agent = LlmAgent(name="shop", model=llm, tools=ALL, before_tool_callback=refuse_explode)
    guard = plugin(agent, fw.rails(recorder=recorder))
    await run(runner_for(agent, guard))
    assert tool_results(llm) == {"c1": SENT["c1"], "c6": {"error": "not today"}}
    outcomes = {r.call_id: (r.outcome, r.reason) for r in recorder.results}
    assert outcomes == {"c1": ("ok", None), "c6": ("unavailable", "guard")}
    [refusal] = [v for v in recorder.verdicts if v.verdict == "reject"]
    assert refusal.guard == "framework_check"


async def test_plugins_before_and_after_it_run_in_order_and_a_refusal_is_audited() -> None:
    llm = adk_model([fw.FIRST[0], ("c6", "explode", {"x": 1}), ("c8", "dump", {})], fw.FINAL)
    recorder = MemoryRecorder()
    agent = LlmAgent(name="shop", model=llm, tools=ALL)
    before, after = Seen("before", refuse="explode"), Seen("after", refuse="dump")
    guard = plugin(agent, fw.rails(recorder=recorder))
    await run(runner_for(agent, before, guard, after))
    assert sorted(before.asked) == ["dump", "explode", "lookup"]
    assert sorted(after.asked) == ["dump", "lookup"]  # explode was answered before it
    sent = tool_results(llm)
    assert sent["c6"] == {"error": "before says no"} and sent["c8"] == {"error": "after says no"}
    outcomes = {r.call_id: r.outcome for r in recorder.results}
    assert outcomes == {"c1": "ok", "c6": "unavailable", "c8": "unavailable"}


async def test_a_call_waiting_for_confirmation_is_not_audited_as_ok() -> None:
    ran: list[str] = []

    def refund(order_id: str) -> str:
        """Refund an order (a person confirms it first)."""
        ran.append(order_id)
        return f"refunded {order_id}"

    llm = adk_model([("r1", "refund", {"order_id": "o-1"})], fw.FINAL)
    recorder = MemoryRecorder()
    audit = AuditLog(MemoryStore())
    reports: list[Any] = []
    agent = LlmAgent(
        name="shop", model=llm, tools=[FunctionTool(refund, require_confirmation=True)]
    )
    rails = fw.rails(recorder=[recorder, audit], hooks=[audit])
    runner = runner_for(agent, plugin(agent, rails, on_report=reports.append))
    session = await run(runner)
    assert ran == [] and recorder.results == [] and reports == []
    # The person approves: the call runs once, through tool_call.
    events = (
        await runner.session_service.get_session(app_name="shop", user_id="u", session_id=session)
    ).events
    [request] = [
        c for e in events for c in e.get_function_calls() if c.name == "adk_request_confirmation"
    ]
    approval = types.Part(
        function_response=types.FunctionResponse(
            id=request.id, name=request.name, response={"confirmed": True}
        )
    )
    message = types.Content(role="user", parts=[approval])
    async for _ in runner.run_async(user_id="u", session_id=session, new_message=message):
        pass
    assert ran == ["o-1"]
    assert [(r.call_id, r.outcome) for r in recorder.results] == [("r1", "ok")]
    # The confirmation resumed the paused run's turn: one pre_turn, one post_run.
    kinds = [r.kind for r in audit.rows()]
    assert (kinds.count("pre_turn"), kinds.count("post_run"), len(reports)) == (1, 1, 1)


async def test_a_dict_result_reaches_the_model_as_the_dict_under_the_cap() -> None:
    def hits(query: str) -> dict[str, Any]:
        """Search."""
        return {"query": query, "hits": [{"title": "Fees", "score": 0.9}]}

    def big(query: str) -> dict[str, Any]:
        """Search, with far too many hits."""
        return {"hits": ["x" * 40] * 100}

    llm = adk_model([("h1", "hits", {"query": "fees"}), ("h2", "big", {"query": "q"})], fw.FINAL)
    runner, _ = guarded(llm, fw.rails(), tools=[hits, big], tool_options=None)
    await run(runner)
    sent = tool_results(llm)
    assert sent["h1"] == hits("fees")
    # Over the cap: the capped text, as ADK sends any text result.
    assert sent["h2"]["result"].endswith(TRUNCATION_MARKER)
    assert len(sent["h2"]["result"]) == fw.MAX_RESULT


async def test_an_image_part_reaches_the_model_as_media() -> None:
    # Far larger than the cap: what tool_call caps and audits is its note, not its bytes.
    png = b"\x89PNG\r\n\x1a\n" + b"\x00" * 50_000

    def chart() -> Any:
        """The month's spending as a chart."""
        return types.Part.from_bytes(data=png, mime_type="image/png")

    llm = adk_model([("i1", "chart", {})], fw.FINAL)
    recorder = MemoryRecorder()
    runner, _ = guarded(llm, fw.rails(recorder=recorder), tools=[chart], tool_options=None)
    await run(runner)
    [result] = recorder.results
    assert result.content == "[image/png, 50008 bytes]"
    [response] = [
        p.function_response
        for c in llm.requests[-1].contents
        for p in c.parts
        if p.function_response is not None
    ]
    [part] = response.parts
    assert (part.inline_data.mime_type, part.inline_data.data) == ("image/png", png)


async def test_a_result_with_media_over_the_cap_is_sent_as_its_capped_stand_in() -> None:
    def charts() -> Any:
        """Many charts."""
        return [types.Part.from_bytes(data=b"x" * 10, mime_type="image/png")] * 100

    llm = adk_model([("i1", "charts", {})], fw.FINAL)
    runner, _ = guarded(llm, fw.rails(), tools=[charts], tool_options=None)
    await run(runner)
    sent = tool_results(llm)["i1"]["result"]
    assert sent.startswith("[image/png, 10 bytes]\n") and sent.endswith(TRUNCATION_MARKER)
    assert len(sent) == fw.MAX_RESULT


async def test_a_dict_result_a_hook_rewrote_reaches_the_model_as_the_rewritten_text() -> None:
    from guardrails.context import ToolResult

    class NextStep:
        """A hook that appends the next step's instructions (as a workflow step does)."""

        def before(self, invocation: Any) -> None:
            return None

        def after(self, invocation: Any, result: ToolResult) -> ToolResult:
            return result._replace(content=result.content + "\nNext: confirm_plan")

    def plan(goal: str) -> dict[str, Any]:
        """Start a plan."""
        return {"goal": goal}

    llm = adk_model([("p1", "plan", {"goal": "g"})], fw.FINAL)
    runner, _ = guarded(llm, Guardrails(hooks=[NextStep()]), tools=[plan], tool_options=None)
    await run(runner)
    assert tool_results(llm)["p1"] == {"result": '{"goal":"g"}\nNext: confirm_plan'}
