"""OpenAI Agents SDK: real ``Runner`` runs with ``ScriptedModel``, guarded by ``guard_agent()``."""

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
from guardrails.middleware._render import TRUNCATION_MARKER  # noqa: E402
from guardrails.rules import trigger  # noqa: E402
from guardrails.testing import MemoryRecorder  # noqa: E402
from guardrails.verdicts import Outcome, model_sentence  # noqa: E402

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
    agent = openai_agents.guard_agent(
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
    agent = openai_agents.guard_agent(
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
    agent = openai_agents.guard_agent(
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
    agent = openai_agents.guard_agent(Agent(name="support", tools=mine, model=model), engine)
    await Runner.run(agent, fw.LOG_PROMPT, run_config=openai_agents.run_config())
    assert [t.name for t in model.calls[0].tools] == ["lookup", "get_orders", "explode"]
    assert outputs(model)["d1"] == fw.EXPECTED["c4"][0]

    refused = scripted()
    agent = openai_agents.guard_agent(Agent(name="support", tools=mine, model=refused), engine)
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
    agent = openai_agents.guard_agent(Agent(name="support", tools=tools(), model=model), engine)
    turn = engine.turn(tenant="acme")
    await Runner.run(agent, "first", context=turn)
    await Runner.run(agent, "second", context=turn)
    assert [r.outcome for r in turn.results] == ["ok", "limit"]
    assert isinstance(turn, Turn)


async def test_each_run_is_its_own_turn_and_every_call_is_recorded() -> None:
    recorder = MemoryRecorder()
    engine = fw.rails(recorder=recorder)
    model = scripted(*fw.STEPS)
    agent = openai_agents.guard_agent(
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
    agent = openai_agents.guard_agent(
        Agent(name="support", tools=[function_tool(fw.charge)], model=model),
        fw.secret_rails(),
        tool_options=fw.SECRETS,
    )
    await Runner.run(agent, "hi")
    assert "api_key" not in model.calls[0].tools[0].params_json_schema["properties"]
    assert outputs(model)["s1"] == "charged 5.0"


def test_tool_options_for_a_tool_the_agent_lacks_are_refused() -> None:
    with pytest.raises(ConfigurationError, match="'nope'"):
        openai_agents.guard_agent(
            Agent(name="support", tools=tools()), fw.rails(), tool_options={"nope": {}}
        )


def test_any_arguments_get_a_closed_answer() -> None:
    def answer(arguments: Any) -> tuple[str, None]:
        model = scripted([("h1", "lookup", arguments)])
        agent = openai_agents.guard_agent(
            Agent(name="support", tools=tools(), model=model), fw.rails()
        )
        asyncio.run(Runner.run(agent, "hi"))
        [content] = outputs(model).values()
        return content, None  # this API has no error flag

    fw.answers_to_any_lookup_arguments(answer)


async def test_tenant_and_session_come_from_the_run_context() -> None:
    engine, seen = fw.context_probe()
    model = scripted([fw.FIRST[0]])
    agent = openai_agents.guard_agent(Agent(name="support", tools=tools(), model=model), engine)
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
    agent = openai_agents.guard_agent(
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
    agent = openai_agents.guard_agent(
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
    agent = openai_agents.guard_agent(
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
        openai_agents.guard_agent(Agent(name="support", tools=tools()), Guardrails([fw.lookup]))
    engine = fw.rails()
    agent = Agent(name="support", tools=tools())
    first = openai_agents.guard_agent(agent, engine)
    again = openai_agents.guard_agent(agent, engine)  # the same tools: registered once
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
    agent = openai_agents.guard_agent(
        Agent(name="support", tools=[lookup], model=model), fw.rails(recorder=recorder)
    )
    await Runner.run(agent, "hi")
    assert outputs(model) == {"u1": fw.UNDECLARED_SENTENCE}
    [result] = recorder.results
    assert (result.outcome, result.reason) == ("invalid_args", "undeclared_parameter")


# -- rich outputs, the SDK's own checks, handoffs, MCP servers ---------------------------

PNG_URL = (
    "data:image/png;base64,"
    "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNkYPhfDwAChwGA60e6kgAAAABJRU5ErkJggg=="
)


async def test_an_image_output_reaches_the_model_as_an_image_item() -> None:
    from agents import ToolOutputImage, ToolOutputText

    @function_tool
    def chart() -> list[Any]:
        """The month's spending as a chart."""
        return [ToolOutputText(text="spending"), ToolOutputImage(image_url=PNG_URL)]

    recorder = MemoryRecorder()
    model = scripted([("i1", "chart", {})])
    agent = openai_agents.guard_agent(
        Agent(name="support", tools=[chart], model=model), fw.rails(recorder=recorder)
    )
    await Runner.run(agent, "hi")
    assert outputs(model)["i1"] == [
        {"type": "input_text", "text": "spending"},
        {"type": "input_image", "image_url": PNG_URL},
    ]
    [result] = recorder.results
    assert result.content == "spending\n[image/png, 70 bytes]"


async def test_an_image_output_over_the_cap_is_sent_as_its_capped_stand_in() -> None:
    from agents import ToolOutputImage, ToolOutputText

    @function_tool
    def chart() -> list[Any]:
        """The month's spending as a chart."""
        return [ToolOutputText(text="s" * 100), ToolOutputImage(image_url=PNG_URL)]

    model = scripted([("i1", "chart", {})])
    agent = openai_agents.guard_agent(
        Agent(name="support", tools=[chart], model=model), Guardrails(max_result_chars=64)
    )
    await Runner.run(agent, "hi")
    sent = outputs(model)["i1"]
    assert sent == "s" * (64 - len(TRUNCATION_MARKER)) + TRUNCATION_MARKER


async def test_a_call_the_tools_own_input_guardrail_refuses_is_audited() -> None:
    from agents import ToolGuardrailFunctionOutput, tool_input_guardrail

    @tool_input_guardrail
    def no_dumps(data: Any) -> Any:
        return ToolGuardrailFunctionOutput.reject_content("not allowed", output_info="dump")

    dump = function_tool(fw.dump, tool_input_guardrails=[no_dumps])
    recorder = MemoryRecorder()
    model = scripted([fw.FIRST[0], ("c7", "dump", {})])
    agent = openai_agents.guard_agent(
        Agent(name="support", tools=[function_tool(fw.lookup), dump], model=model),
        fw.rails(recorder=recorder),
    )
    await Runner.run(agent, "hi")
    assert outputs(model) == {"c1": "order o-1", "c7": "not allowed"}
    refused = {r.call_id: (r.outcome, r.reason) for r in recorder.results}
    assert refused == {"c1": ("ok", None), "c7": ("unavailable", "guard")}
    [verdict] = [v for v in recorder.verdicts if v.verdict == "reject"]
    assert verdict.guard == "framework_check"


async def test_a_refused_calls_function_span_is_an_error_without_the_exception_text() -> None:
    from agents import set_trace_processors
    from agents.tracing import TracingProcessor

    class Keep(TracingProcessor):  # type: ignore[misc]
        def __init__(self) -> None:
            self.spans: list[Any] = []

        def on_trace_start(self, trace: Any) -> None: ...
        def on_trace_end(self, trace: Any) -> None: ...
        def on_span_start(self, span: Any) -> None: ...
        def on_span_end(self, span: Any) -> None:
            self.spans.append(span)

        def shutdown(self) -> None: ...
        def force_flush(self) -> None: ...

    keep = Keep()
    set_trace_processors([keep])
    set_tracing_disabled(False)
    try:
        model = scripted(
            [fw.FIRST[0], ("c3", "lookup", {"order_id": 7}), ("c6", "explode", {"x": 1})]
        )
        agent = openai_agents.guard_agent(
            Agent(name="support", tools=tools(), model=model), fw.rails()
        )
        await Runner.run(agent, "hi")
    finally:
        set_tracing_disabled(True)
        set_trace_processors([])
    errors = sorted(
        (s.span_data.name, s.error["message"])
        for s in keep.spans
        if s.span_data.type == "function" and s.error is not None
    )
    assert errors == [("explode", "guardrails: error"), ("lookup", "guardrails: invalid_args")]
    assert fw.SECRET not in repr([s.export() for s in keep.spans])


async def test_an_agent_that_hands_off_gets_its_post_run_at_the_runs_end() -> None:
    engine, notify_human, notified = fw.backstop()
    reports: list[Any] = []
    billing = Agent(name="billing", model=scripted(final=fw.ESCALATE))
    front = openai_agents.guard_agent(
        Agent(
            name="support",
            tools=[function_tool(notify_human)],
            handoffs=[billing],
            model=ScriptedModel([[function_call("transfer_to_billing", {}, call_id="h1")]]),
        ),
        engine,
        tool_options=fw.BACKSTOP_BIND,
        on_report=reports.append,
    )
    result = await Runner.run(front, "help", context=context())
    assert result.final_output == fw.ESCALATE and result.last_agent.name == "billing"
    [report] = reports
    assert report.text == fw.ESCALATE
    assert notified == fw.NOTIFIED  # the backstop ran on the run's real answer


class Files:
    """An MCP server of the application's (the SDK's ``MCPServer``, built on first use)."""

    @staticmethod
    def make(answer: str = "contents of a") -> Any:
        from agents.mcp import MCPServer
        from mcp.types import CallToolResult, TextContent
        from mcp.types import Tool as MCPTool

        class Server(MCPServer):  # type: ignore[misc]
            def __init__(self) -> None:
                super().__init__()
                self.calls: list[tuple[str, Any]] = []

            @property
            def name(self) -> str:
                return "files"

            async def connect(self) -> None: ...
            async def cleanup(self) -> None: ...

            async def list_tools(self, run_context: Any = None, agent: Any = None) -> Any:
                schema = {
                    "type": "object",
                    "properties": {"path": {"type": "string"}},
                    "required": ["path"],
                }
                return [MCPTool(name="read_file", description="Read.", inputSchema=schema)]

            async def call_tool(self, tool_name: str, arguments: Any, meta: Any = None) -> Any:
                self.calls.append((tool_name, arguments))
                return CallToolResult(content=[TextContent(type="text", text=answer)])

            async def list_prompts(self) -> Any:
                raise NotImplementedError

            async def get_prompt(self, name: str, arguments: Any = None) -> Any:
                raise NotImplementedError

        return Server()


async def test_the_tools_of_mcp_servers_go_through_tool_call() -> None:
    server = Files.make()
    recorder = MemoryRecorder()
    calls = [
        ("m1", "read_file", {"path": "a"}),
        ("m2", "read_file", {"path": "a", "from_account": "acc-666"}),
        ("m3", "read_file", {}),
    ]
    model = scripted(calls)
    agent = openai_agents.guard_agent(
        Agent(name="support", model=model, mcp_servers=[server]), fw.rails(recorder=recorder)
    )
    await Runner.run(agent, "read a", run_config=openai_agents.run_config())
    assert server.calls == [("read_file", {"path": "a"})]  # the refused calls never reach it
    sent = outputs(model)
    # The SDK's own form of the server's text content; its text is what was audited.
    assert sent["m1"] == [{"type": "input_text", "text": "contents of a"}]
    assert sent["m2"] == fw.UNDECLARED_SENTENCE
    assert sent["m3"] == model_sentence(Outcome.INVALID_ARGS, ["path"])
    outcomes = {r.call_id: (r.outcome, r.reason) for r in recorder.results}
    assert [r.content for r in recorder.results if r.ok] == ["contents of a"]
    assert outcomes == {
        "m1": ("ok", None),
        "m2": ("invalid_args", "undeclared_parameter"),
        "m3": ("invalid_args", "missing_required"),
    }


async def test_an_mcp_servers_tool_is_offered_by_pre_turn_and_capped() -> None:
    server = Files.make("x" * 5000)
    engine = Guardrails(
        max_result_chars=100, guards=[trigger(["secret"], remove=["read_file"], name="no_files")]
    )
    agent = openai_agents.guard_agent(Agent(name="support", mcp_servers=[server]), engine)
    withheld = scripted([("w1", "read_file", {"path": "a"})])
    await Runner.run(
        agent.clone(model=withheld), "the secret file", run_config=openai_agents.run_config()
    )
    assert outputs(withheld) == {"w1": model_sentence(Outcome.UNAVAILABLE)}
    assert server.calls == []
    capped = scripted([("c1", "read_file", {"path": "a"})])
    again = openai_agents.guard_agent(Agent(name="support", mcp_servers=[server]), engine)
    await Runner.run(again.clone(model=capped), "read a")  # another guard_agent(), one engine tool
    assert outputs(capped)["c1"].endswith(TRUNCATION_MARKER) and len(outputs(capped)["c1"]) == 100


async def test_a_run_resumed_after_an_approval_goes_on_in_the_same_turn() -> None:
    from guardrails.audit import AuditLog
    from guardrails.store import MemoryStore

    ran: list[str] = []

    @function_tool(needs_approval=True)
    def refund(order_id: str) -> str:
        """Refund an order (a person approves it first)."""
        ran.append(order_id)
        return f"refunded {order_id}"

    audit = AuditLog(MemoryStore())
    engine = Guardrails(max_calls_per_turn=2, hooks=[audit], recorder=[audit])
    model = ScriptedModel(
        [
            [
                fw_call("c1", "lookup", {"order_id": "o-1"}),
                fw_call("r1", "refund", {"order_id": "o-1"}),
            ],
            [fw_call("c2", "lookup", {"order_id": "o-2"})],
            [assistant_message(fw.FINAL)],
        ]
    )
    reports: list[Any] = []
    agent = openai_agents.guard_agent(
        Agent(name="support", tools=[function_tool(fw.lookup), refund], model=model),
        engine,
        on_report=reports.append,
    )
    paused = await Runner.run(agent, "refund o-1")
    [waiting] = paused.interruptions
    assert ran == [] and reports == []
    state = paused.to_state()
    state.approve(waiting)
    done = await Runner.run(agent, state)
    assert done.final_output == fw.FINAL and ran == ["o-1"]
    rows = list(audit.rows())
    assert [r.kind for r in rows].count("pre_turn") == 1
    calls = {r.call_id: r.outcome for r in rows if r.kind == "tool_call"}
    assert calls == {"c1": "ok", "r1": "ok", "c2": "limit"}  # one turn: one ceiling
    assert len(reports) == 1


def fw_call(call_id: str, name: str, arguments: dict[str, Any]) -> Any:
    return function_call(name, arguments, call_id=call_id)


async def test_the_sdk_alone_sends_the_documented_sentence() -> None:
    from pathlib import Path

    model = scripted([fw.FIRST[2], fw.FIRST[5]])
    await Runner.run(Agent(name="support", tools=tools(), model=model), "hi")
    sentence = "An error occurred while running the tool."
    assert outputs(model) == {"c3": sentence, "c6": sentence}
    page = (Path(__file__).resolve().parents[2] / "docs/integrations/openai_agents.md").read_text()
    assert f"| wrong or missing arguments | `{sentence}` (no parameter named" in page


async def test_an_agent_given_as_a_tool_is_guarded_like_any_function_tool() -> None:
    helper = Agent(name="helper", model=scripted(final="helped"))
    as_tool = helper.as_tool(tool_name="ask_helper", tool_description="Ask the helper.")
    recorder = MemoryRecorder()
    model = scripted(
        [("a1", "ask_helper", {"input": "hi", "x": 1}), ("a2", "ask_helper", {"input": "hi"})]
    )
    agent = openai_agents.guard_agent(
        Agent(name="support", tools=[as_tool], model=model), fw.rails(recorder=recorder)
    )
    await Runner.run(agent, "hi")
    assert outputs(model) == {"a1": fw.UNDECLARED_SENTENCE, "a2": "helped"}
    assert [(r.call_id, r.outcome) for r in recorder.results] == [
        ("a1", "invalid_args"),
        ("a2", "ok"),
    ]


@pytest.mark.parametrize(
    ("value", "stand_in"),
    [
        ({"type": "text", "text": "hi"}, "hi"),
        ({"type": "image", "file_id": "file-1"}, "[image: file-1]"),
        ({"type": "image", "image_url": "https://x.test/a.png"}, "[image: https://x.test/a.png]"),
        (
            {"type": "file", "file_data": "aGVsbG8=", "filename": "a.txt"},
            "[application/octet-stream, 5 bytes]",
        ),
        (
            {"type": "file", "file_url": "https://x.test/a.pdf"},
            "[application/octet-stream: https://x.test/a.pdf]",
        ),
        (
            [{"type": "text", "text": "a"}, {"type": "file", "file_id": "f-2"}],
            "a\n[application/octet-stream: f-2]",
        ),
        ({"query": "fees"}, None),  # a plain dict result
        ({"type": "chart", "x": 1}, None),  # a type the SDK does not know
        ([], None),
        ([{"type": "text", "text": "a"}, "b"], None),  # not every element an item
    ],
)
def test_output_items_have_a_stand_in_without_their_bytes(value: Any, stand_in: str | None) -> None:
    from guardrails.integrations._openai_items import output_items

    rich = output_items(value)
    assert (None if rich is None else rich.text) == stand_in
    assert rich is None or rich.native is value


def test_no_export_hides_the_guard_decorator() -> None:
    import guardrails

    assert "guard" not in openai_agents.__all__ and not hasattr(openai_agents, "guard")
    assert guardrails.guard is not getattr(openai_agents, "guard", None)
