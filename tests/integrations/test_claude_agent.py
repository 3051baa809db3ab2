"""Claude Agent SDK: the hook callbacks called directly, and real runs of the bundled CLI
against a scripted Messages API on 127.0.0.1 (no network)."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from guardrails import ConfigurationError, Guardrails, Outcome, Tool, TurnContext
from guardrails.integrations.scripted import ScriptedMessagesAPI, text_message, tool_use_message
from guardrails.rules import allow_list
from guardrails.testing import MemoryRecorder
from guardrails.verdicts import model_sentence

if os.environ.get("GUARDRAILS_REQUIRE_FRAMEWORKS") != "1":
    pytest.importorskip("claude_agent_sdk", reason="claude-agent-sdk is not installed")

from claude_agent_sdk import ClaudeAgentOptions, create_sdk_mcp_server, query, tool
from mcp import Client

from guardrails.integrations.claude_agent import _key, guard_options, tool_from

SECRET = "token=sk-live-123"
BIG = "x" * 5_000


@tool("get_orders", "The account's orders.", {"status": str, "account": str})
async def get_orders(args: dict[str, Any]) -> dict[str, Any]:
    return {"content": [{"type": "text", "text": f"{args['account']}:{args['status']}"}]}


@tool("explode", "Always fails.", {})
async def explode(args: dict[str, Any]) -> dict[str, Any]:
    raise RuntimeError(SECRET)


@tool("dump_log", "A very long log.", {})
async def dump_log(args: dict[str, Any]) -> dict[str, Any]:
    return {"content": [{"type": "text", "text": BIG}]}


@tool("refuse", "Answers with an error of its own.", {})
async def refuse(args: dict[str, Any]) -> dict[str, Any]:
    return {"content": [{"type": "text", "text": SECRET}], "is_error": True}


ALL = [get_orders, explode, dump_log, refuse]
OPTIONS = {"get_orders": {"bind": {"account": "tenant"}}}
SCRIPT = [
    ("get_orders", {"status": "open"}),
    ("get_orders", {}),
    ("get_orders", {"status": 3}),
    ("get_orders", {"status": "open", "account": "someone-else"}),
    ("explode", {}),
    ("dump_log", {}),
    ("refuse", {}),
]


def guarded(**engine: Any) -> tuple[Any, MemoryRecorder, list[Any]]:
    recorder = MemoryRecorder()
    reports: list[Any] = []
    rails = Guardrails(recorder=recorder, max_result_chars=1_000, **engine)
    options = guard_options(
        ClaudeAgentOptions(),
        rails,
        server="shop",
        sdk_tools=ALL,
        tool_options=OPTIONS,
        context=lambda hook_input: TurnContext(tenant="acme", session=hook_input["session_id"]),
        on_report=reports.append,
    )
    return options, recorder, reports


def hook(options: Any, event: str) -> Any:
    return options.hooks[event][-1].hooks[0]


def pre_tool_input(name: str, arguments: Any, call_id: str, session: str = "s1") -> dict[str, Any]:
    return {
        "session_id": session,
        "hook_event_name": "PreToolUse",
        "tool_name": f"mcp__shop__{name}",
        "tool_input": arguments,
        "tool_use_id": call_id,
    }


async def call_through_hooks(options: Any, calls: list[tuple[str, Any]]) -> dict[str, Any]:
    """Each call as the CLI makes it: PreToolUse, then tools/call on the served server."""
    answers: dict[str, Any] = {}
    async with Client(options.mcp_servers["shop"]["instance"]) as client:
        for i, (name, arguments) in enumerate(calls):
            decided = await hook(options, "PreToolUse")(
                pre_tool_input(name, arguments, f"toolu_{i}"), f"toolu_{i}", {"signal": None}
            )
            assert decided["hookSpecificOutput"]["permissionDecision"] == "allow"
            result = await client.call_tool(name, arguments)
            answers[f"toolu_{i}"] = (result.content[0].text, result.is_error)
    return answers


async def test_the_hooks_answer_every_call_through_tool_call() -> None:
    options, recorder, _ = guarded()
    answers = await call_through_hooks(options, SCRIPT)
    assert answers["toolu_0"] == ("acme:open", False)
    assert answers["toolu_1"] == (model_sentence(Outcome.INVALID_ARGS, ["status"]), True)
    assert answers["toolu_2"] == (model_sentence(Outcome.INVALID_ARGS, ["status"]), True)
    assert answers["toolu_3"] == (model_sentence(Outcome.INVALID_ARGS), True)
    assert answers["toolu_4"] == (model_sentence(Outcome.ERROR), True)
    assert len(answers["toolu_5"][0]) < 1_100 and answers["toolu_5"][1] is False
    assert answers["toolu_6"] == (model_sentence(Outcome.ERROR), True)
    assert SECRET not in repr(answers)
    assert [r.call_id for r in recorder.results] == [f"toolu_{i}" for i in range(7)]


async def test_the_served_tools_hide_bound_parameters() -> None:
    options, _, _ = guarded()
    async with Client(options.mcp_servers["shop"]["instance"]) as client:
        listed = {t.name: t.input_schema for t in (await client.list_tools()).tools}
    assert sorted(listed) == ["dump_log", "explode", "get_orders", "refuse"]
    assert listed["get_orders"]["required"] == ["status"]
    assert "account" not in listed["get_orders"]["properties"]


def test_the_schema_is_the_one_the_sdk_sends() -> None:
    made = tool_from(get_orders)
    assert made.schema["required"] == ["status", "account"]
    assert made.schema["properties"]["status"] == {"type": "string"}


def noting() -> tuple[Any, list[Any]]:
    """Options guarding one ``note`` tool, and the arguments of every note it wrote."""
    ran: list[Any] = []

    @tool("note", "Write a note.", {"text": str})
    async def note(args: dict[str, Any]) -> dict[str, Any]:
        ran.append(args)
        return {"content": [{"type": "text", "text": "ok"}]}

    return guard_options(ClaudeAgentOptions(), Guardrails(), server="shop", sdk_tools=[note]), ran


async def test_a_call_the_hook_did_not_decide_runs_nothing() -> None:
    options, ran = noting()
    async with Client(options.mcp_servers["shop"]["instance"]) as client:
        result = await client.call_tool("note", {"text": "hi"})
    assert (result.content[0].text, result.is_error) == (model_sentence(Outcome.UNAVAILABLE), True)
    assert ran == []


async def test_other_tools_are_left_to_the_clis_own_permissions() -> None:
    options, recorder, _ = guarded()
    decided = await hook(options, "PreToolUse")(
        {**pre_tool_input("x", {"command": "ls"}, "t1"), "tool_name": "Bash"},
        "t1",
        {"signal": None},
    )
    assert decided == {}
    assert recorder.results == []


async def test_a_per_turn_ceiling_and_a_new_turn_per_prompt() -> None:
    options, recorder, reports = guarded(max_calls_per_turn=1)
    prompt = {"session_id": "s1", "hook_event_name": "UserPromptSubmit", "prompt": "hi"}
    assert await hook(options, "UserPromptSubmit")(prompt, None, {"signal": None}) == {}
    answers = await call_through_hooks(options, [("dump_log", {}), ("dump_log", {})])
    assert answers["toolu_1"] == (model_sentence(Outcome.LIMIT), True)
    stop = {"session_id": "s1", "hook_event_name": "Stop", "last_assistant_message": "done"}
    await hook(options, "Stop")(stop, None, {"signal": None})
    assert [r.text for r in reports] == ["done"]
    assert reports[0].context.session == "s1"
    await hook(options, "UserPromptSubmit")(prompt, None, {"signal": None})
    answers = await call_through_hooks(options, [("dump_log", {})])
    assert answers["toolu_0"][1] is False
    assert recorder.outcomes == [Outcome.OK, Outcome.LIMIT, Outcome.OK]


async def test_pre_turn_on_the_prompt_decides_what_can_be_called() -> None:
    rails = Guardrails(guards=[allow_list(by_tenant={"acme": ["dump_log"]})])
    options = guard_options(
        ClaudeAgentOptions(),
        rails,
        server="shop",
        sdk_tools=[dump_log, explode],
        context=TurnContext(tenant="acme"),
    )
    prompt = {"session_id": "s1", "hook_event_name": "UserPromptSubmit", "prompt": "hi"}
    await hook(options, "UserPromptSubmit")(prompt, None, {"signal": None})
    answers = await call_through_hooks(options, [("explode", {}), ("dump_log", {})])
    assert answers["toolu_0"] == (model_sentence(Outcome.UNAVAILABLE), True)
    assert answers["toolu_1"][1] is False


def test_misconfiguration_is_rejected_naming_the_culprit() -> None:
    with pytest.raises(ConfigurationError, match="'transfer'"):
        guard_options(
            ClaudeAgentOptions(),
            Guardrails(),
            server="s",
            sdk_tools=ALL,
            tool_options={"transfer": {}},
        )
    with pytest.raises(ConfigurationError, match="'get_orders'"):
        guard_options(
            ClaudeAgentOptions(),
            Guardrails(),
            server="s",
            sdk_tools=ALL,
            tool_options={"get_orders": {"bind": {"nope": "tenant"}}},
        )


def test_the_users_options_are_not_changed() -> None:
    mine = ClaudeAgentOptions()
    guarded_options = guard_options(mine, Guardrails(), server="shop", sdk_tools=ALL)
    assert mine.hooks is None and mine.mcp_servers == {}
    assert sorted(guarded_options.hooks) == ["PreToolUse", "Stop", "UserPromptSubmit"]


# -- end to end: the bundled CLI against a scripted Messages API -------------------------


def cli_options(api: ScriptedMessagesAPI, home: Path) -> ClaudeAgentOptions:
    env = {
        "ANTHROPIC_BASE_URL": api.base_url,
        "ANTHROPIC_API_KEY": "test",
        "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1",
        "ENABLE_TOOL_SEARCH": "false",
        "HOME": str(home),
        "CLAUDE_CONFIG_DIR": str(home),
    }
    return ClaudeAgentOptions(env=env, cwd=str(home), model="claude-scripted")


def results_sent(api: ScriptedMessagesAPI) -> dict[str, tuple[str, bool]]:
    """What the model was sent back for each tool_use id, in the last request."""
    sent = {}
    for block in api.requests[-1]["messages"][-1]["content"]:
        if block.get("type") == "tool_result":
            content = block["content"]
            text = content if isinstance(content, str) else "".join(c["text"] for c in content)
            sent[block["tool_use_id"]] = (text, bool(block.get("is_error")))
    return sent


def script(calls: list[tuple[str, Any]]) -> list[dict[str, Any]]:
    message = tool_use_message(*[(f"mcp__shop__{n}", a) for n, a in calls])
    return [message, text_message("done")]


def ids(steps: list[dict[str, Any]]) -> list[str]:
    return [block["id"] for block in steps[0]["content"]]


async def run(options: ClaudeAgentOptions) -> list[Any]:
    return [message async for message in query(prompt="show my orders", options=options)]


@pytest.mark.slow
async def test_a_real_cli_run_sends_the_model_only_our_outcomes(tmp_path: Path) -> None:
    steps = script([*SCRIPT, ("no_such_tool", {})])
    with ScriptedMessagesAPI(steps) as api:
        recorder = MemoryRecorder()
        reports: list[Any] = []
        rails = Guardrails(recorder=recorder, max_result_chars=1_000)
        options = guard_options(
            cli_options(api, tmp_path),
            rails,
            server="shop",
            sdk_tools=ALL,
            tool_options=OPTIONS,
            context=lambda hook_input: TurnContext(tenant="acme"),
            on_report=reports.append,
        )
        await run(options)
    sent = results_sent(api)
    call = ids(steps)
    assert sent[call[0]] == ("acme:open", False)
    assert sent[call[1]] == (model_sentence(Outcome.INVALID_ARGS, ["status"]), True)
    assert sent[call[2]] == (model_sentence(Outcome.INVALID_ARGS, ["status"]), True)
    assert sent[call[3]] == (model_sentence(Outcome.INVALID_ARGS), True)
    assert sent[call[4]] == (model_sentence(Outcome.ERROR), True)
    assert len(sent[call[5]][0]) < 1_100
    assert sent[call[6]] == (model_sentence(Outcome.ERROR), True)
    # A tool that does not exist at all is answered by the CLI before any hook.
    assert "No such tool available" in sent[call[7]][0]
    assert SECRET not in repr(sent)
    tools = {t["name"]: t["input_schema"] for t in api.requests[0]["tools"]}
    assert "account" not in tools["mcp__shop__get_orders"]["properties"]
    assert [r.text for r in reports] == ["done"]
    assert len(recorder.results) == 7


@pytest.mark.slow
async def test_a_real_cli_run_without_the_adapter_leaks_and_runs_what_the_model_chose(
    tmp_path: Path,
) -> None:
    steps = script([("get_orders", {"status": 3, "account": "x"}), *SCRIPT[3:5], ("dump_log", {})])
    with ScriptedMessagesAPI(steps) as api:
        options = cli_options(api, tmp_path)
        options.mcp_servers = {"shop": create_sdk_mcp_server("shop", tools=ALL)}
        options.allowed_tools = [f"mcp__shop__{t.name}" for t in ALL]
        await run(options)
    sent = results_sent(api)
    call = ids(steps)
    assert "3 is not of type 'string'" in sent[call[0]][0]
    assert sent[call[1]] == ("someone-else:open", False)
    assert sent[call[2]] == (SECRET, True)
    assert sent[call[3]] == (BIG, False)


JSON = st.recursive(
    st.none()
    | st.booleans()
    | st.integers()
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(), inner, max_size=4),
    max_leaves=20,
)


def as_javascript_writes_it(value: Any) -> Any:
    """JSON.stringify writes 1.0 as 1: the server may get the hook's numbers so."""
    if isinstance(value, float) and value.is_integer():
        return int(value)
    if isinstance(value, dict):
        return {k: as_javascript_writes_it(v) for k, v in value.items()}
    if isinstance(value, list):
        return [as_javascript_writes_it(v) for v in value]
    return value


