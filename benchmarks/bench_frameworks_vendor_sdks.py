"""What each agent-framework adapter adds to the framework's own tool call, in the same run.

One group per framework; in each, the framework's unguarded path is the floor
and the guarded one is timed in the same interleaved rounds, so ``added_us``
is the adapter's cost. Everything is offline:

- Microsoft Agent Framework: a whole ``agent.run`` with a scripted chat client
  (``scripted_models.chat_client``) that asks for one tool call and then
  answers; guarded with ``agent_framework.guard_agent`` (per run: a turn, pre_turn,
  post_run; per request: the offer; per call: tool_call).
- Google ADK: a whole ``runner.run_async`` on a new in-memory session with a
  scripted ``BaseLlm`` (one tool call, then an answer); guarded with the
  ``google_adk.plugin``.
- Claude Agent SDK: what the CLI does for one call of an in-process MCP tool,
  without the CLI: ``tools/call`` on the SDK's own server
  (``create_sdk_mcp_server``) through an in-memory MCP client, against the
  ``PreToolUse`` hook followed by ``tools/call`` on the guarded server (the
  CLI's own process and model round trip come on top of both).

A framework that is not installed gets a row with no figure and the reason.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

from _harness import Row, compare

from guardrails import Guardrails, TurnContext

CONTEXT = TurnContext(tenant="acme", session="bench")
OPTIONS = {"get_orders": {"bind": {"account": "tenant"}}}
CALL = ("get_orders", {"status": "open"})
UNGUARDED_CALL = ("get_orders", {"status": "open", "account": "acme"})


def _orders(status: str, account: str) -> str:
    return f"{account}: 2 {status} orders"


def _agent_framework() -> dict[str, Callable[[], Any]]:
    from agent_framework import Agent, tool

    from guardrails.integrations.agent_framework import guard_agent
    from guardrails.integrations.scripted_models import chat_client

    get_orders = tool(_orders, name="get_orders")
    plain = Agent(client=chat_client([UNGUARDED_CALL], "ok", repeat=True), tools=[get_orders])
    guarded = guard_agent(
        Agent(client=chat_client([CALL], "ok", repeat=True), tools=[get_orders]),
        Guardrails(),
        tool_options=OPTIONS,
        context=CONTEXT,
    )

    async def unguarded_run() -> Any:
        return await plain.run("orders")

    async def guarded_run() -> Any:
        return await guarded.run("orders")

    return {"agent.run, one tool call (unguarded)": unguarded_run, "guarded": guarded_run}


def _google_adk() -> dict[str, Callable[[], Any]]:
    from google.adk.agents import LlmAgent
    from google.adk.apps import App
    from google.adk.runners import InMemoryRunner
    from google.genai import types

    from guardrails.integrations.google_adk import plugin
    from guardrails.integrations.scripted_models import adk_model

    logging.getLogger("google_adk").setLevel(logging.ERROR)

    def get_orders(status: str, account: str) -> str:
        """The account's orders."""
        return _orders(status, account)

    plain_agent = LlmAgent(
        name="shop", model=adk_model([UNGUARDED_CALL], "ok", repeat=True), tools=[get_orders]
    )
    agent = LlmAgent(name="shop", model=adk_model([CALL], "ok", repeat=True), tools=[get_orders])
    guard = plugin(agent, Guardrails(), tool_options=OPTIONS, context=CONTEXT)
    plain = InMemoryRunner(app=App(name="shop", root_agent=plain_agent))
    guarded = InMemoryRunner(app=App(name="shop", root_agent=agent, plugins=[guard]))
    message = types.Content(role="user", parts=[types.Part(text="orders")])

    def run_on(runner: Any) -> Callable[[], Any]:
        async def run() -> None:
            session = await runner.session_service.create_session(app_name="shop", user_id="u")
            async for _ in runner.run_async(
                user_id="u", session_id=session.id, new_message=message
            ):
                pass

        return run

    return {
        "runner.run_async, one tool call (unguarded)": run_on(plain),
        "guarded": run_on(guarded),
    }


def _claude_agent() -> dict[str, Callable[[], Any]]:
    from claude_agent_sdk import ClaudeAgentOptions, create_sdk_mcp_server, tool
    from mcp import Client

    from guardrails.integrations.claude_agent import guard_options

    @tool("get_orders", "The account's orders.", {"status": str, "account": str})
    async def get_orders(args: dict[str, Any]) -> dict[str, Any]:
        return {"content": [{"type": "text", "text": _orders(args["status"], args["account"])}]}

    sdk_server = create_sdk_mcp_server("shop", tools=[get_orders])["instance"]
    options = guard_options(
        ClaudeAgentOptions(),
        Guardrails(),
        server="shop",
        sdk_tools=[get_orders],
        tool_options=OPTIONS,
        context=CONTEXT,
    )
    guarded_server = options.mcp_servers["shop"]["instance"]
    pre_tool_use = options.hooks["PreToolUse"][-1].hooks[0]
    hook_input = {
        "session_id": "bench",
        "tool_name": "mcp__shop__get_orders",
        "tool_input": CALL[1],
        "tool_use_id": "t1",
    }
    return {
        "tools/call on the SDK's server (unguarded)": _mcp_call(
            Client, sdk_server, UNGUARDED_CALL, None
        ),
        "guarded": _mcp_call(
            Client,
            guarded_server,
            CALL,
            lambda: pre_tool_use(hook_input, "t1", {"signal": None}),
        ),
    }


def _mcp_call(connect: Any, server: Any, call: tuple[str, Any], hook: Any) -> Callable[[], Any]:
    # One in-memory client session per case, opened on first use inside the
    # harness's event loop and kept for the whole run.
    state: dict[str, Any] = {}

    async def once() -> Any:
        session = state.get("session")
        if session is None:
            state["context"] = connect(server)
            session = state["session"] = await state["context"].__aenter__()
        if hook is not None:
            await hook()
        return await session.call_tool(*call)

    return once


FRAMEWORKS: dict[str, Callable[[], dict[str, Callable[[], Any]]]] = {
    "frameworks: Microsoft Agent Framework": _agent_framework,
    "frameworks: Google ADK": _google_adk,
    "frameworks: Claude Agent SDK": _claude_agent,
}


def run(quick: bool = False) -> list[Row]:
    rows: list[Row] = []
    for group, setup in FRAMEWORKS.items():
        try:
            cases = setup()
        except ImportError as exc:
            rows.append(
                {
                    "group": group,
                    "name": "guarded",
                    "median_us": None,
                    "note": f"not installed: {exc.name or exc}",
                }
            )
            continue
        floor = next(iter(cases))
        rows += compare(group, cases, floor=floor, quick=quick)
    return rows
