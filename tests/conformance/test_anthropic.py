"""The Anthropic integration held to the conformance table.

The real ``anthropic`` client talks to ``ScriptedMessagesAPI`` on 127.0.0.1:
each step of a row is one assistant message of ``tool_use`` blocks, then a
final text. What the model received is read from the next request the SDK
sent (its ``tool_result`` blocks), matched to the model's ``tool_use`` ids.
Three drivers share the column: ``run_tool_loop``, ``arun_tool_loop`` with
``AsyncAnthropic``, and the SDK's own ``tool_runner`` over ``guard_beta_tools``.
"""

from __future__ import annotations

import warnings
from typing import Any

import anthropic
import pytest

from guardrails.integrations.anthropic import arun_tool_loop, guard_beta_tools, run_tool_loop
from guardrails.integrations.scripted import ScriptedMessagesAPI, text_message, tool_use_message
from tests.conformance import harness as hs
from tests.conformance import scenario as sc
from tests.conformance import table as tb

ENTRY = "anthropic"
RUNNER = "anthropic.tool_runner"
ASK = [{"role": "user", "content": "What can I do with my account?"}]
CREATE: dict[str, Any] = {"model": "scripted", "max_tokens": 256}


def image_block() -> dict[str, Any]:
    """``chart``'s result in the Messages API's own form."""
    source = {"type": "base64", "media_type": "image/png", "data": sc.PNG_B64}
    return {"type": "image", "source": source}


def _script(row: tb.Row) -> list[dict[str, Any]]:
    steps = [tool_use_message(*((c.name, c.arguments) for c in step)) for step in row.steps]
    return [*steps, text_message(sc.FINAL)]


def _received(block: dict[str, Any]) -> hs.Received:
    content = block.get("content")
    if isinstance(content, str):
        text: str | None = content
        images: tuple[tuple[str, str], ...] = ()
    else:
        parts = content or []
        texts = [p["text"] for p in parts if p.get("type") == "text"]
        text = "".join(texts) if texts else None
        images = tuple(
            (p["source"]["media_type"], p["source"]["data"])
            for p in parts
            if p.get("type") == "image"
        )
    return hs.Received(text, bool(block.get("is_error", False)), images)


def _answers(
    api: ScriptedMessagesAPI, script: list[dict[str, Any]]
) -> tuple[list[hs.Received], tuple[str, ...]]:
    """Each tool_use's answer and id, in the order the model asked, from the requests the
    SDK sent."""
    answers, ids = [], []
    for index, message in enumerate(script[:-1]):
        sent = api.requests[index + 1]["messages"][-1]
        assert sent["role"] == "user"
        by_id = {block["tool_use_id"]: block for block in sent["content"]}
        answers += [_received(by_id[use["id"]]) for use in message["content"]]
        ids += [use["id"] for use in message["content"]]
    assert len(api.requests) == len(script), "the run ended early"
    return answers, tuple(ids)


def run(row: tb.Row) -> hs.Observed:
    instruments, ran, script = hs.Instruments(), [], _script(row)
    turn = sc.rails(ran, image=image_block, **instruments.engine()).turn(sc.context())
    with ScriptedMessagesAPI(script) as api:
        client = anthropic.Anthropic(api_key="test", base_url=api.base_url, max_retries=0)
        with client:
            done = run_tool_loop(client, turn, messages=ASK, **CREATE)
    assert not done.exhausted
    answers, ids = _answers(api, script)
    return instruments.observed(answers, ran, call_ids=ids)


async def arun(row: tb.Row) -> hs.Observed:
    instruments, ran, script = hs.Instruments(), [], _script(row)
    turn = sc.rails(ran, image=image_block, **instruments.engine()).turn(sc.context())
    with ScriptedMessagesAPI(script) as api:
        client = anthropic.AsyncAnthropic(api_key="test", base_url=api.base_url, max_retries=0)
        async with client:
            done = await arun_tool_loop(client, turn, messages=ASK, **CREATE)
    assert not done.exhausted
    answers, ids = _answers(api, script)
    return instruments.observed(answers, ran, call_ids=ids)


def run_sdk_runner(row: tb.Row) -> hs.Observed:
    instruments, ran, script = hs.Instruments(), [], _script(row)
    turn = sc.rails(ran, image=image_block, **instruments.engine()).turn(sc.context())
    with ScriptedMessagesAPI(script) as api:
        client = anthropic.Anthropic(api_key="test", base_url=api.base_url, max_retries=0)
        with client:
            runner = client.beta.messages.tool_runner(
                messages=ASK, tools=guard_beta_tools(turn, ASK), **CREATE
            )
            with warnings.catch_warnings(record=True) as warned:
                warnings.simplefilter("always")
                runner.until_done()
    # The runner warns of each tool it was not given (and answers it itself).
    assert all("not found in tool runner" in str(w.message) for w in warned), warned
    return instruments.observed(_answers(api, script)[0], ran)


@pytest.mark.parametrize("row", tb.ROWS, ids=lambda row: row.id)
def test_anthropic_tool_loop_answers_as_the_table_says(row: tb.Row) -> None:
    if not hs.applies(ENTRY, row):
        hs.check_not_applicable(ENTRY, row)
        return
    hs.check(ENTRY, row, run(row))


@pytest.mark.parametrize("row", tb.ROWS, ids=lambda row: row.id)
def test_anthropic_sdk_tool_runner_answers_as_the_table_says(row: tb.Row) -> None:
    if not hs.applies(RUNNER, row):
        hs.check_not_applicable(RUNNER, row)
        return
    hs.check(RUNNER, row, run_sdk_runner(row))


@pytest.mark.parametrize("row", tb.ROWS, ids=lambda row: row.id)
async def test_anthropic_async_loop_answers_as_the_table_says(row: tb.Row) -> None:
    if not hs.applies(ENTRY, row):
        hs.check_not_applicable(ENTRY, row)
        return
    hs.check(ENTRY, row, await arun(row))
