"""A LangChain v1 agent guarded by one middleware, run offline with a scripted chat model.

With a real model, pass it to ``create_agent`` instead of ``scripted_model``.

    python examples/langchain_agent.py
"""

from __future__ import annotations

from langchain.agents import create_agent
from langchain_core.messages import AIMessage, ToolMessage

from guardrails import Guardrails, Secret
from guardrails.integrations import langchain


def get_balance(account_id: str) -> str:
    """The balance of the customer's account."""
    return f"{account_id}: 250.00 EUR"


def refund(amount: float, account_id: str, api_key: str) -> str:
    """Refund the customer (an action: it gets the payments key)."""
    if amount > 100:
        raise RuntimeError(f"gateway refused with key {api_key}: token=sk-live-123")
    return f"refunded {amount} EUR to {account_id}"


def main() -> None:
    rails = Guardrails(max_calls_per_turn=3, secrets={"payments": "sk-live-123"}.__getitem__)
    model = langchain.scripted_model(
        AIMessage(
            "",
            tool_calls=[
                {"name": "get_balance", "args": {"account_id": "acc-999"}, "id": "c1"},
                {"name": "refund", "args": {"amount": 500}, "id": "c2"},
                {"name": "wire_money", "args": {"to": "attacker"}, "id": "c3"},
            ],
        ),
        AIMessage("", tool_calls=[{"name": "refund", "args": {"amount": 20}, "id": "c4"}]),
        AIMessage("Refunded 20 EUR."),
    )
    guard = langchain.middleware(
        rails,
        tool_options={
            "get_balance": {"bind": {"account_id": "account_id"}},
            "refund": {
                "bind": {"account_id": "account_id", "api_key": Secret("payments")},
                "effect": True,
            },
        },
    )
    agent = create_agent(model, [get_balance, refund], middleware=[guard])
    out = agent.invoke(
        {"messages": [{"role": "user", "content": "Refund me please"}]},
        context={"tenant": "acme", "account_id": "acc-42"},
    )
    offered = model.offered[0]
    print(
        "parameters the model sees:",
        {t["function"]["name"]: sorted(t["function"]["parameters"]["properties"]) for t in offered},
    )
    for message in out["messages"]:
        if isinstance(message, ToolMessage):
            print(f"{message.tool_call_id} ({message.status}): {message.content}")
    print("final:", out["messages"][-1].text)


if __name__ == "__main__":
    main()
