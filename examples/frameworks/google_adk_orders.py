"""Google ADK: an existing LlmAgent, guarded by one plugin on its runner, run offline.

The model is scripted (``scripted_models.adk_model``); with Gemini nothing else
changes. The shop's tools, the model's calls and the bindings are in
``_shop.py``, shared with the Agent Framework example.

    python examples/frameworks/google_adk_orders.py
"""

from __future__ import annotations

import asyncio

from _shop import ANSWER, CALLS, CONTEXT, QUESTION, TOOL_OPTIONS, export_orders, get_orders
from google.adk.agents import LlmAgent
from google.adk.apps import App
from google.adk.runners import InMemoryRunner
from google.genai import types

from guardrails import Guardrails
from guardrails.integrations.google_adk import plugin
from guardrails.integrations.scripted_models import adk_model, tool_results


async def main() -> None:
    llm = adk_model(CALLS, ANSWER)
    agent = LlmAgent(name="shop", model=llm, tools=[get_orders, export_orders])
    reports: list[object] = []
    guarded = plugin(
        agent,
        Guardrails(max_result_chars=500),
        tool_options=TOOL_OPTIONS,
        context=CONTEXT,
        on_report=reports.append,
    )
    runner = InMemoryRunner(app=App(name="shop", root_agent=agent, plugins=[guarded]))
    session = await runner.session_service.create_session(app_name="shop", user_id="u1")
    message = types.Content(role="user", parts=[types.Part(text=QUESTION)])
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
