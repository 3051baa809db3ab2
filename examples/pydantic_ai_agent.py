"""A pydantic-ai agent guarded by one capability, run offline with ``FunctionModel``.

With a real model, build the ``Agent`` with it instead of ``FunctionModel``.

    python examples/pydantic_ai_agent.py
"""

from __future__ import annotations

import asyncio
from typing import Any

from pydantic_ai import Agent
from pydantic_ai.messages import ModelResponse, TextPart, ToolCallPart, ToolReturnPart
from pydantic_ai.models.function import AgentInfo, FunctionModel

from guardrails import Guardrails, TurnContext
from guardrails.integrations import pydantic_ai
from guardrails.rules import trigger


def search_docs(query: str, limit: int = 3) -> list[str]:
    """Search the help centre."""
    return [f"{query} #{i}" for i in range(limit)]


def delete_user(user_id: str) -> str:
    """Delete a user."""
    return f"deleted {user_id}"


def scripted(messages: list[Any], info: AgentInfo) -> ModelResponse:
    print("offered:", [t.name for t in info.function_tools])
    if len(messages) == 1:
        return ModelResponse(
            parts=[
                ToolCallPart("search_docs", {"query": "refunds", "limit": 2}, tool_call_id="c1"),
                ToolCallPart("search_docs", {"limit": "many"}, tool_call_id="c2"),
                ToolCallPart("delete_user", {"user_id": "u-1"}, tool_call_id="c3"),
            ]
        )
    return ModelResponse(parts=[TextPart("Here is what I found.")])


async def main() -> None:
    agent = Agent(FunctionModel(scripted), tools=[search_docs, delete_user])
    # "delete" in the user's text withholds delete_user from this turn.
    rails = Guardrails(guards=[trigger(["delete"], remove=["delete_user"], name="no_deletes")])
    result = await agent.run(
        "How do I get a refund? And delete my account.",
        deps=TurnContext(tenant="acme"),
        capabilities=[pydantic_ai.capability(rails)],
    )
    for message in result.all_messages():
        for part in message.parts:
            if isinstance(part, ToolReturnPart):
                print(f"{part.tool_call_id} ({part.outcome}): {part.content}")
    print("final:", result.output)


if __name__ == "__main__":
    asyncio.run(main())
