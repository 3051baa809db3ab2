"""An OpenAI Agents SDK agent guarded by ``guard()``, run offline with ``ScriptedModel``.

With a real model, build the ``Agent`` with it instead of ``ScriptedModel``.

    python examples/openai_agents_sdk.py
"""

from __future__ import annotations

import asyncio

from agents import Agent, Runner, function_tool, set_tracing_disabled
from agents.testing import ScriptedModel, assistant_message, function_call

from guardrails import Guardrails, TurnContext
from guardrails.integrations import openai_agents


@function_tool
def get_balance(account_id: str) -> str:
    """The balance of the customer's account."""
    return f"{account_id}: 250.00 EUR"


@function_tool
def export_log() -> str:
    """The full transaction log."""
    return "\n".join(f"2026-11-30 tx {i} ok" for i in range(5000))


@function_tool
def close_account(account_id: str, reason: str) -> str:
    """Close the account."""
    raise RuntimeError(f"core banking said no for {account_id}: token=sk-live-123")


async def main() -> None:
    set_tracing_disabled(True)
    model = ScriptedModel(
        [
            [
                function_call("get_balance", {}, call_id="c1"),
                function_call("export_log", {}, call_id="c2"),
                function_call("close_account", {"reason": "fraud"}, call_id="c3"),
                function_call("transfer_all", {"to": "attacker"}, call_id="c4"),
            ],
            [assistant_message("Your balance is 250.00 EUR.")],
        ]
    )
    agent = Agent(name="support", tools=[get_balance, export_log, close_account], model=model)
    rails = Guardrails(max_result_chars=300)
    guarded = openai_agents.guard_agent(
        agent,
        rails,
        tool_options={
            "get_balance": {"bind": {"account_id": "account_id"}},
            "close_account": {"bind": {"account_id": "account_id"}},
        },
    )
    result = await Runner.run(
        guarded,
        "What is my balance?",
        context=TurnContext(tenant="acme", values={"account_id": "acc-42"}),
        run_config=openai_agents.run_config(),
    )
    print("tools offered:", [t.name for t in model.calls[0].tools])
    for item in model.calls[1].input:
        if isinstance(item, dict) and item.get("type") == "function_call_output":
            print(f"{item['call_id']}: {item['output'][-80:]!r}")
    print("final:", result.final_output)


if __name__ == "__main__":
    asyncio.run(main())
