"""The shop the framework examples guard: its two tools, what the model asks, the bindings.

Each example gives these to its framework's own agent; only the wiring differs.
"""

from __future__ import annotations

from typing import Any

from guardrails import TurnContext


def get_orders(status: str, account: str) -> str:
    """The account's orders with this status."""
    return f"{account}: 2 {status} orders"


def export_orders(account: str) -> str:
    """Export every order (the backend's token is in its error message)."""
    raise RuntimeError("export failed: token=sk-live-123")


QUESTION = "Show my open orders"
# What the scripted model asks for, in one step: a good call, one naming another
# account, a wrong type, a tool that fails with a secret in its message, and a
# tool that does not exist. Then it answers.
CALLS: list[tuple[str, dict[str, Any]]] = [
    ("get_orders", {"status": "open"}),
    ("get_orders", {"status": "open", "account": "someone-else"}),
    ("get_orders", {"status": 7}),
    ("export_orders", {}),
    ("drop_database", {}),
]
ANSWER = "You have 2 open orders."

# The account is the signed-in tenant, never the model's choice: bound, and hidden from it.
TOOL_OPTIONS = {
    "get_orders": {"bind": {"account": "tenant"}},
    "export_orders": {"bind": {"account": "tenant"}},
}
CONTEXT = TurnContext(tenant="acme")
