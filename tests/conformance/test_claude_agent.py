"""The Claude Agent SDK held to the conformance table.

The SDK's bundled Claude Code CLI talks to ``ScriptedMessagesAPI`` on
127.0.0.1 (offline): each step of a row is one assistant message of
``tool_use`` blocks naming the served tools (``mcp__bank__<tool>``), then a
final text. The scenario's tools are the SDK's own ``@tool`` functions,
served through ``claude_agent.guard_options``. What the model received is read
from the requests the CLI sent (their ``tool_result`` blocks, by ``tool_use``
id). The approval row goes through the SDK's permission callback
(``can_use_tool``), which approves the transfer before it runs. Two drivers
share the column: ``query`` with a streamed prompt, and a ``ClaudeSDKClient``
session.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from guardrails import Guardrails
from guardrails.integrations.scripted import ScriptedMessagesAPI, text_message, tool_use_message
from tests.conformance import harness as hs
from tests.conformance import scenario as sc
from tests.conformance import table as tb
from tests.integrations import _frameworks as fw

fw.need("claude_agent_sdk")

from claude_agent_sdk import (  # noqa: E402
    ClaudeAgentOptions,
    ClaudeSDKClient,
    PermissionResultAllow,
    query,
    tool,
)

from guardrails.integrations.claude_agent import guard_options  # noqa: E402

ENTRY = "claude_agent"
SERVER = "bank"
ASK = "What can I do with my account?"


def _text(text: str) -> dict[str, Any]:
    return {"content": [{"type": "text", "text": text}]}


def tools(ran: list[str]) -> list[Any]:
    """The scenario's tools as the SDK's ``@tool`` functions; each body records its run."""

    @tool("balance", "The customer's balance.", {"account_id": str})
    async def balance(args: dict[str, Any]) -> dict[str, Any]:
        ran.append("balance")
        return _text(sc.balance_of(args["account_id"]))

    @tool("transfer", "Move money to a payee.", {"to": str, "amount": float})
    async def transfer(args: dict[str, Any]) -> dict[str, Any]:
        ran.append("transfer")
        return _text(sc.transfer_of(args["to"], args["amount"]))

    @tool("search", "Search the help centre.", {"query": str})
    async def search(args: dict[str, Any]) -> dict[str, Any]:
        ran.append("search")
        return _text(json.dumps(sc.hits_of(args["query"])))

    @tool("history", "Every card payment of the account.", {})
    async def history(args: dict[str, Any]) -> dict[str, Any]:
        ran.append("history")
        return _text(sc.history_text())

    @tool("chart", "The month's spending as a chart.", {})
    async def chart(args: dict[str, Any]) -> dict[str, Any]:
        ran.append("chart")
        return {"content": [{"type": "image", "data": sc.PNG_B64, "mimeType": "image/png"}]}

    @tool("close_account", "Close the account.", {})
    async def close_account(args: dict[str, Any]) -> dict[str, Any]:
        ran.append("close_account")
        return _text("closed")

    return [balance, transfer, search, history, chart, close_account]


async def approve(name: str, tool_input: dict[str, Any], ctx: Any) -> Any:
    """The application's permission callback: a person approves the call."""
    return PermissionResultAllow()


def _received(block: dict[str, Any]) -> hs.Received:
    content = block.get("content")
    parts = [{"type": "text", "text": content}] if isinstance(content, str) else content or []
    texts = [p["text"] for p in parts if p.get("type") == "text"]
    images = tuple(
        (p["source"]["media_type"], p["source"]["data"]) for p in parts if p.get("type") == "image"
    )
    return hs.Received("".join(texts) if texts else None, bool(block.get("is_error")), images)


def _answers(api: ScriptedMessagesAPI, script: list[dict[str, Any]]) -> tuple[list[Any], list[str]]:
    ids = [use["id"] for message in script[:-1] for use in message["content"]]
    found = {
        block["tool_use_id"]: block
        for request in api.requests
        for message in request.get("messages", [])
        if isinstance(message.get("content"), list)
        for block in message["content"]
        if block.get("type") == "tool_result"
    }
    return [_received(found[call_id]) for call_id in ids], ids


async def _prompt() -> Any:
    yield {"type": "user", "message": {"role": "user", "content": ASK}}


async def _query(options: ClaudeAgentOptions) -> None:
    async for _ in query(prompt=_prompt(), options=options):
        pass


async def _client(options: ClaudeAgentOptions) -> None:
    async with ClaudeSDKClient(options=options) as client:
        await client.query(ASK)
        async for _ in client.receive_response():
            pass


async def arun(row: tb.Row, home: Path, drive: Any = _query) -> hs.Observed:
    instruments, ran = hs.Instruments(), []
    script = [
        *(
            tool_use_message(*((f"mcp__{SERVER}__{c.name}", c.arguments) for c in step))
            for step in row.steps
        ),
        text_message(sc.FINAL),
    ]
    engine = Guardrails(guards=sc.guards(), max_result_chars=sc.MAX_RESULT, **instruments.engine())
    with ScriptedMessagesAPI(script) as api:
        env = {
            "ANTHROPIC_BASE_URL": api.base_url,
            "ANTHROPIC_API_KEY": "test",
            "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1",
            "ENABLE_TOOL_SEARCH": "false",
            "HOME": str(home),
            "CLAUDE_CONFIG_DIR": str(home),
        }
        options = ClaudeAgentOptions(env=env, cwd=str(home), model="claude-scripted")
        if row.id == "approval":
            options.can_use_tool = approve
        options = guard_options(
            options,
            engine,
            server=SERVER,
            sdk_tools=tools(ran),
            tool_options=sc.BIND,
            context=lambda hook_input: sc.context(),
        )
        await drive(options)
    answers, ids = _answers(api, script)
    return instruments.observed(answers, ran, call_ids=tuple(ids))


@pytest.mark.slow
@pytest.mark.parametrize("row", tb.ROWS, ids=lambda row: row.id)
async def test_claude_agent_query_answers_as_the_table_says(row: tb.Row, tmp_path: Path) -> None:
    if not hs.applies(ENTRY, row):
        hs.check_not_applicable(ENTRY, row)
        return
    hs.check(ENTRY, row, await arun(row, tmp_path))


@pytest.mark.slow
@pytest.mark.parametrize("row", tb.ROWS, ids=lambda row: row.id)
async def test_claude_agent_client_answers_as_the_table_says(row: tb.Row, tmp_path: Path) -> None:
    if not hs.applies(ENTRY, row):
        hs.check_not_applicable(ENTRY, row)
        return
    hs.check(ENTRY, row, await arun(row, tmp_path, _client))
