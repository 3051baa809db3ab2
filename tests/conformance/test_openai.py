"""The OpenAI integration held to the conformance table, with the ``openai`` package's own types.

Chat Completions: each step is one assistant ``ChatCompletionMessage`` whose
``tool_calls`` are the step's calls; ``tool_messages`` / ``atool_messages``
answer them. The Responses API: each step is a list of ``ResponseFunctionToolCall``
items; ``function_call_outputs`` / ``afunction_call_outputs`` answer them.
The answers are read from what would be sent back, matched by call id.
"""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable
from typing import Any

import pytest
from openai.types.chat import ChatCompletionMessage
from openai.types.responses import ResponseFunctionToolCall

from guardrails.integrations.openai import (
    afunction_call_outputs,
    atool_messages,
    function_call_outputs,
    offer_response_tools,
    offer_tools,
    tool_messages,
)
from tests.conformance import harness as hs
from tests.conformance import scenario as sc
from tests.conformance import table as tb

CHAT, RESPONSES = "openai.chat", "openai.responses"
ASK = [{"role": "user", "content": "What can I do with my account?"}]


def image_item() -> dict[str, Any]:
    """``chart``'s result as the Responses API's own image item."""
    return dict(tb.IMAGE_ITEM)


def _chat_message(step: tuple[tb.Call, ...], first: int) -> ChatCompletionMessage:
    calls = [
        {
            "id": f"call_{first + n}",
            "type": "function",
            "function": {"name": c.name, "arguments": json.dumps(c.arguments)},
        }
        for n, c in enumerate(step)
    ]
    return ChatCompletionMessage.model_validate(
        {"role": "assistant", "content": None, "tool_calls": calls}
    )


def _response_items(step: tuple[tb.Call, ...], first: int) -> list[ResponseFunctionToolCall]:
    return [
        ResponseFunctionToolCall(
            type="function_call",
            id=f"fc_{first + n}",
            call_id=f"call_{first + n}",
            name=c.name,
            arguments=json.dumps(c.arguments),
        )
        for n, c in enumerate(step)
    ]


def _chat_received(message: dict[str, Any]) -> hs.Received:
    assert message["role"] == "tool"
    return hs.Received(message["content"])


def _output_received(item: dict[str, Any]) -> hs.Received:
    assert item["type"] == "function_call_output"
    output = item["output"]
    if isinstance(output, str):
        return hs.Received(output)
    images = []
    for part in output:
        assert part["type"] == "input_image", part
        mime, _, data = part["image_url"].removeprefix("data:").partition(";base64,")
        images.append((mime, data))
    return hs.Received(None, images=tuple(images))


Answer = Callable[[Any, tuple[tb.Call, ...], int], Awaitable[list[dict[str, Any]]]]


async def _drive(row: tb.Row, responses: bool, answer: Answer) -> hs.Observed:
    instruments, ran = hs.Instruments(), []
    turn = sc.rails(ran, image=image_item, **instruments.engine()).turn(sc.context())
    offered = (offer_response_tools if responses else offer_tools)(turn, ASK)
    assert {t.get("name") or t["function"]["name"] for t in offered} == set(sc.OFFERED)
    answers: list[hs.Received] = []
    ids: list[str] = []
    for step in row.steps:
        first = len(ids) + 1
        sent = await answer(turn, step, first)
        key = "call_id" if responses else "tool_call_id"
        by_id = {item[key]: item for item in sent}
        step_ids = [f"call_{first + n}" for n in range(len(step))]
        read = _output_received if responses else _chat_received
        answers += [read(by_id[i]) for i in step_ids]
        ids += step_ids
    return instruments.observed(answers, ran, call_ids=tuple(ids))


async def _chat(turn: Any, step: tuple[tb.Call, ...], first: int) -> list[dict[str, Any]]:
    return tool_messages(turn, _chat_message(step, first))


async def _achat(turn: Any, step: tuple[tb.Call, ...], first: int) -> list[dict[str, Any]]:
    return await atool_messages(turn, _chat_message(step, first))


async def _responses(turn: Any, step: tuple[tb.Call, ...], first: int) -> list[dict[str, Any]]:
    return function_call_outputs(turn, _response_items(step, first))


async def _aresponses(turn: Any, step: tuple[tb.Call, ...], first: int) -> list[dict[str, Any]]:
    return await afunction_call_outputs(turn, _response_items(step, first))


@pytest.mark.parametrize("row", tb.ROWS, ids=lambda row: row.id)
@pytest.mark.parametrize("answer", [_chat, _achat], ids=["tool_messages", "atool_messages"])
async def test_openai_chat_answers_as_the_table_says(answer: Answer, row: tb.Row) -> None:
    if not hs.applies(CHAT, row):
        hs.check_not_applicable(CHAT, row)
        return
    hs.check(CHAT, row, await _drive(row, False, answer))


@pytest.mark.parametrize("row", tb.ROWS, ids=lambda row: row.id)
@pytest.mark.parametrize(
    "answer", [_responses, _aresponses], ids=["function_call_outputs", "afunction_call_outputs"]
)
async def test_openai_responses_answers_as_the_table_says(answer: Answer, row: tb.Row) -> None:
    if not hs.applies(RESPONSES, row):
        hs.check_not_applicable(RESPONSES, row)
        return
    hs.check(RESPONSES, row, await _drive(row, True, answer))
