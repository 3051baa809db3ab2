"""LangChain v1: a real ``create_agent`` run with a scripted chat model, guarded by the middleware."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from tests.integrations import _frameworks as fw

fw.need("langchain")

from langchain.agents import create_agent  # noqa: E402
from langchain_core.messages import AIMessage, BaseMessage, ToolMessage  # noqa: E402
from langchain_core.tools import StructuredTool  # noqa: E402

from guardrails import ConfigurationError, DuplicateNameError, Guardrails  # noqa: E402
from guardrails.integrations import langchain  # noqa: E402
from guardrails.integrations.langchain import STATE_KEY  # noqa: E402
from guardrails.middleware._render import TRUNCATION_MARKER  # noqa: E402
from guardrails.testing import MemoryRecorder  # noqa: E402


def model(*steps: list[tuple[str, str, dict[str, Any]]], final: str = fw.FINAL) -> Any:
    replies = [
        AIMessage(content="", tool_calls=[{"name": n, "args": a, "id": i} for i, n, a in step])
        for step in steps
    ]
    return langchain.scripted_model(*replies, AIMessage(content=final))


def tools() -> list[StructuredTool]:
    return [
        StructuredTool.from_function(f) for f in (fw.lookup, fw.get_orders, fw.explode, fw.dump)
    ]


def tool_messages(messages: list[BaseMessage]) -> dict[str, tuple[str, bool]]:
    return {
        m.tool_call_id: (m.content, m.status == "error")
        for m in messages
        if isinstance(m, ToolMessage)
    }


def context() -> dict[str, Any]:
    return {"account_id": fw.ACCOUNT, "tenant": "acme"}


def test_the_model_is_sent_our_outcomes_and_sentences_only() -> None:
    engine = fw.rails()
    reports: list[Any] = []
    chat = model(*fw.STEPS)
    agent = create_agent(
        chat,
        tools(),
        middleware=[langchain.middleware(engine, tool_options=fw.BIND, on_report=reports.append)],
    )
    out = agent.invoke({"messages": [{"role": "user", "content": "my orders"}]}, context=context())
    assert tool_messages(chat.sent[-1]) == fw.EXPECTED
    assert out["messages"][-1].content == fw.FINAL
    answers = str([m for m in out["messages"] if isinstance(m, ToolMessage)])
    assert fw.SECRET not in answers and "acc-666" not in answers
    [report] = reports
    assert report.text == fw.FINAL
    assert STATE_KEY not in out


async def test_async_run_sends_the_same() -> None:
    chat = model(*fw.STEPS)
    agent = create_agent(
        chat, tools(), middleware=[langchain.middleware(fw.rails(), tool_options=fw.BIND)]
    )
    await agent.ainvoke({"messages": [{"role": "user", "content": "my orders"}]}, context=context())
    assert tool_messages(chat.sent[-1]) == fw.EXPECTED


def test_without_the_middleware_the_framework_echoes_arguments_and_aborts_on_exceptions() -> None:
    chat = model([fw.FIRST[2], fw.FIRST[4]], [fw.FIRST[5]])
    agent = create_agent(chat, tools())
    with pytest.raises(RuntimeError, match="sk-live-123"):
        agent.invoke({"messages": [{"role": "user", "content": "my orders"}]})
    sent = tool_messages(chat.sent[1])
    assert "with kwargs {'order_id': 7}" in sent["c3"][0]  # the model's arguments, echoed
    assert sent["c5"] == ("acc-666:open", False)  # the model chose the account


def test_bound_parameters_are_hidden_from_the_offered_schema() -> None:
    chat = model()
    agent = create_agent(
        chat, tools(), middleware=[langchain.middleware(fw.rails(), tool_options=fw.BIND)]
    )
    agent.invoke({"messages": [{"role": "user", "content": "hi"}]}, context=context())
    offered = {t["function"]["name"]: t["function"]["parameters"] for t in chat.offered[0]}
    assert sorted(offered) == ["dump", "explode", "get_orders", "lookup"]
    assert "account_id" not in offered["get_orders"]["properties"]
    assert offered["lookup"]["required"] == ["order_id"]


def test_pre_turn_withholds_tools_and_a_withheld_tool_is_unavailable() -> None:
    chat = model([("d1", "dump", {})])
    agent = create_agent(chat, tools(), middleware=[langchain.middleware(fw.trigger_rails())])
    agent.invoke({"messages": [{"role": "user", "content": fw.LOG_PROMPT}]})
    assert [t["function"]["name"] for t in chat.offered[0]] == ["lookup", "get_orders", "explode"]
    assert tool_messages(chat.sent[1]) == {"d1": (fw.EXPECTED["c4"][0], True)}


def test_a_refused_turn_never_reaches_the_model() -> None:
    chat = model([fw.FIRST[0]])
    agent = create_agent(chat, tools(), middleware=[langchain.middleware(fw.trigger_rails())])
    out = agent.invoke({"messages": [{"role": "user", "content": fw.REFUSED_PROMPT}]})
    assert chat.sent == []
    assert out["messages"][-1].content == fw.REFUSAL
    assert out["messages"][-1].response_metadata["guardrails_refusal"] == fw.REFUSAL


def test_the_session_comes_from_the_thread_and_the_tenant_from_the_context() -> None:
    engine, seen = fw.context_probe()
    agent = create_agent(model([fw.FIRST[0]]), tools(), middleware=[langchain.middleware(engine)])
    agent.invoke(
        {"messages": [{"role": "user", "content": "hi"}]},
        context={"tenant": "acme"},
        config={"configurable": {"thread_id": "th-1"}},
    )
    [ctx] = seen
    assert (ctx.tenant, ctx.session) == ("acme", "th-1")


def test_a_tool_registered_in_the_engine_under_the_same_name_is_refused() -> None:
    engine = Guardrails([fw.lookup])
    agent = create_agent(model(), tools(), middleware=[langchain.middleware(engine)])
    with pytest.raises(DuplicateNameError, match="'lookup'"):
        agent.invoke({"messages": [{"role": "user", "content": "hi"}]})


def test_bad_tool_options_name_the_tool() -> None:
    engine = fw.rails()
    agent = create_agent(
        model(),
        tools(),
        middleware=[langchain.middleware(engine, tool_options={"lookup": {"bind": {"nope": "x"}}})],
    )
    with pytest.raises(ConfigurationError, match=r"'lookup'.*'nope'"):
        agent.invoke({"messages": [{"role": "user", "content": "hi"}]})


def test_every_call_is_recorded_and_each_run_is_a_turn_of_its_own() -> None:
    recorder = MemoryRecorder()
    engine = fw.rails(recorder=recorder)
    replies = [
        AIMessage(content="", tool_calls=[{"name": n, "args": a, "id": i} for i, n, a in step])
        for step in fw.STEPS
    ]
    second = AIMessage(
        content="", tool_calls=[{"name": "lookup", "args": {"order_id": "o-3"}, "id": "d1"}]
    )
    chat = langchain.scripted_model(
        *replies, AIMessage(content="one"), second, AIMessage(content="two")
    )
    agent = create_agent(
        chat, tools(), middleware=[langchain.middleware(engine, tool_options=fw.BIND)]
    )
    agent.invoke({"messages": [{"role": "user", "content": "hi"}]}, context=context())
    assert {r.call_id: r.outcome for r in recorder.results} == fw.OUTCOMES
    # The second run starts a new turn: the ceiling the first one reached is not carried over.
    agent.invoke({"messages": [{"role": "user", "content": "again"}]}, context=context())
    assert tool_messages(chat.sent[-1]) == {"d1": ("order o-3", False)}


def test_concurrent_sync_calls_of_one_step_respect_the_ceiling() -> None:
    calls = [(f"p{i}", "lookup", {"order_id": f"o-{i}"}) for i in range(12)]
    chat = model(calls)
    agent = create_agent(chat, tools(), middleware=[langchain.middleware(fw.rails())])
    agent.invoke({"messages": [{"role": "user", "content": "hi"}]})
    answers = tool_messages(chat.sent[-1])
    assert sorted(is_error for _, is_error in answers.values()) == [False] * fw.CEILING + [True] * (
        12 - fw.CEILING
    )


def test_secrets_reach_action_tools_and_never_the_model() -> None:
    chat = model([("s1", "charge", {"amount": 5})])
    agent = create_agent(
        chat,
        [StructuredTool.from_function(fw.charge)],
        middleware=[langchain.middleware(fw.secret_rails(), tool_options=fw.SECRETS)],
    )
    agent.invoke({"messages": [{"role": "user", "content": "hi"}]})
    assert "api_key" not in chat.offered[0][0]["function"]["parameters"]["properties"]
    assert tool_messages(chat.sent[-1]) == {"s1": ("charged 5.0", False)}


def test_tool_options_for_a_tool_the_agent_lacks_are_refused() -> None:
    middleware = langchain.middleware(fw.rails(), tool_options={"nope": {}})
    agent = create_agent(model(), tools(), middleware=[middleware])
    with pytest.raises(ConfigurationError, match="'nope'"):
        agent.invoke({"messages": [{"role": "user", "content": "hi"}]})


def test_public_names_are_the_documented_ones() -> None:
    page = (Path(__file__).resolve().parents[2] / "docs/integrations/langchain.md").read_text()
    assert f'response_metadata["{langchain.REFUSAL_KEY}"]' in page
    assert STATE_KEY == "guardrails_run"


@pytest.mark.slow
def test_any_arguments_get_a_closed_answer() -> None:
    def answer(arguments: Any) -> tuple[str, bool]:
        chat = model([("h1", "lookup", arguments)])
        agent = create_agent(chat, tools(), middleware=[langchain.middleware(fw.rails())])
        agent.invoke({"messages": [{"role": "user", "content": "hi"}]})
        [found] = tool_messages(chat.sent[-1]).values()
        return found

    fw.answers_to_any_lookup_arguments(answer, text=False)


def test_an_undeclared_argument_is_refused_and_audited_like_a_direct_call() -> None:
    recorder = MemoryRecorder()
    chat = model([fw.UNDECLARED])
    agent = create_agent(
        chat, tools(), middleware=[langchain.middleware(fw.rails(recorder=recorder))]
    )
    agent.invoke({"messages": [{"role": "user", "content": "hi"}]})
    assert tool_messages(chat.sent[-1]) == {"u1": (fw.UNDECLARED_SENTENCE, True)}
    [result] = recorder.results
    assert (result.outcome, result.reason) == ("invalid_args", "undeclared_parameter")


def test_an_interrupt_in_a_tool_pauses_the_graph_and_the_resumed_call_keeps_its_context() -> None:
    from langgraph.checkpoint.memory import InMemorySaver
    from langgraph.types import Command, interrupt

    def approve_refund(order_id: str, account_id: str) -> str:
        """Refund an order once a human approved it."""
        answer = interrupt(f"refund {order_id}?")
        return f"{account_id}: refund {order_id} {answer}"

    chat = model([("a1", "approve_refund", {"order_id": "o-1"})])
    agent = create_agent(
        chat,
        [StructuredTool.from_function(approve_refund)],
        middleware=[
            langchain.middleware(
                fw.rails(), tool_options={"approve_refund": {"bind": {"account_id": "account_id"}}}
            )
        ],
        checkpointer=InMemorySaver(),
    )
    config: Any = {"configurable": {"thread_id": "th-1"}}
    paused = agent.invoke(
        {"messages": [{"role": "user", "content": "refund o-1"}]}, config, context=context()
    )
    assert paused["__interrupt__"][0].value == "refund o-1?"
    done = agent.invoke(Command(resume="approved"), config, context=context())
    assert tool_messages(done["messages"]) == {"a1": (f"{fw.ACCOUNT}: refund o-1 approved", False)}


def test_a_backstop_action_runs_the_agents_tool() -> None:
    engine, notify_human, notified = fw.backstop()
    reports: list[Any] = []
    guard = langchain.middleware(engine, tool_options=fw.BACKSTOP_BIND, on_report=reports.append)
    agent = create_agent(
        model(final=fw.ESCALATE), [StructuredTool.from_function(notify_human)], middleware=[guard]
    )
    agent.invoke({"messages": [{"role": "user", "content": "help"}]}, context=context())
    assert notified == fw.NOTIFIED
    [action] = reports[0].actions
    assert action.outcome == "ok"


async def test_a_streamed_run_is_guarded_the_same() -> None:
    chat = model(*fw.STEPS)
    agent = create_agent(
        chat, tools(), middleware=[langchain.middleware(fw.rails(), tool_options=fw.BIND)]
    )
    inputs = {"messages": [{"role": "user", "content": "my orders"}]}
    async for _ in agent.astream(inputs, context=context()):
        pass
    assert tool_messages(chat.sent[-1]) == fw.EXPECTED


def test_a_langgraph_tool_node_alone_is_guarded_call_by_call() -> None:
    from langgraph.prebuilt import ToolNode
    from langgraph.runtime import Runtime

    guard = langchain.middleware(fw.rails(), tool_options=fw.BIND)
    node = ToolNode(tools(), wrap_tool_call=guard.wrap_tool_call)
    calls = [
        {"name": n, "args": a, "id": i, "type": "tool_call"} for i, n, a in [*fw.FIRST, *fw.SECOND]
    ]
    config: Any = {"configurable": {"__pregel_runtime": Runtime(context=context())}}
    out = node.invoke(calls, config)
    # Without create_agent there is no run: each call is a turn of its own (no ceiling).
    expected = {k: v for k, v in fw.EXPECTED.items() if k != "c9"}
    assert tool_messages(out["messages"]) == expected


# -- results that are not only text -------------------------------------------------------

PNG_B64 = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNkYPhfDwAChwGA60e6kgAAAABJRU5ErkJggg=="


def chart() -> list[dict[str, Any]]:
    """The month's spending as a chart."""
    return [
        {"type": "text", "text": "spending" + " " * 40},
        {"type": "image", "base64": PNG_B64, "mime_type": "image/png"},
    ]


