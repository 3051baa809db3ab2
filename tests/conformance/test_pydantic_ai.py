"""pydantic-ai held to the conformance table.

A real ``Agent`` over pydantic-ai's ``FunctionModel`` (each step of a row is
one ``ModelResponse`` of tool calls, then a final text), guarded by
``pydantic_ai.capability``. What the model received is read from the requests
the agent sent back (their ``ToolReturnPart``s, by call id). Three drivers
share the column: ``run_sync``, ``run`` and ``run_stream``. In the approval
row ``transfer`` is declared with ``requires_approval=True``: the run ends
with ``DeferredToolRequests``, and the next run approves and resumes it.
"""

from __future__ import annotations

import base64
import itertools
from collections.abc import AsyncIterator
from typing import Any

import pytest

from tests.conformance import harness as hs
from tests.conformance import scenario as sc
from tests.conformance import table as tb
from tests.integrations import _frameworks as fw

fw.need("pydantic_ai")

from pydantic_ai import (  # noqa: E402
    Agent,
    BinaryContent,
    DeferredToolRequests,
    DeferredToolResults,
    Tool,
)
from pydantic_ai.messages import (  # noqa: E402
    ModelMessage,
    ModelRequest,
    ModelResponse,
    TextPart,
    ToolCallPart,
    ToolReturnPart,
)
from pydantic_ai.models.function import AgentInfo, DeltaToolCall, FunctionModel  # noqa: E402

from guardrails import Guardrails  # noqa: E402
from guardrails.integrations import pydantic_ai  # noqa: E402

ENTRY = "pydantic_ai"
ASK = "What can I do with my account?"


def tools(ran: list[str], approval: bool) -> list[Any]:
    """The scenario's tools as pydantic-ai wraps plain functions; ``chart`` answers a
    ``BinaryContent``; in the approval row ``transfer`` requires approval."""
    found = sc.functions(ran, lambda: BinaryContent(data=sc.PNG, media_type="image/png"))
    found["transfer"] = Tool(found["transfer"], requires_approval=approval)
    return list(found.values())


