"""Microsoft Agent Framework: an existing Agent, guarded with one call, run offline.

The chat client is scripted (``scripted_models.chat_client``); with a real one
nothing else changes. The shop's tools, the model's calls and the bindings are
in ``_shop.py``, shared with the Google ADK example.

    python examples/frameworks/agent_framework_orders.py
"""

from __future__ import annotations

import asyncio

from _shop import ANSWER, CALLS, CONTEXT, QUESTION, TOOL_OPTIONS, export_orders, get_orders
from agent_framework import Agent

from guardrails import Guardrails
from guardrails.integrations.agent_framework import guard_agent
from guardrails.integrations.scripted_models import chat_client, tool_results


async def main() -> None:
    client = chat_client(CALLS, ANSWER)
    agent = Agent(client=client, tools=[get_orders, export_orders])
    guard_agent(agent, Guardrails(max_result_chars=500), tool_options=TOOL_OPTIONS, context=CONTEXT)
    response = await agent.run(QUESTION)
    offered = client.requests[0][1]["tools"]
    print("tools offered:", [t.name for t in offered])
    print("parameters the model sees:", list(offered[0].parameters()["properties"]))
    for call_id, content in tool_results(client).items():
        print(f"{call_id}: {content}")
    print("answer:", response.text)


if __name__ == "__main__":
    asyncio.run(main())
