"""A hostile model speaking the Anthropic Messages and OpenAI function-calling formats.

Tool-use blocks and tool calls with invented or malformed names, inputs that
are not objects, 10 MB arguments, deep nesting and odd ids go through the
integrations' helpers: nothing raises, and every error block or tool message
carries exactly one of the fixed sentences.
"""

from __future__ import annotations

import itertools
import json
from typing import Any

import pytest

from guardrails import Guardrails, Outcome, Tool, model_sentence
from guardrails.integrations.anthropic import tool_results
from guardrails.integrations.openai import tool_messages

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


def rails() -> Guardrails:
    return Guardrails([Tool("lookup", lambda q: "found", SCHEMA), Tool("broken", failing, SCHEMA)])


HOSTILE_CALLS: dict[str, tuple[Any, Any]] = {
    "invented_name": ("drop_database", {"q": "x"}),
    "path_name": ("../lookup", {"q": "x"}),
    "control_name": ("lookup\x00\n", {"q": "x"}),
    "long_name": ("l" * 10_000, {"q": "x"}),
    "none_name": (None, {"q": "x"}),
    "int_name": (7, {"q": "x"}),
    "input_list": ("lookup", ["q", SECRET_MARK]),
    "input_string": ("lookup", SECRET_MARK),
    "input_none": ("lookup", None),
    "input_wrong_type": ("lookup", {"q": 5}),
    "input_extra_key": ("lookup", {"q": "x", SECRET_MARK: 1}),
    "input_10mb": ("lookup", {"q": "a" * 10_000_000}),
    "input_deep": ("lookup", {"q": "x", "n": json.loads("[" * 500 + "]" * 500)}),
    "input_surrogate_key": ("lookup", {"\ud800": 1, "q": "x"}),
    "tool_raises": ("broken", {"q": SECRET_MARK}),
}


def anthropic_message(name: Any, arguments: Any, use_id: Any) -> dict[str, Any]:
    return {
        "role": "assistant",
        "content": [
            {"type": "text", "text": "calling"},
            {"type": "tool_use", "id": use_id, "name": name, "input": arguments},
        ],
    }


def openai_message(name: Any, arguments: Any, use_id: Any) -> dict[str, Any]:
    if isinstance(arguments, dict | list):
        arguments = json.dumps(arguments)
    return {
        "role": "assistant",
        "tool_calls": [
            {"id": use_id, "type": "function", "function": {"name": name, "arguments": arguments}}
        ],
    }


IDS = ["toolu_01", None, 42, "id\x00\n" + "x" * 1000]


@pytest.mark.parametrize("use_id", IDS, ids=["str", "none", "int", "control"])
@pytest.mark.parametrize("kind", sorted(HOSTILE_CALLS))
def test_hostile_anthropic_tool_use_gets_a_fixed_error_block(
    kind: str, use_id: Any, ledger: Any
) -> None:
    name, arguments = HOSTILE_CALLS[kind]
    turn = rails().turn()

    (block,) = tool_results(turn, anthropic_message(name, arguments, use_id))

    (result,) = turn.results
    assert ledger.check("integrations", result, ("q",)) == []
    assert block["type"] == "tool_result"
    assert block["is_error"] is True
    assert block["content"] in ALLOWED
    assert block["tool_use_id"] == (use_id if isinstance(use_id, str) else result.call_id)


@pytest.mark.parametrize("kind", sorted(HOSTILE_CALLS))
def test_hostile_openai_tool_call_gets_a_fixed_tool_message(kind: str, ledger: Any) -> None:
    name, arguments = HOSTILE_CALLS[kind]
    turn = rails().turn()

    (message,) = tool_messages(turn, openai_message(name, arguments, "call_1"))

    (result,) = turn.results
    assert ledger.check("integrations", result, ("q",)) == []
    assert message["role"] == "tool"
    assert message["content"] in ALLOWED


def test_a_thousand_mixed_tool_uses_in_one_message_keep_their_order(ledger: Any) -> None:
    kinds = itertools.islice(itertools.cycle(sorted(HOSTILE_CALLS)), 1_000)
    blocks = []
    for i, kind in enumerate(kinds):
        name, arguments = HOSTILE_CALLS[kind]
        if kind == "input_10mb":
            name, arguments = "lookup", {"q": "ok"}
        blocks.append({"type": "tool_use", "id": f"toolu_{i}", "name": name, "input": arguments})
    turn = rails().turn()

    answers = tool_results(turn, {"role": "assistant", "content": blocks})

    assert [a["tool_use_id"] for a in answers] == [f"toolu_{i}" for i in range(1_000)]
    for answer, result in zip(answers, turn.results, strict=True):
        assert ledger.check("integrations", result, ("q",)) == []
        assert answer["content"] == ("found" if result.ok else answer["content"])
        assert result.ok or answer["content"] in ALLOWED