@given(st.dictionaries(st.text(), JSON, max_size=5))
def test_the_hook_and_the_server_find_the_same_call(arguments: dict[str, Any]) -> None:
    import json

    assert _key(arguments) == _key(json.loads(json.dumps(arguments)))
    assert _key(arguments) == _key(as_javascript_writes_it(arguments))


def test_integral_floats_and_integers_are_the_same_call() -> None:
    assert _key({"a": [1.0, {"b": 2.0}]}) == _key({"a": [1, {"b": 2}]})
    assert _key({"a": 1.5}) != _key({"a": 1})


async def test_hostile_tool_input_is_let_through_and_answered_by_tool_call() -> None:
    options, recorder, _ = guarded()
    for i, hostile in enumerate([[1, 2], "text", None, {"status": {"$ref": "#"}}]):
        decided = await hook(options, "PreToolUse")(
            pre_tool_input("get_orders", hostile, f"h{i}"), f"h{i}", {"signal": None}
        )
        assert decided["hookSpecificOutput"]["permissionDecision"] == "allow"
    assert recorder.results == []  # nothing runs in the hook
    async with Client(options.mcp_servers["shop"]["instance"]) as client:
        result = await client.call_tool("get_orders", {"status": {"$ref": "#"}})
    assert (result.content[0].text, result.is_error) == (
        model_sentence(Outcome.INVALID_ARGS, ["status"]),
        True,
    )
    assert [r.call_id for r in recorder.results] == ["h3"]


