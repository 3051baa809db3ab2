"""Google ADK: an existing LlmAgent, guarded by one plugin on its runner, run offline.

The model is scripted (``scripted_models.adk_model``); with Gemini nothing else
changes.

    python examples/frameworks/google_adk_orders.py
"""

from __future__ import annotations

import asyncio

from google.adk.agents import LlmAgent
from google.adk.apps import App
from google.adk.runners import InMemoryRunner
from google.genai import types

from guardrails import Guardrails, TurnContext
from guardrails.integrations.google_adk import plugin
from guardrails.integrations.scripted_models import adk_model, tool_results


def get_orders(status: str, account: str) -> str:
    """The account's orders with this status."""
    return f"{account}: 2 {status} orders"


def export_orders(account: str) -> str:
    """Export every order (the backend's token is in its error message)."""
    raise RuntimeError("export failed: token=sk-live-123")


async def main() -> None:
    llm = adk_model(
        [
            ("get_orders", {"status": "open"}),
            ("get_orders", {"status": "open", "account": "someone-else"}),
            ("get_orders", {"status": 7}),
            ("export_orders", {}),
            ("drop_database", {}),
        ],
        "You have 2 open orders.",
    )
    agent = LlmAgent(name="shop", model=llm, tools=[get_orders, export_orders])
    options = {
        "get_orders": {"bind": {"account": "tenant"}},
        "export_orders": {"bind": {"account": "tenant"}},
    }
    reports: list[object] = []
    guarded = plugin(
        agent,
        Guardrails(max_result_chars=500),
        tool_options=options,
        context=TurnContext(tenant="acme"),
        on_report=reports.append,
    )
    runner = InMemoryRunner(app=App(name="shop", root_agent=agent, plugins=[guarded]))
    session = await runner.session_service.create_session(app_name="shop", user_id="u1")
    message = types.Content(role="user", parts=[types.Part(text="Show my open orders")])
    async for _ in runner.run_async(user_id="u1", session_id=session.id, new_message=message):
        pass
    [declared] = llm.requests[0].config.tools
    for declaration in declared.function_declarations:
        schema = declaration.parameters_json_schema or {}
        print(f"{declaration.name} parameters the model sees:", list(schema.get("properties", {})))
    for call_id, response in tool_results(llm).items():
        print(f"{call_id}: {response}")
    print("post_run saw:", getattr(reports[0], "text", None))


if __name__ == "__main__":
    asyncio.run(main())