def test_an_image_result_reaches_the_model_as_content_blocks() -> None:
    recorder = MemoryRecorder()
    chat = model([("i1", "chart", {})])
    agent = create_agent(
        chat,
        [StructuredTool.from_function(chart)],
        middleware=[langchain.middleware(fw.rails(recorder=recorder))],
    )
    agent.invoke({"messages": [{"role": "user", "content": "hi"}]})
    [message] = [m for m in chat.sent[-1] if isinstance(m, ToolMessage)]
    assert (message.content, message.status) == (chart(), "success")
    # What tool_call capped and audited: the text, and a note for the image (never its bytes).
    [result] = recorder.results
    assert result.content == "spending" + " " * 40 + "\n[image/png, 70 bytes]"


def test_an_image_result_over_the_cap_is_sent_as_its_capped_stand_in() -> None:
    chat = model([("i1", "chart", {})])
    engine = Guardrails(max_result_chars=64)
    agent = create_agent(
        chat, [StructuredTool.from_function(chart)], middleware=[langchain.middleware(engine)]
    )
    agent.invoke({"messages": [{"role": "user", "content": "hi"}]})
    [message] = [m for m in chat.sent[-1] if isinstance(m, ToolMessage)]
    assert isinstance(message.content, str) and len(message.content) == 64
    assert message.content.startswith("spending ") and message.content.endswith(TRUNCATION_MARKER)


