"""A hostile MCP client: tools/call with invented names and odd arguments.

Driven with the real ``mcp`` client and server, connected in memory. Every
answer is either a normal result or ``isError`` with exactly one of the fixed
sentences; the server keeps serving afterwards.
"""

from __future__ import annotations

from typing import Any

import pytest
from mcp import Client

from guardrails import Guardrails, Outcome, Tool, TurnContext, model_sentence
from guardrails.integrations.mcp import guarded_server

SECRET_MARK = "sk-live-7f3a9c"
SCHEMA = {
    "type": "object",
    "properties": {"q": {"type": "string"}},
    "required": ["q"],
    "additionalProperties": False,
}
ALLOWED = frozenset(
    model_sentence(outcome, params, undeclared=undeclared)
    for outcome in Outcome
    if outcome is not Outcome.OK
    for params in ((), ("q",))
    for undeclared in (False, True)
)


def failing(q: str) -> str:
    raise RuntimeError(f"backend said {SECRET_MARK}")


def server() -> Any:
    rails = Guardrails([Tool("lookup", lambda q: "found", SCHEMA), Tool("broken", failing, SCHEMA)])
    return guarded_server(rails, context=lambda ctx: TurnContext(tenant="acme"))


def nested(depth: int) -> Any:
    value: Any = "leaf"
    for _ in range(depth):
        value = {"k": value}
    return value


CALLS: dict[str, tuple[str, Any]] = {
    "invented_name": ("drop_database", {"q": "x"}),
    "path_name": ("../../lookup", {"q": "x"}),
    "control_name": ("lookup\x00\x1b[2J", {"q": "x"}),
    "long_name": ("l" * 10_000, {"q": "x"}),
    "no_arguments": ("lookup", None),
    "wrong_type": ("lookup", {"q": 5}),
    "extra_key": ("lookup", {"q": "x", SECRET_MARK: 1}),
    "ten_mb": ("lookup", {"q": "a" * 10_000_000}),
    "nested_200": ("lookup", {"q": "x", "n": nested(200)}),
    "surrogate_value": ("lookup", {"q": "\ud800"}),
    "tool_raises": ("broken", {"q": SECRET_MARK}),
}


@pytest.mark.parametrize("kind", sorted(CALLS))
async def test_hostile_tools_call_is_answered_with_a_fixed_sentence(kind: str, ledger: Any) -> None:
    name, arguments = CALLS[kind]
    async with Client(server()) as client:
        answer = await client.call_tool(name, arguments)
        after = await client.call_tool("lookup", {"q": "still serving"})

    ledger.add("mcp", inputs=1)
    texts = [block.text for block in answer.content]
    if answer.is_error:
        assert len(texts) == 1 and texts[0] in ALLOWED, texts
    else:
        assert kind == "surrogate_value" and texts == ["found"]
    assert SECRET_MARK not in str(answer.model_dump())
    assert (after.is_error, [b.text for b in after.content]) == (False, ["found"])
