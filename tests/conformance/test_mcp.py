"""The MCP integration held to the conformance table: the real ``mcp`` client and server, in memory.

``guarded_server`` serves the scenario's engine, and ``GuardedTools`` guards
the scenario's tools an ``MCPServer`` registered itself (``tools_from_server``,
``bank.py``); the client plays the model:
``tools/list`` first (pre_turn), then each step's calls (a step of two calls
is two ``tools/call`` requests at once). What the model receives is the
``CallToolResult``: its text and image blocks, structured content and ``isError``.
"""

from __future__ import annotations

from typing import Any

import anyio
import pytest
from mcp import Client
from mcp.types import CallToolResult, ImageContent

from guardrails import Guardrails, TurnContext
from guardrails.integrations.mcp import GuardedTools, guarded_server, tools_from_server
from tests.conformance import bank
from tests.conformance import harness as hs
from tests.conformance import scenario as sc
from tests.conformance import table as tb

ENTRY = "mcp"


def image_content() -> ImageContent:
    """``chart``'s result as MCP's own image block."""
    return ImageContent(type="image", data=sc.PNG_B64, mime_type="image/png")


def received(result: CallToolResult) -> hs.Received:
    """What an MCP client hands the model: text and image blocks, structured content, isError."""
    texts = [block.text for block in result.content if block.type == "text"]
    images = [(b.mime_type, b.data) for b in result.content if isinstance(b, ImageContent)]
    assert len(texts) + len(images) == len(result.content), result.content
    text = "".join(texts) if texts else None
    return hs.Received(text, result.is_error, tuple(images), result.structured_content)


def _context(ctx: Any) -> TurnContext:
    # Stands in for the application's auth: the tenant and session of the connection.
    return sc.context()


async def _step(client: Client, step: tuple[tb.Call, ...]) -> list[CallToolResult]:
    """The step's calls at once; their results in the order the model asked."""
    answered: dict[int, CallToolResult] = {}

    async def one(n: int, call: tb.Call) -> None:
        answered[n] = await client.call_tool(call.name, call.arguments)

    async with anyio.create_task_group() as tg:
        for n, call in enumerate(step):
            tg.start_soon(one, n, call)
    return [answered[n] for n in range(len(step))]


async def _calls(client: Client, row: tb.Row) -> list[CallToolResult]:
    return [result for step in row.steps for result in await _step(client, step)]


async def run(row: tb.Row) -> hs.Observed:
    instruments, ran = hs.Instruments(), []
    rails = sc.rails(ran, image=image_content, **instruments.engine())
    async with Client(guarded_server(rails, "bank", context=_context)) as client:
        listed = await client.list_tools()
        assert [t.name for t in listed.tools] == list(sc.OFFERED)
        results = await _calls(client, row)
    return instruments.observed([received(r) for r in results], ran)


async def run_server_tools(row: tb.Row) -> hs.Observed:
    instruments, ran = hs.Instruments(), []
    app = bank.server(ran.append)
    bound = {"balance": {"bind": {"account_id": "account_id"}}}
    rails = Guardrails(
        await tools_from_server(app, bound),
        sc.guards(),
        max_result_chars=sc.MAX_RESULT,
        **instruments.engine(),
    )
    app.middleware.append(GuardedTools(rails, context=_context))
    async with Client(app) as client:
        listed = await client.list_tools()
        assert [t.name for t in listed.tools] == list(sc.OFFERED)
        results = await _calls(client, row)
    return instruments.observed([received(r) for r in results], ran)


@pytest.mark.parametrize("row", tb.ROWS, ids=lambda row: row.id)
@pytest.mark.parametrize("driver", [run, run_server_tools], ids=["engine_tools", "server_tools"])
async def test_mcp_answers_as_the_table_says(driver: Any, row: tb.Row) -> None:
    if not hs.applies(ENTRY, row):
        hs.check_not_applicable(ENTRY, row)
        return
    hs.check(ENTRY, row, await driver(row))
