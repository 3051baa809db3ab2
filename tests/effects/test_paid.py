"""The paid-call choke-point: caps before and after, one audit row per paid call."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import anthropic
import pytest

from guardrails import Guardrails, Outcome, UsageError, tool
from guardrails.audit import AuditLog
from guardrails.effects import CapExceeded, PaidCall, TokenPrices, Usage
from guardrails.integrations.scripted import ScriptedMessagesAPI, text_message
from guardrails.store import AuditRow, MemoryStore, SQLiteStore, Store, StoreUnavailable
from guardrails.testing import FakeClock

DAY = 86_400.0


def flat(cost: float) -> Any:
    return lambda response: Usage(10, 20, cost)


def test_a_call_under_the_cap_returns_and_leaves_a_row_with_tokens_and_cost(store: Store) -> None:
    paid = PaidCall(store, usage=flat(0.25), daily_cap=1.0)
    assert paid(lambda x: x * 2, 21, instance="wf-1") == 42
    (row,) = store.audit_rows(kind="paid_call")
    assert (row.tool, row.outcome, row.workflow) == ("paid_call", "ok", "wf-1")
    assert (row.tokens_in, row.tokens_out, row.cost) == (10, 20, 0.25)
    assert paid.spent_today() == 0.25


def test_the_daily_cap_refuses_before_the_call_runs(store: Store) -> None:
    paid = PaidCall(store, usage=flat(0.4), daily_cap=1.0, estimate=0.4)
    ran: list[int] = []
    paid(ran.append, 1)
    paid(ran.append, 2)
    with pytest.raises(CapExceeded) as refused:
        paid(ran.append, 3)
    assert refused.value.cap == "daily" and not refused.value.retryable
    assert ran == [1, 2]
    assert paid.spent_today() == pytest.approx(0.8)
    assert [r.outcome for r in store.audit_rows(kind="paid_call")] == ["ok", "ok", "limit"]
    refusal = store.audit_rows(kind="paid_call")[-1]
    assert refusal._replace(at=0.0, id=None) == AuditRow(
        "paid_call", 0.0, tool="paid_call", outcome="limit", reason="daily_cap"
    )


def test_crossing_the_instance_cap_raises_after_the_call_and_stops_the_instance(
    store: Store,
) -> None:
    paid = PaidCall(store, usage=flat(0.3), instance_cap=0.5)
    paid(lambda: None, instance="wf-1")
    with pytest.raises(CapExceeded) as crossed:
        paid(lambda: None, instance="wf-1")
    assert crossed.value.cap == "instance"
    ran: list[str] = []
    with pytest.raises(CapExceeded):
        paid(ran.append, "x", instance="wf-1")
    assert ran == []
    paid(ran.append, "other", instance="wf-2")
    assert ran == ["other"]
    assert paid.spent_by("wf-1") == pytest.approx(0.6)


def test_the_daily_budget_starts_again_on_the_next_utc_day() -> None:
    clock = FakeClock(start=10 * DAY)
    paid = PaidCall(MemoryStore(), usage=flat(1.0), daily_cap=1.0, clock=clock)
    paid(lambda: None)
    with pytest.raises(CapExceeded):
        paid(lambda: None)
    clock.advance(DAY)
    paid(lambda: None)
    assert paid.spent_today() == 1.0


def test_a_failing_call_costs_nothing_and_is_recorded_with_its_exception_class() -> None:
    store = MemoryStore()
    paid = PaidCall(store, usage=flat(0.5), daily_cap=1.0, estimate=0.5)

    def fail() -> None:
        raise ConnectionError("upstream said: token=abc")

    with pytest.raises(ConnectionError):
        paid(fail)
    (row,) = store.audit_rows()
    assert (row.outcome, row.exception, row.cost, row.error) == (
        "error",
        "ConnectionError",
        0.0,
        None,
    )
    assert store.budget(paid._daily_key()) == (0, 0)


def test_an_unavailable_store_stops_the_call_before_it_runs(tmp_path: Path) -> None:
    paid = PaidCall(SQLiteStore(tmp_path / "gone" / "x.db"), usage=flat(0.1), daily_cap=1.0)
    ran: list[int] = []
    with pytest.raises(StoreUnavailable):
        paid(ran.append, 1)
    assert ran == []


def test_an_instance_cap_without_an_instance_is_a_usage_error() -> None:
    paid = PaidCall(MemoryStore(), usage=flat(0.1), instance_cap=1.0)
    with pytest.raises(UsageError, match="instance"):
        paid(lambda: None)


async def test_async_calls_and_wrapped_functions_share_the_same_budget() -> None:
    store = MemoryStore()
    paid = PaidCall(store, usage=flat(0.5), daily_cap=1.0)

    async def fetch(n: int) -> int:
        return n

    wrapped = paid.wrap(fetch)
    assert await wrapped(1) == 1
    assert await paid.acall(fetch, 2) == 2
    with pytest.raises(CapExceeded):
        paid.wrap(lambda: None)()
    assert paid.spent_today() == 1.0


def test_token_prices_read_anthropic_and_openai_usage() -> None:
    prices = TokenPrices(input_per_mtok=3.0, output_per_mtok=15.0)
    anthropic_like = {"usage": {"input_tokens": 1_000_000, "output_tokens": 100_000}}
    openai_like = {"usage": {"prompt_tokens": 2_000_000, "completion_tokens": 0}}
    assert prices(anthropic_like) == Usage(1_000_000, 100_000, 4.5)
    assert prices(openai_like).cost == 6.0
    assert prices.most(max_tokens=1_000_000) == 15.0


def test_inside_a_tool_the_model_sees_limit_and_the_tool_row_has_tokens_and_cost() -> None:
    store = MemoryStore()
    paid = PaidCall(store, usage=flat(0.6), instance_cap=1.0)

    @tool(effect=True)
    def summarise(text: str) -> str:
        return str(paid(lambda: text.upper()))

    audit = AuditLog(store)
    rails = Guardrails([summarise], hooks=[audit], recorder=[audit])
    turn = rails.turn(session="s-1", workflow="wf-7", agent="writer")
    first = turn.call("summarise", {"text": "a"})
    second = turn.call("summarise", {"text": "b"})
    third = turn.call("summarise", {"text": "c"})
    assert first.outcome is Outcome.OK and first.content == "A"
    assert [second.outcome, third.outcome] == [Outcome.LIMIT, Outcome.LIMIT]
    assert second.content == "A usage limit was reached. Do not retry this call."
    rows = {r.call_id: r for r in store.audit_rows(kind="tool_call")}
    assert (rows[first.call_id].tokens_in, rows[first.call_id].cost) == (10, 0.6)
    assert rows[second.call_id].exception == "CapExceeded"
    paid_rows = store.audit_rows(kind="paid_call")
    assert {r.workflow for r in paid_rows} == {"wf-7"}
    assert [r.call_id for r in paid_rows][:2] == [first.call_id, second.call_id]
    # Every column of the first paid row, in its place (the row is built positionally).
    assert paid_rows[0]._replace(at=0.0, duration_us=0, id=None) == AuditRow(
        "paid_call", 0.0, first.call_id, None, "s-1", "writer", "wf-7", "paid_call", "ok",
        duration_us=0, tokens_in=10, tokens_out=20, cost=0.6,
    )  # fmt: skip
    assert type(paid_rows[0].duration_us) is int and paid_rows[0].at > 0
    failing = PaidCall(store, usage=flat(0.1), name="flaky")
    with pytest.raises(ZeroDivisionError):
        failing(lambda: 1 / 0)
    last = store.audit_rows(kind="paid_call")[-1]  # made outside any tool call
    assert last._replace(at=0.0, duration_us=0, id=None) == AuditRow(
        "paid_call", 0.0, tool="flaky", outcome="error", duration_us=0,
        tokens_in=0, tokens_out=0, cost=0.0, exception="ZeroDivisionError",
    )  # fmt: skip


def test_around_anthropic_messages_create_against_a_local_api() -> None:
    reply = text_message("Hello!")
    reply["usage"] = {"input_tokens": 1200, "output_tokens": 300}
    store = MemoryStore()
    prices = TokenPrices(input_per_mtok=3.0, output_per_mtok=15.0)
    paid = PaidCall(
        store,
        usage=prices,
        daily_cap=5.0,
        estimate=lambda kw: prices.most(kw["max_tokens"], prompt_tokens=2_000),
    )
    with ScriptedMessagesAPI([reply]) as api:
        client = anthropic.Anthropic(api_key="test-key", base_url=api.base_url, max_retries=0)
        create = paid.wrap(client.messages.create)
        message = create(
            model="scripted",
            max_tokens=500,
            messages=[{"role": "user", "content": "hi"}],
            instance="wf-1",
        )
    assert message.content[0].text == "Hello!"
    (row,) = store.audit_rows(kind="paid_call")
    assert (row.tokens_in, row.tokens_out) == (1200, 300)
    assert row.cost == pytest.approx((1200 * 3 + 300 * 15) / 1e6)


def test_without_an_estimate_the_call_that_crosses_the_daily_cap_raises_after_running() -> None:
    paid = PaidCall(MemoryStore(), usage=flat(0.6), daily_cap=1.0)
    ran: list[int] = []
    paid(ran.append, 1)
    with pytest.raises(CapExceeded) as crossed:
        paid(ran.append, 2)
    assert crossed.value.cap == "daily" and ran == [1, 2]
    with pytest.raises(CapExceeded):
        paid(ran.append, 3)
    assert ran == [1, 2]


def test_a_paid_call_after_a_tool_call_is_not_charged_to_that_call() -> None:
    store = MemoryStore()
    paid = PaidCall(store, usage=flat(0.1), instance_cap=1.0)

    @tool
    def noop() -> str:
        return "x"

    audit = AuditLog(store)
    rails = Guardrails([noop], hooks=[audit], recorder=[audit])
    rails.turn(session="s-1", workflow="wf-1").call("noop", {})
    with pytest.raises(UsageError):
        paid(lambda: None)
    paid(lambda: None, instance="wf-2")
    (row,) = store.audit_rows(kind="paid_call")
    assert (row.call_id, row.workflow) == (None, "wf-2")