async def test_a_call_the_cli_never_made_is_forgotten_at_stop() -> None:
    options, ran = noting()
    await hook(options, "PreToolUse")(
        pre_tool_input("note", {"text": "x"}, "t1"), "t1", {"signal": None}
    )
    stop = {"session_id": "s1", "hook_event_name": "Stop", "last_assistant_message": ""}
    await hook(options, "Stop")(stop, None, {"signal": None})
    async with Client(options.mcp_servers["shop"]["instance"]) as client:
        result = await client.call_tool("note", {"text": "x"})
    assert result.is_error and ran == []


async def test_an_engine_tool_of_our_own_is_served_too() -> None:
    from guardrails import tool as make_tool

    @make_tool
    def add(a: int, b: int = 1) -> int:
        """Add two numbers."""
        return a + b

    options = guard_options(ClaudeAgentOptions(), Guardrails([add]), server="calc")
    decided = await hook(options, "PreToolUse")(
        {**pre_tool_input("add", {"a": 2}, "t1"), "tool_name": "mcp__calc__add"},
        "t1",
        {"signal": None},
    )
    assert decided["hookSpecificOutput"]["permissionDecision"] == "allow"
    async with Client(options.mcp_servers["calc"]["instance"]) as client:
        listed = (await client.list_tools()).tools
        result = await client.call_tool("add", {"a": 2})
    assert listed[0].input_schema["required"] == ["a"]
    assert (result.content[0].text, result.is_error) == ("3", False)


