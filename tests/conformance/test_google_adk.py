"""Google ADK held to the conformance table.

A real ``LlmAgent`` over a scripted ``BaseLlm`` (``scripted_models.adk_model``:
each step of a row is one model turn of function calls, then a final text),
guarded by ``google_adk.plugin`` on an ``InMemoryRunner``. What the model
received is read from the ``FunctionResponse`` parts of the last request
(``{"result": ...}`` / ``{"error": ...}``; a dict as itself; an image as a
media part). Two drivers share the column: ``runner.run_async`` and the sync
``runner.run``. In the approval row ``transfer`` is a
``FunctionTool(require_confirmation=True)``: the run pauses, and the person's
confirmation resumes it.
"""

from __future__ import annotations

import base64
import itertools
import json
from typing import Any

import pytest

from tests.conformance import harness as hs
from tests.conformance import scenario as sc
from tests.conformance import table as tb
from tests.integrations import _frameworks as fw

fw.need("google.adk")

from google.adk.agents import LlmAgent  # noqa: E402
from google.adk.apps import App  # noqa: E402
from google.adk.runners import InMemoryRunner  # noqa: E402
from google.adk.tools import FunctionTool  # noqa: E402
from google.genai import types  # noqa: E402

from guardrails import Guardrails  # noqa: E402
from guardrails.integrations.google_adk import plugin  # noqa: E402
from guardrails.integrations.scripted_models import adk_model  # noqa: E402

ENTRY = "google_adk"
ASK = "What can I do with my account?"


def tools(ran: list[str], approval: bool) -> list[Any]:
    """The scenario's tools as functions ADK wraps (``transfer`` asks for confirmation in the
    approval row); each body records its run."""
    bodies = sc.functions(ran, lambda: types.Part.from_bytes(data=sc.PNG, mime_type="image/png"))
    return [
        FunctionTool(fn, require_confirmation=approval and name == "transfer")
        for name, fn in bodies.items()
    ]


def steps(row: tb.Row) -> list[list[tuple[str, str, dict[str, Any]]]]:
    counter = itertools.count(1)
    return [[(f"call-{next(counter)}", c.name, c.arguments) for c in step] for step in row.steps]


def _received(response: Any) -> hs.Received:
    """One ``FunctionResponse`` (this format has no error flag: ``{"error": ...}`` is text)."""
    if response.parts:
        images = tuple(
            (p.inline_data.mime_type, base64.b64encode(p.inline_data.data).decode())
            for p in response.parts
        )
        return hs.Received(None, None, images)
    body = response.response
    if set(body) <= {"result"} or set(body) == {"error"}:
        [value] = body.values()
        return hs.Received(value if isinstance(value, str) else json.dumps(value))
    return hs.Received(json.dumps(body))  # a dict result, as itself


def received(llm: Any, ids: list[str]) -> list[hs.Received]:
    responses = {
        p.function_response.id: p.function_response
        for request in llm.requests
        for content in request.contents
        for p in content.parts or ()
        if p.function_response is not None
    }
    return [_received(responses[call_id]) for call_id in ids]


def runner(row: tb.Row, ran: list[str], instruments: hs.Instruments) -> tuple[Any, Any, list[str]]:
    script = steps(row)
    llm = adk_model(*script, sc.FINAL)
    engine = Guardrails(guards=sc.guards(), max_result_chars=sc.MAX_RESULT, **instruments.engine())
    agent = LlmAgent(name="bank", model=llm, tools=tools(ran, row.id == "approval"))
    guard = plugin(agent, engine, tool_options=sc.BIND, context=sc.context())
    made = InMemoryRunner(app=App(name="bank", root_agent=agent, plugins=[guard]))
    return made, llm, [call_id for step in script for call_id, _, _ in step]


def _confirmation(events: Any) -> types.Content | None:
    """The person's approval of every pending confirmation request, or None."""
    asked = [
        c for e in events for c in e.get_function_calls() if c.name == "adk_request_confirmation"
    ]
    answered = {
        p.function_response.id
        for e in events
        for p in (e.content.parts if e.content else None) or ()
        if p.function_response is not None
    }
    parts = [
        types.Part(
            function_response=types.FunctionResponse(
                id=c.id, name=c.name, response={"confirmed": True}
            )
        )
        for c in asked
        if c.id not in answered
    ]
    return types.Content(role="user", parts=parts) if parts else None


async def arun(row: tb.Row) -> hs.Observed:
    instruments, ran = hs.Instruments(), []
    made, llm, ids = runner(row, ran, instruments)
    session = await made.session_service.create_session(app_name="bank", user_id="u")
    message: Any = types.Content(role="user", parts=[types.Part(text=ASK)])
    while message is not None:  # the run, and its resumption after a confirmation
        async for _ in made.run_async(user_id="u", session_id=session.id, new_message=message):
            pass
        got = await made.session_service.get_session(
            app_name="bank", user_id="u", session_id=session.id
        )
        message = _confirmation(got.events)
    return instruments.observed(received(llm, ids), ran, call_ids=tuple(ids))


def run(row: tb.Row) -> hs.Observed:
    instruments, ran = hs.Instruments(), []
    made, llm, ids = runner(row, ran, instruments)
    session = made.session_service.create_session_sync(app_name="bank", user_id="u")
    message: Any = types.Content(role="user", parts=[types.Part(text=ASK)])
    while message is not None:
        for _ in made.run(user_id="u", session_id=session.id, new_message=message):
            pass
        got = made.session_service.get_session_sync(
            app_name="bank", user_id="u", session_id=session.id
        )
        message = _confirmation(got.events)
    return instruments.observed(received(llm, ids), ran, call_ids=tuple(ids))


@pytest.mark.parametrize("row", tb.ROWS, ids=lambda row: row.id)
async def test_google_adk_run_async_answers_as_the_table_says(row: tb.Row) -> None:
    if not hs.applies(ENTRY, row):
        hs.check_not_applicable(ENTRY, row)
        return
    hs.check(ENTRY, row, await arun(row))


@pytest.mark.parametrize("row", tb.ROWS, ids=lambda row: row.id)
def test_google_adk_run_answers_as_the_table_says(row: tb.Row) -> None:
    if not hs.applies(ENTRY, row):
        hs.check_not_applicable(ENTRY, row)
        return
    hs.check(ENTRY, row, run(row))


async def test_the_approval_row_is_one_turn() -> None:
    """Confirmation and resumption: one ``pre_turn``, the call audited and run once."""
    instruments, ran = hs.Instruments(), []
    made, _, _ = runner(tb.ROW["approval"], ran, instruments)
    session = await made.session_service.create_session(app_name="bank", user_id="u")
    message: Any = types.Content(role="user", parts=[types.Part(text=ASK)])
    async for _ in made.run_async(user_id="u", session_id=session.id, new_message=message):
        pass
    assert [r.kind for r in instruments.audit.rows()].count("tool_call") == 0  # waiting
    got = await made.session_service.get_session(
        app_name="bank", user_id="u", session_id=session.id
    )
    confirmation = _confirmation(got.events)
    async for _ in made.run_async(user_id="u", session_id=session.id, new_message=confirmation):
        pass
    kinds = [r.kind for r in instruments.audit.rows()]
    assert kinds.count("pre_turn") == 1 and kinds.count("tool_call") == 1
    assert kinds.count("post_run") == 1 and ran == ["transfer"]