def test_the_artifact_of_a_content_and_artifact_tool_is_kept() -> None:
    def search(query: str) -> tuple[str, dict[str, Any]]:
        """Search the help centre."""
        return f"2 hits for {query}", {"ids": [3, 7]}

    tool = StructuredTool.from_function(search, response_format="content_and_artifact")
    chat = model([("a1", "search", {"query": "fees"})])
    agent = create_agent(chat, [tool], middleware=[langchain.middleware(fw.rails())])
    out = agent.invoke({"messages": [{"role": "user", "content": "hi"}]})
    [message] = [m for m in out["messages"] if isinstance(m, ToolMessage)]
    assert (message.content, message.artifact) == ("2 hits for fees", {"ids": [3, 7]})


def test_a_structured_response_reaches_post_run_and_its_rewrites_reach_the_state() -> None:
    from langchain.agents.structured_output import ToolStrategy
    from pydantic import BaseModel

    from guardrails import GuardResult, Verdict, guard
    from guardrails.rules import Change, Rewrite

    class Quote(BaseModel):
        product: str
        discount: int

    @guard(at="post_run")
    def cap_discount(run: Any) -> Any:
        discount = (run.structured or {}).get("discount", 0)
        if discount > 20:
            change = Change(("discount",), discount, 20)
            return GuardResult.rejected("discount_capped", evidence=Rewrite((change,)))
        return Verdict.PASS

    reports: list[Any] = []
    answer = AIMessage(
        content="",
        tool_calls=[{"name": "Quote", "args": {"product": "plan", "discount": 35}, "id": "q1"}],
    )
    agent = create_agent(
        langchain.scripted_model(answer),
        [],
        response_format=ToolStrategy(Quote),
        middleware=[
            langchain.middleware(Guardrails(guards=[cap_discount]), on_report=reports.append)
        ],
    )
    out = agent.invoke({"messages": [{"role": "user", "content": "a quote"}]})
    [report] = reports
    assert [(c.path, c.old, c.new) for c in report.changes] == [(("discount",), 35, 20)]
    assert out["structured_response"] == Quote(product="plan", discount=20)


