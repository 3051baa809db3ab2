"""pydantic-ai: real agent runs with ``FunctionModel``, guarded by the capability."""

from __future__ import annotations

import inspect
from typing import Any

import pytest

from tests.integrations import _frameworks as fw

fw.need("pydantic_ai")

from pydantic_ai import Agent, DeferredToolRequests, RunContext  # noqa: E402
from pydantic_ai.messages import (  # noqa: E402
    ModelMessage,
    ModelRequest,
    ModelResponse,
    TextPart,
    ToolCallPart,
    ToolReturnPart,
)
from pydantic_ai.models.function import AgentInfo, FunctionModel  # noqa: E402

from guardrails import (  # noqa: E402
    ConfigurationError,
    DuplicateNameError,
    Guardrails,
    Turn,
    UsageError,
)
from guardrails.integrations import pydantic_ai  # noqa: E402
from guardrails.rules import required_action, trigger  # noqa: E402
from guardrails.testing import MemoryRecorder  # noqa: E402


class Script:
    """A FunctionModel body: one scripted response per step; records what it was sent."""

    def __init__(self, *steps: list[tuple[str, str, Any]], final: str = fw.FINAL) -> None:
        self.responses = [
            ModelResponse(parts=[ToolCallPart(n, a, tool_call_id=i) for i, n, a in step])
            for step in steps
        ] + [ModelResponse(parts=[TextPart(final)])]
        self.sent: list[ModelMessage] = []
        self.offered: list[list[Any]] = []

    def __call__(self, messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        self.sent.append(messages[-1])
        self.offered.append(list(info.function_tools))
        return self.responses[len(self.sent) - 1]

    def answers(self) -> dict[str, tuple[str, bool]]:
        """Every tool answer the model was sent: (content, is an error)."""
        found = {}
        for message in self.sent:
            if isinstance(message, ModelRequest):
                for part in message.parts:
                    if isinstance(part, ToolReturnPart):
                        found[part.tool_call_id] = (part.content, part.outcome != "success")
        return found


@pytest.fixture(autouse=True)
def _closed_loop(request: pytest.FixtureRequest) -> Any:
    if inspect.iscoroutinefunction(request.function):
        yield
        return
    with fw.default_loop_closed():  # run_sync leaves the thread's default loop open
        yield


def agent_with(script: Script, *capabilities: Any, tools: Any = None) -> Agent[Any, str]:
    return Agent(
        FunctionModel(script),
        tools=tools or [fw.lookup, fw.get_orders, fw.explode, fw.dump],
        capabilities=list(capabilities),
    )


context = fw.context


# pydantic-ai answers a tool it does not have before any hook runs (with a retry
# prompt naming the tools it has); every other call is answered by tool_call.
UNKNOWN = "c4"
SENT = {k: v for k, v in fw.EXPECTED.items() if k != UNKNOWN}


def test_the_model_is_sent_our_outcomes_and_sentences_only() -> None:
    script = Script(*fw.STEPS)
    reports: list[Any] = []
    guard = pydantic_ai.capability(fw.rails(), tool_options=fw.BIND, on_report=reports.append)
    result = agent_with(script, guard).run_sync("my orders", deps=context())
    assert result.output == fw.FINAL
    answers = script.answers()
    assert {k: v for k, v in answers.items() if k != UNKNOWN} == SENT
    assert answers[UNKNOWN][0].startswith("Unknown tool name: 'nope'.")
    assert fw.SECRET not in str(answers) and "acc-666" not in str(answers)
    [report] = reports
    assert report.text == fw.FINAL


async def test_async_run_sends_the_same() -> None:
    script = Script(*fw.STEPS)
    guard = pydantic_ai.capability(fw.rails(), tool_options=fw.BIND)
    await agent_with(script, guard).run("my orders", deps=context())
    assert {k: v for k, v in script.answers().items() if k != UNKNOWN} == SENT


def test_without_the_capability_the_model_picks_the_account_and_exceptions_end_the_run() -> None:
    script = Script([fw.FIRST[2], fw.FIRST[4]], [fw.FIRST[5]])
    with pytest.raises(RuntimeError, match="sk-live-123"):
        agent_with(script).run_sync("my orders")
    answers = script.answers()
    assert answers["c5"] == ("acc-666:open", False)
    [error] = answers["c3"][0]  # the validator's errors, the model's input included
    assert (error["msg"], error["input"]) == ("Input should be a valid string", 7)


def test_the_offered_schema_hides_bound_parameters() -> None:
    script = Script()
    guard = pydantic_ai.capability(fw.rails(), tool_options=fw.BIND)
    agent_with(script, guard).run_sync("hi", deps=context())
    offered = {t.name: t.parameters_json_schema for t in script.offered[0]}
    assert "account_id" not in offered["get_orders"]["properties"]
    assert offered["lookup"]["required"] == ["order_id"]


def test_pre_turn_withholds_tools_and_refuses_turns_without_calling_the_model() -> None:
    guard = pydantic_ai.capability(fw.trigger_rails())
    script = Script([("d1", "dump", {})])
    agent_with(script, guard).run_sync(fw.LOG_PROMPT)
    assert [t.name for t in script.offered[0]] == ["lookup", "get_orders", "explode"]
    # A withheld tool is still known to pydantic-ai: the call reaches tool_call.
    assert script.answers() == {"d1": fw.EXPECTED["c4"]}

    refused = Script()
    result = agent_with(refused, guard).run_sync(fw.REFUSED_PROMPT)
    assert result.output == fw.REFUSAL
    assert refused.sent == []


def test_each_run_is_a_turn_and_every_call_is_recorded() -> None:
    recorder = MemoryRecorder()
    guard = pydantic_ai.capability(fw.rails(recorder=recorder), tool_options=fw.BIND)
    agent_with(Script(*fw.STEPS), guard).run_sync("hi", deps=context())
    assert {r.call_id: r.outcome for r in recorder.results} == {
        k: v for k, v in fw.OUTCOMES.items() if k != UNKNOWN
    }
    again = Script(fw.THIRD)
    agent_with(again, guard).run_sync("again", deps=context())
    assert again.answers() == {"c9": ("order o-2", False)}


def test_a_turn_given_as_deps_is_used_as_is() -> None:
    engine = Guardrails(max_calls_per_turn=1)
    guard = pydantic_ai.capability(engine)
    turn = engine.turn(tenant="acme")
    agent_with(Script([("r1", "lookup", {"order_id": "o-1"})]), guard).run_sync("a", deps=turn)
    agent_with(Script([("r2", "lookup", {"order_id": "o-2"})]), guard).run_sync("b", deps=turn)
    assert [r.outcome for r in turn.results] == ["ok", "limit"]
    assert isinstance(turn, Turn)


def test_secrets_reach_action_tools_and_never_the_model() -> None:
    script = Script([("s1", "charge", {"amount": 5})])
    guard = pydantic_ai.capability(fw.secret_rails(), tool_options=fw.SECRETS)
    agent_with(script, guard, tools=[fw.charge]).run_sync("hi")
    assert "api_key" not in script.offered[0][0].parameters_json_schema["properties"]
    assert script.answers() == {"s1": ("charged 5.0", False)}


def test_tool_options_for_a_tool_the_agent_lacks_are_refused() -> None:
    guard = pydantic_ai.capability(fw.rails(), tool_options={"nope": {}})
    with pytest.raises(ConfigurationError, match="'nope'"):
        agent_with(Script(), guard).run_sync("hi")


def test_any_arguments_get_a_closed_answer() -> None:
    def answer(arguments: Any) -> tuple[str, bool]:
        script = Script([("h1", "lookup", arguments)])
        agent_with(script, pydantic_ai.capability(fw.rails())).run_sync("hi")
        [found] = script.answers().values()
        return found

    fw.answers_to_any_lookup_arguments(answer)


def test_tenant_and_session_come_from_the_deps() -> None:
    engine, seen = fw.context_probe()
    guard = pydantic_ai.capability(engine)
    deps = {"tenant": "acme", "session": "s-9", "plan": "gold"}
    agent_with(Script([fw.FIRST[0]]), guard).run_sync("hi", deps=deps)
    [ctx] = seen
    assert (ctx.tenant, ctx.session, ctx.get("plan")) == ("acme", "s-9", "gold")


def test_a_tool_asking_for_approval_defers_the_call_instead_of_failing() -> None:
    from pydantic_ai.exceptions import ApprovalRequired

    def wire(ctx: RunContext[Any], amount: int) -> str:
        """Wire money; large amounts need a human's approval."""
        if amount > 100 and not ctx.tool_call_approved:
            raise ApprovalRequired()
        return f"wired {amount}"

    script = Script([("w1", "wire", {"amount": 500})])
    agent = Agent(
        FunctionModel(script),
        tools=[wire],
        output_type=[str, DeferredToolRequests],
        capabilities=[pydantic_ai.capability(fw.rails())],
    )
    result = agent.run_sync("wire 500")
    assert isinstance(result.output, DeferredToolRequests)
    assert [c.tool_call_id for c in result.output.approvals] == ["w1"]


def test_a_backstop_action_on_a_pydantic_ai_tool_is_a_usage_error_naming_it() -> None:
    engine = Guardrails(
        guards=[required_action("lookup", when=lambda run: True, arguments={"order_id": "o-1"})]
    )
    guard = pydantic_ai.capability(engine)
    with pytest.raises(UsageError, match=r"'lookup'.*backstop"):
        agent_with(Script(), guard).run_sync("hi")


def test_pre_turn_reads_the_text_of_a_multimodal_prompt() -> None:
    from pydantic_ai.messages import ImageUrl

    engine = Guardrails(guards=[trigger(["log"], remove=["dump"], name="no_dumps")])
    script = Script()
    prompt = ["show me the log", ImageUrl(url="https://example.invalid/a.png")]
    agent_with(script, pydantic_ai.capability(engine)).run_sync(prompt)
    assert "dump" not in [t.name for t in script.offered[0]]


def test_a_tool_registered_in_the_engine_under_the_same_name_is_refused() -> None:
    guard = pydantic_ai.capability(Guardrails([fw.lookup]))
    with pytest.raises(DuplicateNameError, match="'lookup'"):
        agent_with(Script(), guard).run_sync("hi")
    engine = fw.rails()
    agent_with(Script(), pydantic_ai.capability(engine)).run_sync("hi")
    with pytest.raises(DuplicateNameError, match="'lookup'"):
        agent_with(Script(), pydantic_ai.capability(engine)).run_sync("hi")
