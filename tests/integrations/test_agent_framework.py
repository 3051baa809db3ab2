"""Microsoft Agent Framework: a real Agent run with an offline chat client, guarded and not."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from tests.integrations import _frameworks as fw

af = fw.need("agent_framework")

from guardrails import ConfigurationError, Guardrails, Outcome, tool  # noqa: E402
from guardrails.integrations.agent_framework import guard_agent, tool_from  # noqa: E402
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
    return guard_agent(
        agent, rails, **{"tool_options": fw.BIND, "context": fw.context(), **options}
    )


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
    guard_agent(af.Agent(client=chat_client(), tools=ALL), rails, tool_options=fw.BIND)
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
    await guard_agent(af.Agent(client=client, tools=ALL), rails).run("hello")
    assert sorted(offered(client)) == ["dump", "explode", "get_orders", "lookup", "shout"]


async def test_the_session_id_of_the_run_is_the_turns_session() -> None:
    client = chat_client([("shout", {"text": "a"})], fw.FINAL)
    seen: list[Any] = []
    agent = guard_agent(af.Agent(client=client, tools=[shout]), Guardrails(), on_report=seen.append)
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
    guard_agent(af.Agent(client=chat_client(), tools=ALL), rails)
    assert rails.tools["lookup"] is mine
    with pytest.raises(ConfigurationError, match="'lookup' is already registered"):
        guard_agent(af.Agent(client=chat_client(), tools=ALL), rails, tool_options={"lookup": {}})


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
    agent = guard_agent(
        af.Agent(client=client, tools=[shout]), Guardrails(), on_report=reports.append
    )
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

    # Undeclared keys are refused, though the framework's own validator would drop them.
    fw.answers_to_any_lookup_arguments(answer, text=False, examples=80)


async def test_a_secret_reaches_an_action_tool_and_nothing_else() -> None:
    client = chat_client([("s1", "charge", {"amount": 5})], fw.FINAL)
    recorder = MemoryRecorder()
    rails = fw.secret_rails(recorder=recorder)
    await guarded(client, rails, tools=[af.tool(fw.charge)], tool_options=fw.SECRETS).run("pay")
    assert tool_results(client)["s1"] == "charged 5.0"
    assert fw.API_KEY not in repr(recorder.results)
    assert "api_key" not in str(offered(client))


@pytest.mark.parametrize("stream", [False, True])
async def test_an_undeclared_argument_is_refused_though_the_framework_strips_it(
    stream: bool,
) -> None:
    ran: list[dict[str, Any]] = []

    @af.tool(name="lookup")
    def spy(order_id: str, verbose: bool = False) -> str:
        """Look an order up."""
        ran.append({"order_id": order_id, "verbose": verbose})
        return fw.lookup(order_id, verbose)

    client = chat_client([fw.UNDECLARED, ("ok1", "lookup", {"order_id": "o-2"})], fw.FINAL)
    recorder = MemoryRecorder()
    agent = guarded(client, fw.rails(recorder=recorder), tools=[spy], tool_options=None)
    if stream:
        response = agent.run("orders", stream=True)
        async for _ in response:
            pass
    else:
        await agent.run("orders")
    assert tool_results(client) == {"u1": fw.UNDECLARED_SENTENCE, "ok1": "order o-2"}
    assert ran == [{"order_id": "o-2", "verbose": False}]
    audited = {r.call_id: (r.outcome, r.reason) for r in recorder.results}
    assert audited == {"u1": ("invalid_args", "undeclared_parameter"), "ok1": ("ok", None)}


PNG = b"\x89PNG\r\n\x1a\n-chart"


@af.tool
def chart() -> Any:
    """The month's spending as a chart."""
    return [
        af.Content.from_text("spending:"),
        af.Content.from_data(data=PNG, media_type="image/png"),
    ]


@af.tool
def huge_chart() -> Any:
    """A chart with a caption far over the size cap."""
    return [
        af.Content.from_text("y" * 5_000),
        af.Content.from_data(data=PNG, media_type="image/png"),
    ]


def items_sent(client: Any) -> dict[str, list[tuple[str, Any]]]:
    """The items of each function result the model was sent last: (type, text or media type)."""
    return {
        c.call_id: [(i.type, i.text if i.type == "text" else i.media_type) for i in c.items or ()]
        for m in client.requests[-1][0]
        for c in m.contents
        if c.type == "function_result"
    }


async def test_an_image_result_reaches_the_model_as_the_framework_sends_it() -> None:
    plain = chat_client([("i1", "chart", {})], fw.FINAL)
    await af.Agent(client=plain, tools=[chart]).run("chart")
    client = chat_client([("i1", "chart", {})], fw.FINAL)
    recorder = MemoryRecorder()
    await guarded(client, fw.rails(recorder=recorder), tools=[chart], tool_options=None).run(
        "chart"
    )
    assert (
        items_sent(client)
        == items_sent(plain)
        == {"i1": [("text", "spending:"), ("data", "image/png")]}
    )
    [result] = recorder.results
    assert (result.outcome, result.content) == ("ok", f"spending:\n[image/png, {len(PNG)} bytes]")


async def test_an_image_result_whose_text_is_cut_is_sent_as_that_text() -> None:
    client = chat_client([("h1", "huge_chart", {})], fw.FINAL)
    await guarded(client, fw.rails(), tools=[huge_chart], tool_options=None).run("chart")
    assert tool_results(client) == {"h1": fw.TRUNCATED.replace("x", "y")}
    assert items_sent(client) == {"h1": [("text", fw.TRUNCATED.replace("x", "y"))]}