@pytest.mark.parametrize(
    ("block", "stand_in"),
    [
        ({"type": "text", "text": "hi"}, "hi"),
        (
            {"type": "image", "source_type": "base64", "data": PNG_B64, "mime_type": "image/png"},
            "[image/png, 70 bytes]",
        ),
        (
            {"type": "image", "url": "https://x.test/a.png", "mime_type": "image/png"},
            "[image/png: https://x.test/a.png]",
        ),
        (
            {"type": "image_url", "image_url": {"url": f"data:image/png;base64,{PNG_B64}"}},
            "[image/png, 70 bytes]",
        ),
        ({"type": "file", "base64": "!!not base64!!"}, "[application/octet-stream, 14 bytes]"),
        ({"type": "json", "value": [1]}, '{"type":"json","value":[1]}'),
    ],
)
def test_each_content_block_has_a_stand_in_without_its_bytes(block: Any, stand_in: str) -> None:
    def blocks() -> list[Any]:
        """Blocks."""
        return [block]

    recorder = MemoryRecorder()
    chat = model([("b1", "blocks", {})])
    agent = create_agent(
        chat,
        [StructuredTool.from_function(blocks)],
        middleware=[langchain.middleware(fw.rails(recorder=recorder))],
    )
    agent.invoke({"messages": [{"role": "user", "content": "hi"}]})
    [result] = recorder.results
    assert result.content == stand_in
    [message] = [m for m in chat.sent[-1] if isinstance(m, ToolMessage)]
    assert isinstance(message.content, list) and len(message.content) == 1  # (LangChain's form)


