"""A call's state is made only when something writes to it, and every paid call of the
call still lands on its audit row: from the tool's own frame, its tasks or a copied context."""

from __future__ import annotations

import asyncio
import contextvars
import threading
from typing import Any

import pytest

from guardrails import Guardrails, tool
from guardrails import _call_state as _state
from guardrails.audit import AuditLog
from guardrails.effects import PaidCall, Usage
from guardrails.effects.idempotency import Idempotency
from guardrails.store import MemoryStore


class _Counted(_state.CallState):
    made = 0

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        type(self).made += 1
        super().__init__(*args, **kwargs)


@pytest.fixture
def counted(monkeypatch: pytest.MonkeyPatch) -> type[_Counted]:
    _Counted.made = 0
    monkeypatch.setattr(_state, "CallState", _Counted)
    return _Counted


def test_an_audited_call_that_pays_for_nothing_makes_no_state(counted: type[_Counted]) -> None:
    @tool
    def lookup(order_id: str) -> str:
        return order_id

    store = MemoryStore()
    audit = AuditLog(store)
    turn = Guardrails([lookup], hooks=[audit], recorder=[audit]).turn(session="s-1")
    for _ in range(3):
        assert turn.call("lookup", {"order_id": "o-1"}).outcome == "ok"
    assert counted.made == 0
    assert [(r.tokens_in, r.cost) for r in store.audit_rows(kind="tool_call")] == [(None, None)] * 3
    assert _state.current() is None


def test_a_paid_call_in_a_read_only_tool_makes_the_state_and_lands_on_its_row(
    counted: type[_Counted],
) -> None:
    store = MemoryStore()
    paid = PaidCall(store, usage=lambda _: Usage(3, 4, 0.5))

    @tool
    def summarise(text: str) -> str:
        return str(paid(lambda: text))

    audit = AuditLog(store)
    turn = Guardrails([summarise], hooks=[audit], recorder=[audit]).turn(workflow="wf-1")
    first = turn.call("summarise", {"text": "a"})
    (row,) = store.audit_rows(kind="tool_call")
    assert (row.call_id, row.tokens_in, row.tokens_out, row.cost) == (first.call_id, 3, 4, 0.5)
    assert counted.made == 1
    assert _state.current() is None  # the call is over: nothing is charged to it after


async def test_paid_calls_in_tasks_the_tool_starts_all_land_on_its_row() -> None:
    store = MemoryStore()
    paid = PaidCall(store, usage=lambda _: Usage(1, 2, 0.25))

    async def answer() -> str:
        await asyncio.sleep(0)
        return "x"

    @tool
    async def fan_out() -> str:
        # Each task runs in a copy of the context, made before any state exists.
        done = await asyncio.gather(*(paid.acall(answer) for _ in range(4)))
        return "".join(done)

    audit = AuditLog(store)
    turn = Guardrails([fan_out], hooks=[audit], recorder=[audit]).turn(workflow="wf-1")
    result = await turn.acall("fan_out", {})
    assert result.outcome == "ok"
    (row,) = store.audit_rows(kind="tool_call")
    assert (row.tokens_in, row.tokens_out, row.cost) == (4, 8, 1.0)


def test_a_paid_call_in_a_thread_run_in_a_copied_context_lands_on_the_row() -> None:
    store = MemoryStore()
    paid = PaidCall(store, usage=lambda _: Usage(5, 6, 0.75))

    @tool
    def threaded() -> str:
        context = contextvars.copy_context()
        worker = threading.Thread(target=context.run, args=(paid, lambda: None))
        worker.start()
        worker.join()
        return "done"

    audit = AuditLog(store)
    turn = Guardrails([threaded], hooks=[audit], recorder=[audit]).turn(workflow="wf-1")
    assert turn.call("threaded", {}).outcome == "ok"
    (row,) = store.audit_rows(kind="tool_call")
    assert (row.tokens_in, row.cost) == (5, 0.75)


def test_a_hook_that_keeps_details_shares_the_state_with_the_audit_log(
    counted: type[_Counted],
) -> None:
    store = MemoryStore()
    audit = AuditLog(store)
    calls = []

    @tool(effect=True, options={"idempotency_key": "charge:{order_id}"})
    def charge(order_id: str) -> str:
        calls.append(order_id)
        return "charged"

    rails = Guardrails([charge], hooks=[audit, Idempotency(store)], recorder=[audit])
    turn = rails.turn(session="s-1")
    first = turn.call("charge", {"order_id": "o-1"})
    again = turn.call("charge", {"order_id": "o-1"})
    assert (first.outcome, again.outcome, calls) == ("ok", "ok", ["o-1"])
    rows = store.audit_rows(kind="tool_call")
    assert ["charge:o-1" in (r.detail or "") for r in rows] == [True, True]
    assert counted.made == 2  # one per call: the idempotency hook asked for it
    assert _state.current() is None
