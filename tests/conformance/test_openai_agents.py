"""The OpenAI Agents SDK held to the conformance table.

A real ``Agent`` over the SDK's ``ScriptedModel`` (each step of a row is one
model turn of function calls, then a final message), guarded by
``openai_agents.guard_agent`` and run with ``openai_agents.run_config()``. What the
model received is read from the ``function_call_output`` items of the last
request. Three drivers share the column: ``Runner.run``, ``Runner.run_sync``
and ``Runner.run_streamed``. In the approval row ``transfer`` is declared with
``needs_approval=True``: the run stops with an interruption, which is approved
and the run resumed from its state.
"""

from __future__ import annotations

import itertools
from typing import Any

import pytest

from tests.conformance import harness as hs
from tests.conformance import scenario as sc
from tests.conformance import table as tb
from tests.integrations import _frameworks as fw

fw.need("agents")

from agents import (  # noqa: E402
    Agent,
    Runner,
    ToolOutputImage,
    function_tool,
    set_tracing_disabled,
)
from agents.testing import ScriptedModel, assistant_message, function_call  # noqa: E402

from guardrails import Guardrails  # noqa: E402
from guardrails.integrations import openai_agents  # noqa: E402

set_tracing_disabled(True)

ENTRY = "openai_agents"
ASK = "What can I do with my account?"
IMAGE_URL = f"data:image/png;base64,{sc.PNG_B64}"


def tools(ran: list[str], approval: bool) -> list[Any]:
    """The scenario's tools as the SDK's function tools (``transfer`` waits for approval in
    the approval row); each body records its run."""
    bodies = sc.functions(ran, lambda: ToolOutputImage(image_url=IMAGE_URL))
    return [
        function_tool(fn, needs_approval=approval and name == "transfer")
        for name, fn in bodies.items()
    ]


class Script:
    """The row's steps as ``ScriptedModel`` turns, with the model's call ids."""

    def __init__(self, row: tb.Row) -> None:
        counter = itertools.count(1)
        self.steps = [
            [(f"call-{next(counter)}", c.name, c.arguments) for c in step] for step in row.steps
        ]
        self.model = ScriptedModel(
            [
                *[[function_call(n, a, call_id=i) for i, n, a in step] for step in self.steps],
                [assistant_message(sc.FINAL)],
            ]
        )

    @property
    def ids(self) -> tuple[str, ...]:
        return tuple(call_id for step in self.steps for call_id, _, _ in step)

    def received(self) -> list[hs.Received]:
        sent = {
            item["call_id"]: item["output"]
            for call in self.model.calls
            for item in call.input
            if isinstance(item, dict) and item.get("type") == "function_call_output"
        }
        return [_received(sent[call_id]) for call_id in self.ids]


def _received(output: Any) -> hs.Received:
    """One ``function_call_output``'s output: text, or a list of input items (this API has
    no error flag)."""
    if isinstance(output, str):
        return hs.Received(output)
    images = []
    texts = []
    for item in output:
        if item["type"] == "input_image":
            mime, _, data = item["image_url"].removeprefix("data:").partition(";base64,")
            images.append((mime, data))
        else:
            texts.append(item["text"])
    return hs.Received("".join(texts) if texts else None, None, tuple(images))


def agent(row: tb.Row, ran: list[str], instruments: hs.Instruments) -> tuple[Any, Script]:
    script = Script(row)
    engine = Guardrails(guards=sc.guards(), max_result_chars=sc.MAX_RESULT, **instruments.engine())
    guarded = openai_agents.guard_agent(
        Agent(name="bank", tools=tools(ran, row.id == "approval"), model=script.model),
        engine,
        tool_options=sc.BIND,
    )
    return guarded, script


def _approved(result: Any) -> Any:
    """The state to resume from, every interruption approved; None when the run ended."""
    if not result.interruptions:
        return None
    state = result.to_state()
    for item in result.interruptions:
        state.approve(item)
    return state


CONFIG = openai_agents.run_config()


async def arun(row: tb.Row, stream: bool = False) -> hs.Observed:
    instruments, ran = hs.Instruments(), []
    guarded, script = agent(row, ran, instruments)
    given: Any = ASK
    for _ in range(2):  # the run, and its resumption after approval
        if stream:
            streamed = Runner.run_streamed(guarded, given, context=sc.context(), run_config=CONFIG)
            async for _event in streamed.stream_events():
                pass
            given = _approved(streamed)
        else:
            result = await Runner.run(guarded, given, context=sc.context(), run_config=CONFIG)
            given = _approved(result)
        if given is None:
            break
    return instruments.observed(script.received(), ran, call_ids=script.ids)


def run(row: tb.Row) -> hs.Observed:
    instruments, ran = hs.Instruments(), []
    guarded, script = agent(row, ran, instruments)
    with fw.default_loop_closed():
        result = Runner.run_sync(guarded, ASK, context=sc.context(), run_config=CONFIG)
        state = _approved(result)
        if state is not None:
            Runner.run_sync(guarded, state, context=sc.context(), run_config=CONFIG)
    return instruments.observed(script.received(), ran, call_ids=script.ids)


@pytest.mark.parametrize("row", tb.ROWS, ids=lambda row: row.id)
async def test_openai_agents_run_answers_as_the_table_says(row: tb.Row) -> None:
    if not hs.applies(ENTRY, row):
        hs.check_not_applicable(ENTRY, row)
        return
    hs.check(ENTRY, row, await arun(row))


@pytest.mark.parametrize("row", tb.ROWS, ids=lambda row: row.id)
def test_openai_agents_run_sync_answers_as_the_table_says(row: tb.Row) -> None:
    if not hs.applies(ENTRY, row):
        hs.check_not_applicable(ENTRY, row)
        return
    hs.check(ENTRY, row, run(row))


@pytest.mark.parametrize("row", tb.ROWS, ids=lambda row: row.id)
async def test_openai_agents_run_streamed_answers_as_the_table_says(row: tb.Row) -> None:
    if not hs.applies(ENTRY, row):
        hs.check_not_applicable(ENTRY, row)
        return
    hs.check(ENTRY, row, await arun(row, stream=True))


async def test_the_approval_row_is_one_turn() -> None:
    """Approval and resumption: one ``pre_turn`` in the audit, the call audited and run once."""
    instruments, ran = hs.Instruments(), []
    guarded, _ = agent(tb.ROW["approval"], ran, instruments)
    paused = await Runner.run(guarded, ASK, context=sc.context(), run_config=CONFIG)
    assert [r.kind for r in instruments.audit.rows()].count("tool_call") == 0  # waiting
    await Runner.run(guarded, _approved(paused), context=sc.context(), run_config=CONFIG)
    kinds = [r.kind for r in instruments.audit.rows()]
    assert kinds.count("pre_turn") == 1 and kinds.count("tool_call") == 1
    assert ran == ["transfer"]
