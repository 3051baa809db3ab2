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


def test_the_model_is_sent_our_outcomes_and_sentences_only() -> None:
    script = Script(*fw.STEPS)
    reports: list[Any] = []
    guard = pydantic_ai.capability(fw.rails(), tool_options=fw.BIND, on_report=reports.append)
    result = agent_with(script, guard).run_sync("my orders", deps=context())
    assert result.output == fw.FINAL
    answers = script.answers()
    assert answers == fw.EXPECTED
    assert fw.SECRET not in str(answers) and "acc-666" not in str(answers)
    [report] = reports
    assert report.text == fw.FINAL


async def test_async_run_sends_the_same() -> None:
    script = Script(*fw.STEPS)
    guard = pydantic_ai.capability(fw.rails(), tool_options=fw.BIND)
    await agent_with(script, guard).run("my orders", deps=context())
    assert script.answers() == fw.EXPECTED


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
    assert {r.call_id: r.outcome for r in recorder.results} == fw.OUTCOMES
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


def test_an_unknown_tool_called_again_and_again_is_unavailable_and_the_run_goes_on() -> None:
    from pydantic_ai.exceptions import UnexpectedModelBehavior

    steps = [[(f"u{i}", "nope", {"a": i})] for i in range(3)]
    with pytest.raises(UnexpectedModelBehavior):  # pydantic-ai alone: the second one ends the run
        agent_with(Script(*steps)).run_sync("hi")
    recorder = MemoryRecorder()
    script = Script(*steps)
    result = agent_with(script, pydantic_ai.capability(fw.rails(recorder=recorder))).run_sync("hi")
    assert result.output == fw.FINAL
    assert script.answers() == {f"u{i}": fw.EXPECTED["c4"] for i in range(3)}
    assert [(r.call_id, r.tool, r.outcome) for r in recorder.results] == [
        (f"u{i}", "nope", "unavailable") for i in range(3)
    ]
    assert all("nope" not in str(t) for t in script.offered)  # never offered to the model


def test_a_call_of_an_unknown_tool_never_names_a_withheld_one() -> None:
    script = Script([("n1", "nope", {})])
    agent_with(script, pydantic_ai.capability(fw.trigger_rails())).run_sync(fw.LOG_PROMPT)
    assert script.answers() == {"n1": fw.EXPECTED["c4"]}
    assert "dump" not in str(script.sent)


def image() -> Any:
    """A chart."""
    from pydantic_ai import BinaryContent

    return BinaryContent(data=b"\x89PNG-chart", media_type="image/png")


def report() -> Any:
    """A report: a value for the tool's answer, a picture for the model to look at."""
    from pydantic_ai import BinaryContent, ToolReturn

    picture = BinaryContent(data=b"\x89PNG-report", media_type="image/png")
    return ToolReturn(return_value={"rows": 3}, content=["the picture:", picture])


def links() -> Any:
    """Pictures given by address."""
    from pydantic_ai.messages import ImageUrl

    return ["two pictures", ImageUrl(url="https://example.invalid/a.png")]


def huge_report() -> Any:
    """A report whose text is far over the size cap."""
    from pydantic_ai import BinaryContent, ToolReturn

    picture = BinaryContent(data=b"\x89PNG", media_type="image/png")
    return ToolReturn(return_value="y" * 5_000, content=[picture])


def rich_run(*capabilities: Any) -> list[Any]:
    """The parts of the request that carries the rich tools' answers."""
    calls = [("i1", "image", {}), ("r1", "report", {}), ("l1", "links", {})]
    script = Script(calls)
    agent_with(script, *capabilities, tools=[image, report, links]).run_sync("hi")
    [request] = [m for m in script.sent if any(isinstance(p, ToolReturnPart) for p in m.parts)]
    return [(type(p).__name__, getattr(p, "content", None)) for p in request.parts]


def test_rich_results_reach_the_model_natively_and_their_stand_in_is_audited() -> None:
    recorder = MemoryRecorder()
    guarded_parts = rich_run(pydantic_ai.capability(fw.rails(recorder=recorder)))
    assert guarded_parts == rich_run()  # the same parts, in pydantic-ai's own form
    assert {r.call_id: (r.outcome, r.content) for r in recorder.results} == {
        "i1": ("ok", "[image/png, 10 bytes]"),
        "r1": ("ok", '{"rows":3}\nthe picture:\n[image/png, 11 bytes]'),
        "l1": ("ok", "two pictures\n[image/png: https://example.invalid/a.png]"),
    }