async def test_a_refused_prompt_is_blocked_with_the_refusal_code() -> None:
    from guardrails import GuardResult
    from guardrails import guard as make_guard

    @make_guard(at="pre_turn")
    def no_deletions(request: Any) -> Any:
        if "delete" in request.text.raw:
            return GuardResult.rejected("deletion_requested")
        return GuardResult.passed()

    options = guard_options(
        ClaudeAgentOptions(), Guardrails(guards=[no_deletions]), server="shop", sdk_tools=ALL
    )
    prompt = {"session_id": "s1", "hook_event_name": "UserPromptSubmit", "prompt": "delete all"}
    decided = await hook(options, "UserPromptSubmit")(prompt, None, {"signal": None})
    assert decided == {"decision": "block", "reason": "deletion_requested"}
    answers = await call_through_hooks(options, [("dump_log", {})])
    assert answers["toolu_0"] == (model_sentence(Outcome.UNAVAILABLE), True)


def test_a_tool_the_application_registered_is_kept_and_options_for_it_are_refused() -> None:
    async def mine(status: str, account: str) -> str:
        return "mine"

    rails = Guardrails([Tool("get_orders", mine, tool_from(get_orders).schema)])
    kept = rails.tools["get_orders"]
    guard_options(ClaudeAgentOptions(), rails, server="shop", sdk_tools=ALL)
    assert rails.tools["get_orders"] is kept
    with pytest.raises(ConfigurationError, match="'get_orders' is already registered"):
        guard_options(
            ClaudeAgentOptions(), rails, server="shop", sdk_tools=ALL, tool_options=OPTIONS
        )


