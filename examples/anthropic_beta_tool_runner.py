"""Functions decorated with the SDK's ``beta_tool``, run by the SDK's tool runner, guarded.

Left alone, the SDK's tool runner sends ``repr(exception)`` to the model. With
``guard_beta_tools`` every call goes through tool_call, and a failure reaches
the model as its fixed sentence. Runs against a scripted Messages API.

    python examples/anthropic_beta_tool_runner.py
"""

from __future__ import annotations

import anthropic
from anthropic import beta_tool

from guardrails import Guardrails
from guardrails.integrations.anthropic import from_beta_tool, guard_beta_tools
from guardrails.integrations.scripted import ScriptedMessagesAPI, text_message, tool_use_message


@beta_tool
def refund(account_id: str, amount: float) -> str:
    """Refund an amount to the customer.

    Args:
        amount: how much to refund, in EUR
    """
    if amount > 100:
        raise PermissionError("payments-db at 10.0.0.5 refused: token=sk-live-123")
    return f"refunded {amount} EUR to {account_id}"


SCRIPT = [
    tool_use_message(("refund", {"amount": 500}), ("refund", {"amount": 20})),
    text_message("I refunded 20 EUR."),
]


def main() -> None:
    rails = Guardrails([from_beta_tool(refund, bind={"account_id": "account_id"})])
    turn = rails.turn(values={"account_id": "acc-42"})
    with (
        ScriptedMessagesAPI(SCRIPT) as api,
        anthropic.Anthropic(api_key="scripted", base_url=api.base_url, max_retries=0) as client,
    ):
        runner = client.beta.messages.tool_runner(
            model="claude-sonnet-5-5",
            max_tokens=512,
            messages=[{"role": "user", "content": "Refund me please"}],
            tools=guard_beta_tools(turn),
        )
        final = runner.until_done()
    schema = api.requests[0]["tools"][0]["input_schema"]
    print("parameters the model sees:", sorted(schema["properties"]))
    for block in api.requests[1]["messages"][-1]["content"]:
        flag = " (is_error)" if block.get("is_error") else ""
        print(f"tool_result{flag}: {block['content']}")
    print("final answer:", final.content[0].text)


if __name__ == "__main__":
    main()