def test_a_rich_result_over_the_size_cap_is_sent_as_its_cut_text() -> None:
    script = Script([("h1", "huge_report", {})])
    capability = pydantic_ai.capability(fw.rails())
    agent_with(script, capability, tools=[huge_report]).run_sync("hi")
    [(content, failed)] = script.answers().values()
    assert (content, failed) == (fw.TRUNCATED.replace("x", "y"), False)
    assert "BinaryContent" not in str(script.sent)  # nothing past the cut reaches the model


@pytest.mark.parametrize("declared", [False, True])
def test_a_deferred_call_resumed_after_approval_continues_the_same_turn(declared: bool) -> None:
    from pydantic_ai import DeferredToolResults
    from pydantic_ai.exceptions import ApprovalRequired

    def wire(ctx: RunContext[Any], amount: int) -> str:
        """Wire money; it needs a human's approval."""
        if not (declared or ctx.tool_call_approved):
            raise ApprovalRequired()
        return f"wired {amount}"

    script = Script(
        [("l1", "lookup", {"order_id": "o-1"}), ("w1", "wire", {"amount": 500})],
        [("l2", "lookup", {"order_id": "o-2"})],
        [("l3", "lookup", {"order_id": "o-3"})],
        [("l4", "lookup", {"order_id": "o-4"})],
    )
    recorder = MemoryRecorder()
    reports: list[Any] = []
    engine = Guardrails(max_calls_per_turn=4, recorder=recorder)
    agent = Agent(
        FunctionModel(script),
        tools=[fw.lookup, pydantic_ai_tool(wire, requires_approval=declared)],
        output_type=[str, DeferredToolRequests],
        capabilities=[pydantic_ai.capability(engine, on_report=reports.append)],
    )
    paused = agent.run_sync("wire 500")
    assert isinstance(paused.output, DeferredToolRequests) and reports == []
    if declared:  # what a person is shown to approve: the model's arguments
        assert paused.output.validated_args == {"w1": {"amount": 500}}
    resumed = agent.run_sync(
        message_history=paused.all_messages(),
        deferred_tool_results=DeferredToolResults(approvals={"w1": True}),
    )
    assert resumed.output == fw.FINAL
    answers = script.answers()
    assert answers["w1"] == ("wired 500", False)
    # One turn: the ceiling of 4 counts the calls of both runs (a call deferred by the tool
    # itself ran once before), pre_turn ran once, post_run once.
    assert answers["l4"] == fw.EXPECTED["c9"]
    assert [kind for kind, _ in recorder.events].count("pre_turn") == 1
    assert [r.text for r in reports] == [fw.FINAL]


def pydantic_ai_tool(fn: Any, **options: Any) -> Any:
    from pydantic_ai import Tool as PydanticTool

    return PydanticTool(fn, **options)


def test_hostile_tool_names_and_arguments_are_answered_unavailable_and_the_run_goes_on() -> None:
    names = ["", "a" * 5_000, "\ud800x", "lookup ", "__class__", "x\x00y", "get_orders\n"]
    script = Script([(f"h{i}", name, "not json{") for i, name in enumerate(names)])
    recorder = MemoryRecorder()
    result = agent_with(script, pydantic_ai.capability(fw.rails(recorder=recorder))).run_sync("hi")
    assert result.output == fw.FINAL
    assert script.answers() == {f"h{i}": fw.EXPECTED["c4"] for i in range(len(names))}
    assert {(r.outcome, r.reason) for r in recorder.results} == {("unavailable", "unknown_tool")}


def test_a_deferred_call_a_person_denies_is_audited_and_never_runs() -> None:
    from pydantic_ai import DeferredToolResults

    ran: list[int] = []

    def wire(amount: int) -> str:
        """Wire money (a person approves each wire)."""
        ran.append(amount)
        return f"wired {amount}"

    script = Script([("w1", "wire", {"amount": 500})])
    recorder = MemoryRecorder()
    agent = Agent(
        FunctionModel(script),
        tools=[pydantic_ai_tool(wire, requires_approval=True)],
        output_type=[str, DeferredToolRequests],
        capabilities=[pydantic_ai.capability(Guardrails(recorder=recorder))],
    )
    paused = agent.run_sync("wire 500")
    agent.run_sync(
        message_history=paused.all_messages(),
        deferred_tool_results=DeferredToolResults(approvals={"w1": False}),
    )
    assert ran == []
    [refused] = recorder.results
    assert (refused.call_id, refused.outcome, refused.reason) == ("w1", "unavailable", "guard")
    assert [kind for kind, _ in recorder.events].count("pre_turn") == 1
