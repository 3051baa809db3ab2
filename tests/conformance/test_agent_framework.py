"""Microsoft Agent Framework held to the conformance table.

A real ``Agent`` over the scripted chat client of ``scripted_models`` (each
step of a row is one assistant message of function calls, then a final
text), guarded by ``agent_framework.guard_agent``. What the model received is
read from the function results of the requests the client was sent, by call
id. Two drivers share the column: ``agent.run`` and ``agent.run(stream=True)``
(the framework is async only). In the approval row ``transfer`` is declared
``approval_mode="always_require"``: the run stops with its approval request,
and the next run answers it.
"""

from __future__ import annotations

import itertools
from typing import Any

import pytest

from tests.conformance import harness as hs
from tests.conformance import scenario as sc
from tests.conformance import table as tb
from tests.integrations import _frameworks as fw

af = fw.need("agent_framework")

from guardrails import Guardrails  # noqa: E402
from guardrails.integrations.agent_framework import guard_agent  # noqa: E402
from guardrails.integrations.scripted_models import chat_client  # noqa: E402

ENTRY = "agent_framework"
ASK = "What can I do with my account?"


def tools(ran: list[str], approval: bool) -> list[Any]:
    """The scenario's tools as Agent Framework tools; ``chart`` answers a data content; in the
    approval row ``transfer`` always requires approval."""
    found = sc.functions(ran, lambda: af.Content.from_data(data=sc.PNG, media_type="image/png"))
    mode = "always_require" if approval else "never_require"
    return [
        af.tool(fn, approval_mode=mode if name == "transfer" else "never_require")
        for name, fn in found.items()
    ]


def _steps(row: tb.Row) -> list[list[tuple[str, str, dict[str, Any]]]]:
    ids = itertools.count(1)
    return [[(f"call-{next(ids)}", c.name, c.arguments) for c in step] for step in row.steps]


def _received(result: Any) -> hs.Received:
    items = list(result.items or ())
    texts = [i.text for i in items if i.type == "text"]
    images = tuple((i.media_type, i.uri.partition(",")[2]) for i in items if i.type == "data")
    text = "".join(texts) if texts else (None if images else result.result)
    return hs.Received(text, None, images)


def _answers(client: Any, ids: list[str]) -> list[hs.Received]:
    found = {
        c.call_id: c
        for messages, _ in client.requests
        for m in messages
        for c in m.contents
        if c.type == "function_result"
    }
    return [_received(found[call_id]) for call_id in ids]


async def _run(agent: Any, message: Any, session: Any, stream: bool) -> Any:
    if not stream:
        return await agent.run(message, session=session)
    streamed = agent.run(message, session=session, stream=True)
    async for _ in streamed:
        pass
    return await streamed.get_final_response()


async def arun(row: tb.Row, stream: bool = False) -> hs.Observed:
    instruments, ran, steps = hs.Instruments(), [], _steps(row)
    client = chat_client(*steps, sc.FINAL)
    engine = Guardrails(guards=sc.guards(), max_result_chars=sc.MAX_RESULT, **instruments.engine())
    agent = af.Agent(client=client, tools=tools(ran, approval=row.id == "approval"))
    guard_agent(agent, engine, tool_options=sc.BIND, context=sc.context())
    session = agent.create_session()
    response = await _run(agent, ASK, session, stream)
    requests = list(response.user_input_requests or ())
    if requests:  # the approval row: a person approves, and the run goes on
        approved = [r.to_function_approval_response(approved=True) for r in requests]
        await _run(agent, af.Message(role="user", contents=approved), session, stream)
    ids = [call_id for step in steps for call_id, _, _ in step]
    return instruments.observed(_answers(client, ids), ran, call_ids=tuple(ids))


@pytest.mark.parametrize("row", tb.ROWS, ids=lambda row: row.id)
async def test_agent_framework_run_answers_as_the_table_says(row: tb.Row) -> None:
    if not hs.applies(ENTRY, row):
        hs.check_not_applicable(ENTRY, row)
        return
    hs.check(ENTRY, row, await arun(row))


@pytest.mark.parametrize("row", tb.ROWS, ids=lambda row: row.id)
async def test_agent_framework_streamed_run_answers_as_the_table_says(row: tb.Row) -> None:
    if not hs.applies(ENTRY, row):
        hs.check_not_applicable(ENTRY, row)
        return
    hs.check(ENTRY, row, await arun(row, stream=True))


@pytest.mark.parametrize("stream", [False, True])
async def test_the_approval_row_is_one_turn(stream: bool) -> None:
    """Approval and resumption: one ``pre_turn`` in the audit, and the call runs once."""
    kinds = [r.kind for r in await _audited(stream)]
    assert kinds.count("pre_turn") == 1 and kinds.count("tool_call") == 1


async def _audited(stream: bool) -> list[Any]:
    instruments, ran = hs.Instruments(), []
    client = chat_client(*_steps(tb.ROW["approval"]), sc.FINAL)
    engine = Guardrails(guards=sc.guards(), **instruments.engine())
    agent = af.Agent(client=client, tools=tools(ran, approval=True))
    guard_agent(agent, engine, tool_options=sc.BIND, context=sc.context())
    session = agent.create_session()
    paused = await _run(agent, ASK, session, stream)
    assert [r.kind for r in instruments.audit.rows()].count("tool_call") == 0  # waiting
    approved = [r.to_function_approval_response(approved=True) for r in paused.user_input_requests]
    await _run(agent, af.Message(role="user", contents=approved), session, stream)
    assert ran == ["transfer"]
    return list(instruments.audit.rows())
