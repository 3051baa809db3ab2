"""A guarded Anthropic Messages tool loop.

Runs against a scripted Messages API on 127.0.0.1 (no API key, no network).
To drive a real model, build the client without ``base_url`` and set
ANTHROPIC_API_KEY; nothing else changes.

    python examples/anthropic_tool_loop.py
"""

from __future__ import annotations

from typing import Literal

import anthropic

from guardrails import Guardrails, tool
from guardrails.integrations.anthropic import run_tool_loop
from guardrails.integrations.scripted import ScriptedMessagesAPI, text_message, tool_use_message
from guardrails.rules import trigger


@tool(bind={"account_id": "account_id"})
def get_balance(account_id: str) -> dict[str, object]:
    """The customer's balance."""
    return {"account": account_id, "balance": 250.0}


@tool(bind={"account_id": "account_id"}, effect=True)
def transfer(account_id: str, amount: float, currency: Literal["EUR", "USD"]) -> str:
    """Move money out of the customer's account."""
    return f"sent {amount} {currency}"


# What the scripted model does: one bad call, one call the guards refuse, one good call.
SCRIPT = [
    tool_use_message(
        ("transfer", {"amount": 10}),
        ("transfer", {"account_id": "acc-999", "amount": 10, "currency": "EUR"}),
        ("get_balance", {}),
    ),
    text_message("Your balance is 250 EUR."),
]


def main() -> None:
    rails = Guardrails(
        [get_balance, transfer],
        [trigger(["crypto"], remove=["transfer"], name="no_crypto")],
    )
    turn = rails.turn(tenant="acme", session="s-1", values={"account_id": "acc-42"})
    with (
        ScriptedMessagesAPI(SCRIPT) as api,
        anthropic.Anthropic(api_key="scripted", base_url=api.base_url, max_retries=0) as client,
    ):
        run = run_tool_loop(
            client,
            turn,
            model="claude-sonnet-5-5",
            max_tokens=512,
            messages=[{"role": "user", "content": "What's my balance?"}],
        )
    print("tools sent to the model:", [t["name"] for t in api.requests[0]["tools"]])
    for block in run.messages[2]["content"]:
        flag = " (is_error)" if block.get("is_error") else ""
        print(f"tool_result{flag}: {block['content']}")
    print("final answer:", run.message.content[0].text)


if __name__ == "__main__":
    main()