# -- undeclared arguments and rich results, through the bundled CLI ------------------------

PNG = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNkYPhfDwAChwGA60e6kgAAAABJRU5ErkJggg=="


def banking() -> tuple[list[Any], list[dict[str, Any]]]:
    """A transfer tool and a chart tool; every transfer's arguments, as the handler got them."""
    moved: list[dict[str, Any]] = []

    @tool("transfer", "Move money to a payee.", {"to": str, "amount": float})
    async def transfer(args: dict[str, Any]) -> dict[str, Any]:
        moved.append(dict(args))
        return {"content": [{"type": "text", "text": f"sent {args['amount']} to {args['to']}"}]}

    @tool("chart", "The month's spending as a chart.", {})
    async def chart(args: dict[str, Any]) -> dict[str, Any]:
        image = {"type": "image", "data": PNG, "mimeType": "image/png"}
        return {"content": [{"type": "text", "text": "spending:"}, image]}

    return [transfer, chart], moved


def blocks_sent(api: ScriptedMessagesAPI) -> dict[str, tuple[Any, bool]]:
    """The content blocks the model was sent back for each tool_use id, in the last request
    (the CLI sends a text-only result as a string)."""
    found = {}
    for block in api.requests[-1]["messages"][-1]["content"]:
        if block.get("type") == "tool_result":
            content = block["content"]
            if isinstance(content, str):
                content = [{"type": "text", "text": content}]
            found[block["tool_use_id"]] = (content, bool(block.get("is_error")))
    return found


@pytest.mark.slow
async def test_a_real_cli_run_refuses_undeclared_arguments_and_sends_images_as_images(
    tmp_path: Path,
) -> None:
    undeclared = {"to": "bob", "amount": 5, "from_account": "acc-666"}
    steps = script(
        [("transfer", undeclared), ("chart", {}), ("transfer", {"to": "bob", "amount": 5})]
    )
    tools, moved = banking()
    recorder = MemoryRecorder()
    with ScriptedMessagesAPI(steps) as api:
        options = guard_options(
            cli_options(api, tmp_path),
            Guardrails(recorder=recorder),
            server="shop",
            sdk_tools=tools,
        )
        await run(options)
    sent = blocks_sent(api)
    call = ids(steps)
    undeclared_sentence = (
        "The arguments were not accepted. Send only the parameters that the tool declares."
    )
    assert sent[call[0]] == ([{"type": "text", "text": undeclared_sentence}], True)
    chart_blocks, chart_error = sent[call[1]]
    assert chart_error is False
    assert chart_blocks[0] == {"type": "text", "text": "spending:"}
    assert chart_blocks[1]["type"] == "image"
    assert chart_blocks[1]["source"] == {"type": "base64", "media_type": "image/png", "data": PNG}
    assert moved == [{"to": "bob", "amount": 5}]  # the undeclared call never reached the handler
    outcomes = {r.call_id: (r.outcome, r.reason, r.content) for r in recorder.results}
    assert outcomes[call[0]][:2] == ("invalid_args", "undeclared_parameter")
    assert outcomes[call[1]] == ("ok", None, "spending:\n[image/png, 70 bytes]")


