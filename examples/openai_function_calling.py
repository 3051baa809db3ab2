"""OpenAI-style function calling: tool definitions out, ``tool_calls`` through tool_call.

The assistant message is scripted here; with the ``openai`` package it is
``client.chat.completions.create(..., tools=offer_tools(turn, messages)).choices[0].message``.

    python examples/openai_function_calling.py
"""

from __future__ import annotations

import json

from guardrails import Guardrails
from guardrails.integrations.openai import load_tools, offer_tools, tool_messages

# Definitions you already have, in OpenAI's format.
DEFINITIONS = [
    {
        "type": "function",
        "function": {
            "name": "get_weather",
            "description": "The weather in a city.",
            "parameters": {
                "type": "object",
                "properties": {
                    "city": {"type": "string"},
                    "unit": {"type": "string", "enum": ["C", "F"]},
                },
                "required": ["city"],
                "additionalProperties": False,
            },
        },
    }
]


def get_weather(city: str, unit: str = "C") -> dict[str, object]:
    return {"city": city, "temperature": 21, "unit": unit}


def main() -> None:
    rails = Guardrails(load_tools(DEFINITIONS, {"get_weather": get_weather}))
    messages = [{"role": "user", "content": "Weather in Lisbon?"}]
    turn = rails.turn(tenant="acme")
    print("tools:", json.dumps(offer_tools(turn, messages)))
    reply = {
        "role": "assistant",
        "content": None,
        "tool_calls": [
            {
                "id": "call_1",
                "type": "function",
                "function": {"name": "get_weather", "arguments": '{"city": "Lisbon"}'},
            },
            {
                "id": "call_2",
                "type": "function",
                "function": {"name": "get_weather", "arguments": '{"unit": "K"}'},
            },
            {"id": "call_3", "type": "function", "function": {"name": "rm_rf", "arguments": "{}"}},
        ],
    }
    for message in tool_messages(turn, reply):
        print(json.dumps(message))


if __name__ == "__main__":
    main()
