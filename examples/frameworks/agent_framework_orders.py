"""Microsoft Agent Framework: an existing Agent, guarded with one call, run offline.

The chat client is scripted (``scripted_models.chat_client``); with a real one
nothing else changes.

    python examples/frameworks/agent_framework_orders.py
"""

from __future__ import annotations

import asyncio

from agent_framework import Agent, tool

from guardrails import Guardrails, TurnContext
from guardrails.integrations.agent_framework import guard
from guardrails.integrations.scripted_models import chat_client, tool_results


@tool
def get_orders(status: str, account: str) -> str:
    """The account's orders with this status."""
    return f"{account}: 2 {status} orders"


@tool
def export_orders(account: str) -> str:
    """Export every order (the backend's token is in its error message)."""
    raise RuntimeError("export failed: token=sk-live-123")


async def main() -> None:
    client = chat_client(
        [
            ("get_orders", {"status": "open"}),
            ("get_orders", {"status": "open", "account": "someone-else"}),
            ("get_orders", {"status": 7}),
            ("export_orders", {}),
            ("drop_database", {}),
        ],
        "You have 2 open orders.",
    )
    agent = Agent(client=client, tools=[get_orders, export_orders])
    options = {
        "get_orders": {"bind": {"account": "tenant"}},
        "export_orders": {"bind": {"account": "tenant"}},
    }
    guard(
        agent,
        Guardrails(max_result_chars=500),
        tool_options=options,
        context=TurnContext(tenant="acme"),
    )
    response = await agent.run("Show my open orders")
    offered = [t.name for t in client.requests[0][1]["tools"]]
    print("tools offered:", offered)
    print(
        "parameters the model sees:",
        list(client.requests[0][1]["tools"][0].parameters()["properties"]),
    )
    for call_id, content in tool_results(client).items():
        print(f"{call_id}: {content}")
    print("answer:", response.text)


if __name__ == "__main__":
    asyncio.run(main())