# -- the application's can_use_tool is asked, and what it denies is audited ------------------


def permissions(denied: str) -> tuple[Any, list[str]]:
    """A ``can_use_tool`` that denies transfers to ``denied``; the names it was asked about."""
    from claude_agent_sdk import PermissionResultAllow, PermissionResultDeny

    asked: list[str] = []

    async def can_use_tool(name: str, tool_input: dict[str, Any], ctx: Any) -> Any:
        asked.append(name)
        if tool_input.get("to") == denied:
            return PermissionResultDeny(message="payee is blocked")
        return PermissionResultAllow()

    return can_use_tool, asked


async def prompt_stream(text: str) -> Any:
    yield {"type": "user", "message": {"role": "user", "content": text}}


@pytest.mark.slow
async def test_a_real_cli_run_asks_the_applications_can_use_tool_and_audits_its_refusals(
    tmp_path: Path,
) -> None:
    steps = script(
        [("transfer", {"to": "mallory", "amount": 5}), ("transfer", {"to": "bob", "amount": 5})]
    )
    tools, moved = banking()
    can_use_tool, asked = permissions("mallory")
    recorder = MemoryRecorder()
    with ScriptedMessagesAPI(steps) as api:
        options = cli_options(api, tmp_path)
        options.can_use_tool = can_use_tool
        options = guard_options(
            options, Guardrails(recorder=recorder), server="shop", sdk_tools=tools
        )
        async for _ in query(prompt=prompt_stream("pay them"), options=options):
            pass
    sent = blocks_sent(api)
    call = ids(steps)
    assert asked == ["mcp__shop__transfer", "mcp__shop__transfer"]
    assert sent[call[0]][1] is True and "payee is blocked" in str(sent[call[0]][0])
    assert sent[call[1]] == ([{"type": "text", "text": "sent 5 to bob"}], False)
    assert moved == [{"to": "bob", "amount": 5}]
    audited = {r.call_id: (r.outcome, r.reason) for r in recorder.results}
    assert audited == {call[0]: ("unavailable", "guard"), call[1]: ("ok", None)}
    [refusal] = [r for r in recorder.results if r.call_id == call[0]]
    assert [(v.guard, v.verdict) for v in refusal.verdicts if v.verdict == "reject"] == [
        ("framework_check", "reject")
    ]


async def test_arguments_the_applications_can_use_tool_rewrites_are_the_ones_tool_call_decides() -> (
    None
):
    from claude_agent_sdk import PermissionResultAllow, ToolPermissionContext

    async def cap_amount(name: str, tool_input: dict[str, Any], ctx: Any) -> Any:
        return PermissionResultAllow(updated_input={**tool_input, "amount": 1})

    tools, moved = banking()
    recorder = MemoryRecorder()
    options = ClaudeAgentOptions(can_use_tool=cap_amount)
    options = guard_options(options, Guardrails(recorder=recorder), server="shop", sdk_tools=tools)
    asked = {"to": "bob", "amount": 50}
    decided = await hook(options, "PreToolUse")(
        pre_tool_input("transfer", asked, "t1"), "t1", {"signal": None}
    )
    assert decided == {}  # no decision: the CLI asks can_use_tool next
    ctx = ToolPermissionContext(tool_use_id="t1")
    allowed = await options.can_use_tool("mcp__shop__transfer", asked, ctx)
    async with Client(options.mcp_servers["shop"]["instance"]) as client:
        result = await client.call_tool("transfer", allowed.updated_input)
    assert (result.content[0].text, result.is_error) == ("sent 1 to bob", False)
    assert moved == [{"to": "bob", "amount": 1}]
    assert [(r.call_id, r.outcome) for r in recorder.results] == [("t1", "ok")]


# -- the CLI's own tools, decided by the engine and run by the CLI ---------------------------