class Script:
    """The row's steps as ``FunctionModel`` answers (plain and streamed); keeps what it was sent."""

    def __init__(self, row: tb.Row) -> None:
        ids = itertools.count(1)
        self.steps = [
            [(f"call-{next(ids)}", c.name, c.arguments) for c in step] for step in row.steps
        ]
        self.sent: list[ModelMessage] = []

    def _next(self, messages: list[ModelMessage]) -> list[Any]:
        self.sent.append(messages[-1])
        asked = sum(1 for m in messages if isinstance(m, ModelResponse))
        return self.steps[asked] if asked < len(self.steps) else []

    def __call__(self, messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        calls = self._next(messages)
        if not calls:
            return ModelResponse(parts=[TextPart(sc.FINAL)])
        return ModelResponse(parts=[ToolCallPart(n, a, tool_call_id=i) for i, n, a in calls])

    async def stream(self, messages: list[ModelMessage], info: AgentInfo) -> AsyncIterator[Any]:
        calls = self._next(messages)
        if not calls:
            yield sc.FINAL
            return
        for index, (call_id, name, arguments) in enumerate(calls):
            yield {index: DeltaToolCall(name=name, json_args=None, tool_call_id=call_id)}
            yield {index: DeltaToolCall(json_args=_json(arguments))}

    def received(self) -> tuple[list[hs.Received], tuple[str, ...]]:
        returned = {
            part.tool_call_id: part
            for message in self.sent
            if isinstance(message, ModelRequest)
            for part in message.parts
            if isinstance(part, ToolReturnPart)
        }
        ids = tuple(call_id for step in self.steps for call_id, _, _ in step)
        return [_received(returned[call_id]) for call_id in ids], ids


def _json(arguments: dict[str, Any]) -> str:
    import json

    return json.dumps(arguments)


def _received(part: ToolReturnPart) -> hs.Received:
    content = part.content
    is_error = part.outcome != "success"
    if isinstance(content, BinaryContent):
        image = (content.media_type, base64.b64encode(content.data).decode())
        return hs.Received(None, is_error, (image,))
    assert isinstance(content, str), content
    return hs.Received(content, is_error)


def agent(
    row: tb.Row, ran: list[str], instruments: hs.Instruments
) -> tuple[Agent[Any, Any], Script]:
    script = Script(row)
    engine = Guardrails(guards=sc.guards(), max_result_chars=sc.MAX_RESULT, **instruments.engine())
    guarded = Agent(
        FunctionModel(script, stream_function=script.stream),
        tools=tools(ran, approval=row.id == "approval"),
        output_type=[str, DeferredToolRequests],
        capabilities=[pydantic_ai.capability(engine, tool_options=sc.BIND)],
    )
    return guarded, script


def _approved(output: Any, messages: list[ModelMessage]) -> dict[str, Any]:
    """What the next run is given after a run that ended with ``output`` (every request
    approved), or nothing when it did not stop for approvals."""
    if not isinstance(output, DeferredToolRequests):
        return {}
    approvals = {call.tool_call_id: True for call in output.approvals}
    return {
        "message_history": messages,
        "deferred_tool_results": DeferredToolResults(approvals=approvals),
    }


async def arun(row: tb.Row, stream: bool = False) -> hs.Observed:
    instruments, ran = hs.Instruments(), []
    guarded, script = agent(row, ran, instruments)
    resume: dict[str, Any] = {}
    for _ in range(2):  # the run, and its resumption after approval
        if stream:
            async with guarded.run_stream(
                None if resume else ASK, deps=sc.context(), **resume
            ) as streamed:
                output = await streamed.get_output()
            resume = _approved(output, streamed.all_messages())
        else:
            result = await guarded.run(None if resume else ASK, deps=sc.context(), **resume)
            resume = _approved(result.output, result.all_messages())
        if not resume:
            break
    answers, ids = script.received()
    return instruments.observed(answers, ran, call_ids=ids)


def run(row: tb.Row) -> hs.Observed:
    instruments, ran = hs.Instruments(), []
    guarded, script = agent(row, ran, instruments)
    with fw.default_loop_closed():
        result = guarded.run_sync(ASK, deps=sc.context())
        resume = _approved(result.output, result.all_messages())
        if resume:
            guarded.run_sync(deps=sc.context(), **resume)
    answers, ids = script.received()
    return instruments.observed(answers, ran, call_ids=ids)


@pytest.mark.parametrize("row", tb.ROWS, ids=lambda row: row.id)
def test_pydantic_ai_run_sync_answers_as_the_table_says(row: tb.Row) -> None:
    if not hs.applies(ENTRY, row):
        hs.check_not_applicable(ENTRY, row)
        return
    hs.check(ENTRY, row, run(row))


@pytest.mark.parametrize("row", tb.ROWS, ids=lambda row: row.id)
async def test_pydantic_ai_run_answers_as_the_table_says(row: tb.Row) -> None:
    if not hs.applies(ENTRY, row):
        hs.check_not_applicable(ENTRY, row)
        return
    hs.check(ENTRY, row, await arun(row))


@pytest.mark.parametrize("row", tb.ROWS, ids=lambda row: row.id)
async def test_pydantic_ai_run_stream_answers_as_the_table_says(row: tb.Row) -> None:
    if not hs.applies(ENTRY, row):
        hs.check_not_applicable(ENTRY, row)
        return
    hs.check(ENTRY, row, await arun(row, stream=True))


@pytest.mark.parametrize("stream", [False, True])
async def test_the_approval_row_is_one_turn(stream: bool) -> None:
    """Approval and resumption: one ``pre_turn`` and one ``post_run``, and the call runs once."""
    instruments, ran = hs.Instruments(), []
    guarded, _ = agent(tb.ROW["approval"], ran, instruments)
    resume: dict[str, Any] = {}
    for _ in range(2):
        if stream:
            async with guarded.run_stream(
                None if resume else ASK, deps=sc.context(), **resume
            ) as streamed:
                output = await streamed.get_output()
            messages = streamed.all_messages()
        else:
            result = await guarded.run(None if resume else ASK, deps=sc.context(), **resume)
            output, messages = result.output, result.all_messages()
        if not resume:  # paused: nothing audited for the waiting call, no post_run yet
            assert [r.kind for r in instruments.audit.rows()] == ["pre_turn"]
        resume = _approved(output, messages)
    assert [r.kind for r in instruments.audit.rows()] == ["pre_turn", "tool_call", "post_run"]
    assert ran == ["transfer"]
