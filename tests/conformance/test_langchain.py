"""LangChain v1 (``create_agent``) held to the conformance table.

A real agent over ``langchain.scripted_model`` (each step of a row is one
``AIMessage`` of tool calls, then a final text), guarded by
``langchain.middleware``. What the model received is read from the
``ToolMessage``s of the last request (``status="error"`` is the error flag;
content blocks carry an image). Three drivers share the column: ``invoke``,
``ainvoke`` and ``astream``. In the approval row LangChain's own
``HumanInTheLoopMiddleware`` interrupts before ``transfer`` runs, and the run
is resumed with an approval (``Command(resume=...)``) on the same thread.
"""

from __future__ import annotations

import itertools
from typing import Any

import pytest

from tests.conformance import harness as hs
from tests.conformance import scenario as sc
from tests.conformance import table as tb
from tests.integrations import _frameworks as fw

fw.need("langchain")

from langchain.agents import create_agent  # noqa: E402
from langchain.agents.middleware import HumanInTheLoopMiddleware  # noqa: E402
from langchain_core.messages import AIMessage, ToolMessage  # noqa: E402
from langchain_core.tools import StructuredTool  # noqa: E402
from langgraph.checkpoint.memory import InMemorySaver  # noqa: E402
from langgraph.types import Command  # noqa: E402

from guardrails import Guardrails  # noqa: E402
from guardrails.integrations import langchain  # noqa: E402

ENTRY = "langchain"
ASK = {"messages": [{"role": "user", "content": "What can I do with my account?"}]}
APPROVE = Command(resume={"decisions": [{"type": "approve"}]})  # the HITL middleware's
ADAPTER_APPROVE = Command(resume="approve")  # the guarded tool's own pause


def _resume(row: tb.Row) -> Any:
    return APPROVE if row.id == "approval" else ADAPTER_APPROVE


def tools(ran: list[str]) -> list[StructuredTool]:
    """The scenario's tools as LangChain tools (``chart`` answers an image block); each body
    records its run."""
    image = [{"type": "image", "base64": sc.PNG_B64, "mime_type": "image/png"}]
    return [StructuredTool.from_function(fn) for fn in sc.functions(ran, lambda: image).values()]


def _received(message: ToolMessage) -> hs.Received:
    is_error = message.status == "error"
    content = message.content
    if isinstance(content, str):
        return hs.Received(content, is_error)
    images = tuple(
        (block["mime_type"], block["base64"])
        for block in content
        if isinstance(block, dict) and block.get("type") == "image"
    )
    return hs.Received(None, is_error, images)


def agent(row: tb.Row, ran: list[str], instruments: hs.Instruments) -> tuple[Any, Any, list[str]]:
    counter = itertools.count(1)
    steps = [[(f"call-{next(counter)}", c.name, c.arguments) for c in step] for step in row.steps]
    replies = [
        AIMessage(content="", tool_calls=[{"name": n, "args": a, "id": i} for i, n, a in step])
        for step in steps
    ]
    chat = langchain.scripted_model(*replies, AIMessage(content=sc.FINAL))
    engine = Guardrails(guards=sc.guards(), max_result_chars=sc.MAX_RESULT, **instruments.engine())
    middleware: list[Any] = [
        langchain.middleware(engine, tool_options=sc.BIND, context=lambda runtime: sc.context())
    ]
    if row.id == "approval":
        middleware.append(HumanInTheLoopMiddleware(interrupt_on={"transfer": True}))
    made = create_agent(chat, tools(ran), middleware=middleware, checkpointer=InMemorySaver())
    return made, chat, [call_id for step in steps for call_id, _, _ in step]


def received(chat: Any, ids: list[str]) -> list[hs.Received]:
    sent = {m.tool_call_id: m for m in chat.sent[-1] if isinstance(m, ToolMessage)}
    return [_received(sent[call_id]) for call_id in ids]


def _config(row: tb.Row) -> Any:
    return {"configurable": {"thread_id": f"th-{row.id}"}}


def run(row: tb.Row) -> hs.Observed:
    instruments, ran = hs.Instruments(), []
    made, chat, ids = agent(row, ran, instruments)
    given: Any = ASK
    while given is not None:  # the run, and its resumption after an approval
        out = made.invoke(given, _config(row))
        given = _resume(row) if out.get("__interrupt__") else None
    return instruments.observed(received(chat, ids), ran, call_ids=tuple(ids))


async def arun(row: tb.Row, stream: bool = False) -> hs.Observed:
    instruments, ran = hs.Instruments(), []
    made, chat, ids = agent(row, ran, instruments)
    given: Any = ASK
    while given is not None:
        if stream:
            interrupted = False
            async for chunk in made.astream(given, _config(row), stream_mode="updates"):
                interrupted = interrupted or "__interrupt__" in chunk
        else:
            interrupted = bool((await made.ainvoke(given, _config(row))).get("__interrupt__"))
        given = _resume(row) if interrupted else None
    return instruments.observed(received(chat, ids), ran, call_ids=tuple(ids))


@pytest.mark.parametrize("row", tb.ROWS, ids=lambda row: row.id)
def test_langchain_invoke_answers_as_the_table_says(row: tb.Row) -> None:
    if not hs.applies(ENTRY, row):
        hs.check_not_applicable(ENTRY, row)
        return
    hs.check(ENTRY, row, run(row))


@pytest.mark.parametrize("row", tb.ROWS, ids=lambda row: row.id)
async def test_langchain_ainvoke_answers_as_the_table_says(row: tb.Row) -> None:
    if not hs.applies(ENTRY, row):
        hs.check_not_applicable(ENTRY, row)
        return
    hs.check(ENTRY, row, await arun(row))


@pytest.mark.parametrize("row", tb.ROWS, ids=lambda row: row.id)
async def test_langchain_astream_answers_as_the_table_says(row: tb.Row) -> None:
    if not hs.applies(ENTRY, row):
        hs.check_not_applicable(ENTRY, row)
        return
    hs.check(ENTRY, row, await arun(row, stream=True))


def test_the_approval_row_is_one_turn() -> None:
    """Approval and resumption: one ``pre_turn`` in the audit, the call run once."""
    instruments, ran = hs.Instruments(), []
    made, _, _ = agent(tb.ROW["approval"], ran, instruments)
    config = _config(tb.ROW["approval"])
    made.invoke(ASK, config)
    assert [r.kind for r in instruments.audit.rows()].count("tool_call") == 0  # waiting
    made.invoke(APPROVE, config)
    kinds = [r.kind for r in instruments.audit.rows()]
    assert kinds.count("pre_turn") == 1 and kinds.count("tool_call") == 1
    assert kinds.count("post_run") == 1 and ran == ["transfer"]