def bash_engine(recorder: MemoryRecorder) -> Guardrails:
    """An engine that knows the CLI's ``Bash`` tool (its body never runs here) and refuses ``rm``."""
    from guardrails import Invocation, Verdict
    from guardrails import guard as make_guard

    @make_guard(outcome="unavailable")
    def no_deletions(call: Invocation) -> Verdict:
        return Verdict.REJECT if call.arguments["command"].startswith("rm ") else Verdict.PASS

    def runs_in_the_cli(**arguments: Any) -> str:
        raise AssertionError("the CLI runs Bash, never the engine")

    schema = {
        "type": "object",
        "properties": {"command": {"type": "string"}, "description": {"type": "string"}},
        "required": ["command"],
    }
    bash = Tool("Bash", runs_in_the_cli, schema, extra="allow", guards=[no_deletions])
    return Guardrails([bash], recorder=recorder)


@pytest.mark.slow
async def test_a_real_cli_run_admits_the_clis_own_tool_and_audits_what_it_ran(
    tmp_path: Path,
) -> None:
    marker = tmp_path / "keep.txt"
    marker.write_text("kept")
    calls = [("Bash", {"command": "echo hi"}), ("Bash", {"command": f"rm {marker}"})]
    steps = [tool_use_message(*calls), text_message("done")]
    recorder = MemoryRecorder()
    with ScriptedMessagesAPI(steps) as api:
        options = cli_options(api, tmp_path)
        options.allowed_tools = ["Bash"]
        options = guard_options(options, bash_engine(recorder), server="shop", cli_tools=["Bash"])
        await run(options)
    sent = results_sent(api)
    call = ids(steps)
    assert sent[call[0]] == ("hi", False)
    # The CLI words a denial itself, around the reason: here the fixed sentence.
    refused = f"PreToolUse:Bash hook error: {model_sentence(Outcome.UNAVAILABLE)}"
    assert sent[call[1]] == (refused, True)
    assert marker.read_text() == "kept"  # the refused command never ran
    audited = {r.call_id: (r.outcome, r.reason) for r in recorder.results}
    assert audited == {call[0]: ("ok", None), call[1]: ("unavailable", "guard")}
    [ran] = [r for r in recorder.results if r.call_id == call[0]]
    assert "hi" in ran.content  # the CLI's own output is the call's result
    served = [t["name"] for t in api.requests[0]["tools"] if t["name"].startswith("mcp__shop__")]
    assert served == []  # the CLI's tool is its own, not served


def test_cli_tools_must_be_tools_of_the_engine() -> None:
    with pytest.raises(ConfigurationError, match="'Bash'"):
        guard_options(
            ClaudeAgentOptions(), Guardrails(), server="shop", sdk_tools=ALL, cli_tools=["Bash"]
        )


async def test_a_cli_tool_call_the_application_denies_or_that_fails_is_audited() -> None:
    from claude_agent_sdk import PermissionResultAllow, PermissionResultDeny, ToolPermissionContext

    async def only_ls(name: str, tool_input: dict[str, Any], ctx: Any) -> Any:
        if tool_input["command"] == "ls":
            return PermissionResultAllow()
        return PermissionResultDeny(message="not allowed here")

    recorder = MemoryRecorder()
    options = ClaudeAgentOptions(can_use_tool=only_ls)
    options = guard_options(options, bash_engine(recorder), server="shop", cli_tools=["Bash"])
    pre, post = hook(options, "PreToolUse"), hook(options, "PostToolUseFailure")
    for call_id, command in [("b1", "cat secrets"), ("b2", "ls")]:
        hook_input = {**pre_tool_input("x", {"command": command}, call_id), "tool_name": "Bash"}
        assert await pre(hook_input, call_id, {"signal": None}) == {}  # admitted: the CLI asks next
        ctx = ToolPermissionContext(tool_use_id=call_id)
        await options.can_use_tool("Bash", {"command": command}, ctx)
    failure = {"session_id": "s1", "tool_name": "Bash", "tool_use_id": "b2", "error": SECRET}
    await post(failure, "b2", {"signal": None})
    audited = {r.call_id: (r.outcome, r.reason) for r in recorder.results}
    assert audited == {"b1": ("unavailable", "raised"), "b2": ("error", "raised")}
    assert SECRET not in repr([r.content for r in recorder.results])


def test_no_export_hides_a_name_of_guardrails_when_imported_beside_it() -> None:
    import guardrails
    from guardrails.integrations import claude_agent as adapter

    assert not set(adapter.__all__) & set(guardrails.__all__)
    assert not hasattr(adapter, "guard")  # the old name hid the guard decorator
