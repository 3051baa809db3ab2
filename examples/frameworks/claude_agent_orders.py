"""Claude Agent SDK: a query() run guarded with one call, offline.

The bundled Claude Code CLI talks to a scripted Messages API on 127.0.0.1
(``scripted.ScriptedMessagesAPI``); with the real API, drop ``env=``.

    python examples/frameworks/claude_agent_orders.py
"""

from __future__ import annotations

import asyncio
import tempfile
from typing import Any

from claude_agent_sdk import ClaudeAgentOptions, query, tool

from guardrails import Guardrails, TurnContext
from guardrails.integrations.claude_agent import guard_options
from guardrails.integrations.scripted import ScriptedMessagesAPI, text_message, tool_use_message


@tool("get_orders", "The account's orders with this status.", {"status": str, "account": str})
async def get_orders(args: dict[str, Any]) -> dict[str, Any]:
    return {"content": [{"type": "text", "text": f"{args['account']}: 2 {args['status']} orders"}]}


@tool("export_orders", "Export every order.", {"account": str})
async def export_orders(args: dict[str, Any]) -> dict[str, Any]:
    raise RuntimeError("export failed: token=sk-live-123")


async def main() -> None:
    calls = [
        ("get_orders", {"status": "open"}),
        ("get_orders", {"status": "open", "account": "someone-else"}),
        ("get_orders", {"status": 7}),
        ("export_orders", {}),
    ]
    script = [
        tool_use_message(*[(f"mcp__shop__{name}", arguments) for name, arguments in calls]),
        text_message("You have 2 open orders."),
    ]
    with ScriptedMessagesAPI(script) as api, tempfile.TemporaryDirectory() as home:
        env = {
            "ANTHROPIC_BASE_URL": api.base_url,
            "ANTHROPIC_API_KEY": "offline",
            "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1",
            "ENABLE_TOOL_SEARCH": "false",
            "HOME": home,
            "CLAUDE_CONFIG_DIR": home,
        }
        options = guard_options(
            ClaudeAgentOptions(env=env, cwd=home, model="claude-scripted"),
            Guardrails(max_result_chars=500),
            server="shop",
            sdk_tools=[get_orders, export_orders],
            tool_options={
                "get_orders": {"bind": {"account": "tenant"}},
                "export_orders": {"bind": {"account": "tenant"}},
            },
            context=TurnContext(tenant="acme"),
        )
        async for _ in query(prompt="Show my open orders", options=options):
            pass
    served = {t["name"]: t["input_schema"] for t in api.requests[0]["tools"] if "shop" in t["name"]}
    for name, schema in sorted(served.items()):
        print(f"{name} parameters the model sees:", list(schema["properties"]))
    for block in api.requests[-1]["messages"][-1]["content"]:
        if block.get("type") == "tool_result":
            content = block["content"]
            text = content if isinstance(content, str) else "".join(c["text"] for c in content)
            flag = " (is_error)" if block.get("is_error") else ""
            print(f"tool_result{flag}: {text}")


if __name__ == "__main__":
    asyncio.run(main())