@pytest.mark.parametrize("stream", [False, True])
async def test_a_run_that_answers_approval_requests_goes_on_in_the_same_turn(stream: bool) -> None:
    @af.tool(approval_mode="always_require")
    def wire(amount: int) -> str:
        """Wire money (a person approves each wire)."""
        return f"wired {amount}"

    client = chat_client(
        [("w1", "wire", {"amount": 5})],
        [("s1", "shout", {"text": "a"})],
        [("s2", "shout", {"text": "b"})],
        fw.FINAL,
    )
    recorder = MemoryRecorder()
    reports: list[Any] = []
    engine = Guardrails(max_calls_per_turn=2, recorder=recorder)
    agent = guard_agent(
        af.Agent(client=client, tools=[wire, shout]), engine, on_report=reports.append
    )
    session = agent.create_session()
    paused = await agent.run("wire 5", session=session)
    [request] = paused.user_input_requests
    assert reports == []  # the turn has not ended
    answer = af.Message(
        role="user", contents=[request.to_function_approval_response(approved=True)]
    )
    if stream:
        resumed = agent.run(answer, session=session, stream=True)
        async for _ in resumed:
            pass
        final = await resumed.get_final_response()
    else:
        final = await agent.run(answer, session=session)
    assert final.text == fw.FINAL
    sent = tool_results(client)
    # One turn: its ceiling of 2 counts the approved wire, so the second shout is over it.
    assert (sent["w1"], sent["s1"], sent["s2"]) == ("wired 5", "A", model_sentence(Outcome.LIMIT))
    assert [kind for kind, _ in recorder.events].count("pre_turn") == 1
    assert [r.text for r in reports] == [fw.FINAL]


async def test_arguments_written_as_any_text_reach_tool_call_as_the_model_wrote_them() -> None:
    client = chat_client(
        [
            ("a1", "lookup", "not json{"),
            ("a2", "lookup", "[1, 2]"),
            ("a3", "lookup", '{"order_id": "o-1", "x": {"$ref": "#"}}'),
            ("a4", "lookup", '{"order_id": "o-1"}'),
        ],
        fw.FINAL,
    )
    recorder = MemoryRecorder()
    await guarded(client, fw.rails(recorder=recorder), tools=[lookup], tool_options=None).run("hi")
    invalid = fw.EXPECTED["c5"][0]
    assert tool_results(client) == {
        "a1": invalid,
        "a2": invalid,
        "a3": fw.UNDECLARED_SENTENCE,
        "a4": "order o-1",
    }
    assert {r.call_id: r.reason for r in recorder.results} == {
        "a1": "not_an_object",
        "a2": "not_an_object",
        "a3": "undeclared_parameter",
        "a4": None,
    }


async def test_a_call_a_person_rejects_at_its_approval_is_audited_and_never_runs() -> None:
    ran: list[int] = []

    @af.tool(approval_mode="always_require")
    def wire(amount: int) -> str:
        """Wire money (a person approves each wire)."""
        ran.append(amount)
        return f"wired {amount}"

    client = chat_client([("w1", "wire", {"amount": 5})], fw.FINAL)
    recorder = MemoryRecorder()
    agent = guard_agent(af.Agent(client=client, tools=[wire]), Guardrails(recorder=recorder))
    session = agent.create_session()
    paused = await agent.run("wire 5", session=session)
    [request] = paused.user_input_requests
    answer = af.Message(
        role="user", contents=[request.to_function_approval_response(approved=False)]
    )
    await agent.run(answer, session=session)
    assert ran == []
    [refused] = recorder.results
    assert (refused.call_id, refused.outcome, refused.reason) == ("w1", "unavailable", "guard")
    assert [kind for kind, _ in recorder.events].count("pre_turn") == 1


def test_no_export_hides_a_name_of_guardrails_when_imported_beside_it() -> None:
    import guardrails
    from guardrails.integrations import agent_framework as adapter

    assert not set(adapter.__all__) & set(guardrails.__all__)
    assert not hasattr(adapter, "guard")  # the old name hid the guard decorator


async def test_an_approved_call_runs_with_its_bound_arguments_added() -> None:
    @af.tool(approval_mode="always_require")
    def wire(amount: float, account_id: str) -> str:
        """Wire money from the customer's account (a person approves each wire)."""
        return f"wired {amount} from {account_id}"

    client = chat_client([("w1", "wire", {"amount": 5})], fw.FINAL)
    recorder = MemoryRecorder()
    options = {"wire": {"bind": {"account_id": "account_id"}}}
    agent = guarded(client, fw.rails(recorder=recorder), tools=[wire], tool_options=options)
    session = agent.create_session()
    paused = await agent.run("wire 5", session=session)
    [request] = paused.user_input_requests
    assert "account_id" not in str(request.function_call.arguments)  # what the person approves
    answer = af.Message(
        role="user", contents=[request.to_function_approval_response(approved=True)]
    )
    await agent.run(answer, session=session)
    assert tool_results(client) == {"w1": f"wired 5.0 from {fw.ACCOUNT}"}
    assert [(r.call_id, r.outcome) for r in recorder.results] == [("w1", "ok")]