def test_a_run_resumed_after_a_human_approval_goes_on_in_the_same_turn() -> None:
    from langchain.agents.middleware import HumanInTheLoopMiddleware
    from langgraph.checkpoint.memory import InMemorySaver
    from langgraph.types import Command

    from guardrails.audit import AuditLog
    from guardrails.store import MemoryStore

    audit = AuditLog(MemoryStore())
    engine = Guardrails(max_calls_per_turn=2, hooks=[audit], recorder=[audit])
    chat = model(
        [("c1", "lookup", {"order_id": "o-1"}), ("c2", "dump", {})],
        [("c3", "lookup", {"order_id": "o-2"})],
    )
    reports: list[Any] = []
    agent = create_agent(
        chat,
        tools(),
        middleware=[
            langchain.middleware(engine, on_report=reports.append),
            HumanInTheLoopMiddleware(interrupt_on={"dump": True}),
        ],
        checkpointer=InMemorySaver(),
    )
    config: Any = {"configurable": {"thread_id": "th-1"}}
    paused = agent.invoke({"messages": [{"role": "user", "content": "hi"}]}, config)
    assert paused["__interrupt__"] and list(audit.rows())[-1].kind == "pre_turn"
    decisions = {"decisions": [{"type": "approve"}]}
    agent.invoke(Command(resume=decisions), config)
    rows = list(audit.rows())
    assert [r.kind for r in rows].count("pre_turn") == 1 and len(reports) == 1
    calls = {r.call_id: r.outcome for r in rows if r.kind == "tool_call"}
    assert calls == {"c1": "ok", "c2": "ok", "c3": "limit"}  # one turn: one ceiling
