"""A call split into its decision and its result: ``Turn.admit`` / ``Ticket.complete``.

The ticket must give what ``turn.call`` gives for the same call (one audit row, the
same result), be used once, and close with its turn.
"""

from __future__ import annotations

import asyncio
import contextvars
import threading
import time
from typing import Any

import pytest

from guardrails import (
    Guardrails,
    Invocation,
    Outcome,
    Reason,
    Stop,
    Ticket,
    TicketClosed,
    Tool,
    ToolResult,
    UsageError,
    Verdict,
    guard,
    tool,
)
from guardrails.audit import AuditLog
from guardrails.effects import Idempotency
from guardrails.errors import LimitExceeded, StopRun
from guardrails.middleware.tool_call import FLAG_LATE_RESULT
from guardrails.store import MemoryStore
from guardrails.testing import FakeClock, MemoryRecorder
from tests._hostile import CALLS, LoudStr, Shifty

RAN: list[Any] = []


@guard(outcome="unavailable")
def no_forbidden(subject: tuple[Invocation, ToolResult]) -> Verdict:
    return Verdict.REJECT if "forbidden" in subject[1].content else Verdict.PASS


@tool(output_guards=[no_forbidden])
def lookup(q: str) -> str:
    """Look a name up."""
    RAN.append(q)
    return f"found {q}"


@tool(effect=True, options={"idempotency_key": "publish-{doc}"})
def publish(doc: str) -> str:
    """Publish a document."""
    RAN.append(doc)
    return f"published {doc}"


@tool(timeout=0.01)
def quick(q: str) -> str:
    """A tool that must answer within 10 ms."""
    return q


@tool(bind={"account_id": "account"})
def balance(account_id: str, currency: str) -> str:
    """The balance of the session's account."""
    return "0"


@guard(outcome="limit")
def not_blocked(call: Invocation) -> Verdict:
    return Verdict.REJECT if call.arguments.get("q") == "blocked" else Verdict.PASS


def rails(**kw: Any) -> tuple[Guardrails, MemoryStore]:
    store = MemoryStore()
    audit = AuditLog(store, clock=FakeClock(), exception_text=True)
    hooks = [audit, Idempotency(store, wait=0), *kw.pop("hooks", ())]
    engine = Guardrails(
        [lookup, publish, quick, balance],
        [not_blocked],
        hooks=hooks,
        recorder=[audit, *kw.pop("recorder", ())],
        **kw,
    )
    return engine, store


def rows(store: MemoryStore) -> list[tuple[Any, ...]]:
    return [
        (r.call_id, r.tool, r.outcome, r.verdict, r.reason, r.exception)
        for r in store.audit_rows()
        if r.kind == "tool_call"
    ]


def timeless(r: ToolResult) -> ToolResult:
    verdicts = tuple(v._replace(duration_ns=0) for v in r.verdicts)
    escapes = tuple(e._replace(exception=type(e.exception)) for e in r.escapes)
    return r._replace(duration_ns=0, exception=None, verdicts=verdicts, escapes=escapes)


def same(a: ToolResult, b: ToolResult) -> None:
    """Two results of the same call, but for the time they and their guards took."""
    assert timeless(a) == timeless(b)
    assert type(a.exception) is type(b.exception)


def test_admitted_ticket_completes_as_turn_call_would() -> None:
    by_call, call_store = rails()
    by_ticket, ticket_store = rails()
    RAN.clear()
    called = by_call.turn().call("lookup", {"q": "ana"}, "c1")
    ticket = by_ticket.turn().admit("lookup", {"q": "ana"}, "c1")
    assert ticket.admitted and ticket.open and ticket.result is None
    assert dict(ticket.arguments or {}) == {"q": "ana"}
    assert (ticket.call_id, ticket.tool) == ("c1", "lookup")
    completed = ticket.complete("found ana")
    assert RAN == ["ana"]  # only turn.call ran the body
    same(called, completed)
    assert ticket.result is completed and not ticket.open
    assert rows(call_store) == rows(ticket_store) == [("c1", "lookup", "ok", "pass", None, None)]


@pytest.mark.parametrize(
    ("name", "arguments", "reason"),
    [
        ("nope", {}, Reason.UNKNOWN_TOOL),
        ("lookup", {}, Reason.MISSING_REQUIRED),
        ("lookup", {"q": "a", "extra": 1}, Reason.UNDECLARED_PARAMETER),
        ("lookup", {"q": "blocked"}, Reason.GUARD),
        ("balance", {"account_id": "x", "currency": "EUR"}, Reason.BOUND_ARGUMENT_SUPPLIED),
        ("balance", {"currency": "EUR"}, Reason.BINDING_UNRESOLVED),
    ],
)
def test_refused_ticket_carries_what_turn_call_returns(
    name: str, arguments: dict[str, Any], reason: Reason
) -> None:
    by_call, call_store = rails()
    by_ticket, ticket_store = rails()
    called = by_call.turn().call(name, arguments, "c1")
    ticket = by_ticket.turn().admit(name, arguments, "c1")
    assert not ticket.admitted and not ticket.open and ticket.arguments is None
    assert ticket.result is not None and ticket.result.reason == reason
    same(called, ticket.result)
    with pytest.raises(TicketClosed):
        ticket.complete("anything")
    assert rows(call_store) == rows(ticket_store) and len(rows(ticket_store)) == 1


def test_a_tool_not_offered_in_the_turn_is_refused_at_admission() -> None:
    engine, store = rails()
    turn = engine.turn(offered=["publish"])
    ticket = turn.admit("lookup", {"q": "a"}, "c1")
    assert not ticket.admitted and ticket.result is not None
    assert (ticket.result.outcome, ticket.result.reason) == (Outcome.UNAVAILABLE, "not_offered")
    assert rows(store) == [("c1", "lookup", "unavailable", "reject", "not_offered", None)]


def test_a_replayed_call_is_decided_at_admission_with_the_first_result() -> None:
    engine, _ = rails()
    turn = engine.turn()
    first = turn.admit("publish", {"doc": "d1"}, "c1")
    first.complete("published d1 at https://example.test/d1")
    replay = turn.admit("publish", {"doc": "d1"}, "c2")
    assert not replay.admitted and replay.result is not None
    assert replay.result.reason == Reason.REPLAYED
    assert replay.result.content == "published d1 at https://example.test/d1"


def test_bound_values_reach_the_ticket_holder_and_not_the_model() -> None:
    engine, _ = rails()
    ticket = engine.turn(values={"account": "acc-7"}).admit("balance", {"currency": "EUR"})
    assert dict(ticket.arguments or {}) == {"account_id": "acc-7", "currency": "EUR"}
    with pytest.raises(TypeError):
        ticket.arguments["currency"] = "USD"  # type: ignore[index]
    assert ticket.complete("12.50").content == "12.50"


def test_a_second_complete_is_a_typed_error_and_never_a_second_row() -> None:
    engine, store = rails()
    turn = engine.turn()
    ticket = turn.admit("lookup", {"q": "ana"}, "c1")
    first = ticket.complete("found ana")
    for settle in (lambda: ticket.complete("again"), lambda: ticket.fail(ValueError())):
        with pytest.raises(TicketClosed) as caught:
            settle()
        assert isinstance(caught.value, UsageError)
    assert ticket.result is first and turn.results == [first]
    assert rows(store) == [("c1", "lookup", "ok", "pass", None, None)]


@pytest.mark.parametrize(
    ("error", "outcome", "reason"),
    [
        (ValueError("secret detail"), Outcome.ERROR, Reason.RAISED),
        (TimeoutError(), Outcome.ERROR, Reason.TIMEOUT),
        (LimitExceeded("cap"), Outcome.LIMIT, Reason.LIMIT),
        (StopRun("stop"), Outcome.UNAVAILABLE, Reason.RAISED),
        (UsageError("the body's misuse"), Outcome.ERROR, Reason.RAISED),
        (KeyboardInterrupt(), Outcome.ERROR, Reason.RAISED),
        ("raised", Outcome.ERROR, Reason.RAISED),
        ("timeout", Outcome.ERROR, Reason.TIMEOUT),
        (Reason.TIMEOUT, Outcome.ERROR, Reason.TIMEOUT),
    ],
)
def test_fail_reads_the_failure_as_turn_call_reads_a_tool_exception(
    error: Any, outcome: Outcome, reason: Reason
) -> None:
    engine, store = rails()
    result = engine.turn().admit("lookup", {"q": "ana"}, "c1").fail(error)
    assert (result.outcome, result.reason) == (outcome, reason)
    assert "secret detail" not in result.content and result.value is None
    assert [r[2:5] for r in rows(store)] == [(outcome.value, "pass", reason.value)]


@pytest.mark.parametrize(
    "error",
    ["limit", "ok", "", LoudStr("raised"), 3, None, Outcome.ERROR],
    ids=["limit", "ok", "empty", "loud-str", "int", "none", "outcome"],
)
def test_fail_with_anything_else_is_a_typed_error_and_leaves_the_ticket_open(error: Any) -> None:
    engine, store = rails()
    ticket = engine.turn().admit("lookup", {"q": "ana"})
    CALLS.clear()
    with pytest.raises(UsageError):
        ticket.fail(error)
    assert not CALLS  # nothing of the object ran
    assert ticket.open and rows(store) == []
    assert ticket.complete("found").outcome == Outcome.OK


class Unprintable(Exception):
    def __str__(self) -> str:
        raise RuntimeError("str")

    def __repr__(self) -> str:
        raise RuntimeError("repr")


def test_fail_with_an_exception_whose_str_raises_still_writes_its_row() -> None:
    engine, store = rails()
    result = engine.turn().admit("lookup", {"q": "ana"}, "c1").fail(Unprintable())
    assert (result.outcome, result.reason) == (Outcome.ERROR, Reason.RAISED)
    assert rows(store) == [("c1", "lookup", "error", "pass", "raised", "Unprintable")]
    assert [r.error for r in store.audit_rows()] == ["<unprintable Unprintable>"]


@pytest.mark.parametrize(
    "output",
    [LoudStr("abc"), {Shifty(): 1}, {"a": LoudStr("x")}, [LoudStr("y")], "forbidden word"],
    ids=["loud-str", "shifty-key", "loud-value", "loud-item", "output-guard"],
)
def test_hostile_outputs_settle_as_the_same_body_would(output: Any) -> None:
    def echo(q: str) -> Any:
        return output

    schema = {"type": "object", "properties": {"q": {"type": "string"}}, "required": ["q"]}
    results, stores = [], []
    for split in (False, True):
        store = MemoryStore()
        audit = AuditLog(store, clock=FakeClock())
        engine = Guardrails(
            [Tool("echo", echo, schema, output_guards=[no_forbidden])],
            hooks=[audit],
            recorder=[audit],
        )
        turn = engine.turn()
        if split:
            results.append(turn.admit("echo", {"q": "a"}, "c1").complete(output))
        else:
            results.append(turn.call("echo", {"q": "a"}, "c1"))
        stores.append(store)
    same(*results)
    assert rows(stores[0]) == rows(stores[1]) and len(rows(stores[1])) == 1


def test_a_body_that_answered_after_the_tool_timeout_is_late() -> None:
    engine, store = rails()
    ticket = engine.turn().admit("quick", {"q": "a"}, "c1")
    time.sleep(0.05)  # past the tool's 10 ms, whatever the clock's resolution
    result = ticket.complete("a")
    assert (result.outcome, result.reason) == (Outcome.ERROR, Reason.TIMEOUT)
    assert FLAG_LATE_RESULT in result.flags and result.value is None
    assert rows(store) == [("c1", "quick", "error", "pass", "timeout", None)]


def test_an_open_ticket_is_audited_as_not_completed_when_its_turn_ends() -> None:
    engine, store = rails()
    turn = engine.turn()
    done = turn.admit("lookup", {"q": "a"}, "c1")
    left = turn.admit("lookup", {"q": "b"}, "c2")
    done.complete("found a")
    ended = turn.end()
    assert [r.call_id for r in ended] == ["c2"] and left.result is ended[0]
    assert (ended[0].outcome, ended[0].reason) == (Outcome.ERROR, Reason.NOT_COMPLETED)
    assert ended[0].content == "The tool failed while running. No details are available; " + (
        "do not retry with the same arguments."
    )
    with pytest.raises(TicketClosed):
        left.complete("found b")
    assert turn.end() == []  # nothing left to end
    assert rows(store) == [
        ("c1", "lookup", "ok", "pass", None, None),
        ("c2", "lookup", "error", "pass", "not_completed", None),
    ]


def test_an_ended_ticket_gives_its_idempotency_claim_back() -> None:
    engine, _ = rails()
    turn = engine.turn()
    turn.admit("publish", {"doc": "d1"})
    turn.end()
    again = engine.turn().admit("publish", {"doc": "d1"})
    assert again.admitted  # not ``in_progress``: the claim was released
    assert again.complete("published").outcome == Outcome.OK


def test_an_open_claim_holds_the_key_until_the_ticket_settles() -> None:
    engine, _ = rails()
    engine.turn().admit("publish", {"doc": "d1"})
    second = engine.turn().admit("publish", {"doc": "d1"})
    assert not second.admitted and second.result is not None
    assert second.result.reason == Reason.IN_PROGRESS


def test_post_run_and_the_with_block_end_the_turn() -> None:
    engine, store = rails()
    turn = engine.turn()
    turn.admit("lookup", {"q": "a"}, "c1")
    turn.post_run("done")
    assert [(r.call_id, r.reason) for r in turn.results] == [("c1", "not_completed")]
    with engine.turn() as other:
        other.admit("lookup", {"q": "b"}, "c2")
    assert [r[0] for r in rows(store)] == ["c1", "c2"]


def test_a_ticket_belongs_to_its_turn() -> None:
    engine, _ = rails()
    mine, other = engine.turn(), engine.turn()
    ticket = mine.admit("lookup", {"q": "a"})
    assert other.end() == [] and ticket.open
    result = ticket.complete("found a")
    assert mine.results == [result] and other.results == []
    assert ticket.turn is mine


def _complete_after(start: threading.Barrier, ticket: Ticket, got: list[Any]) -> None:
    start.wait()
    try:
        got.append(ticket.complete("found a"))
    except TicketClosed as exc:
        got.append(exc)


def test_complete_racing_turn_end_settles_once() -> None:
    engine, store = rails()
    for round in range(200):
        turn = engine.turn()
        ticket = turn.admit("lookup", {"q": "a"}, f"c{round}")
        start = threading.Barrier(2)
        got: list[Any] = []
        worker = threading.Thread(target=_complete_after, args=(start, ticket, got))
        worker.start()
        start.wait()
        if round % 2:
            time.sleep(0.0005)  # let the worker go first now and then (either may win)
        ended = turn.end()
        worker.join()
        assert len(turn.results) == 1 and ticket.result is turn.results[0]
        if isinstance(got[0], TicketClosed):
            assert ended == [ticket.result] and ticket.result.reason == Reason.NOT_COMPLETED
        else:
            assert ended == [] and got[0] is ticket.result and ticket.result.outcome == "ok"
    ids = [r[0] for r in rows(store)]
    assert len(ids) == len(set(ids)) == 200


def test_turn_end_skips_a_ticket_being_completed_on_another_thread() -> None:
    entered, release = threading.Event(), threading.Event()

    class Slow:
        def before(self, inv: Invocation) -> None:
            return None

        def after(self, inv: Invocation, result: ToolResult) -> ToolResult:
            entered.set()
            release.wait(10)
            return result

    engine, store = rails(hooks=[Slow()])
    turn = engine.turn()
    ticket = turn.admit("lookup", {"q": "a"}, "c1")
    worker = threading.Thread(target=ticket.complete, args=("found a",))
    worker.start()
    assert entered.wait(10)
    assert turn.end() == []  # settling elsewhere: not closed a second time
    with pytest.raises(TicketClosed):
        ticket.complete("again")
    release.set()
    worker.join()
    assert ticket.result is not None and ticket.result.outcome == Outcome.OK
    assert rows(store) == [("c1", "lookup", "ok", "pass", None, None)]


def test_each_ticket_carries_its_own_call_state_and_leaves_the_callers_alone() -> None:
    seen: contextvars.ContextVar[str | None] = contextvars.ContextVar("seen", default=None)
    pairs: list[tuple[str, str | None]] = []

    class Stateful:
        def before(self, inv: Invocation) -> None:
            seen.set(inv.call_id)

        def after(self, inv: Invocation, result: ToolResult) -> ToolResult:
            pairs.append((inv.call_id, seen.get()))
            return result

    engine, _ = rails(hooks=[Stateful()])
    turn = engine.turn()
    a = turn.admit("lookup", {"q": "a"}, "a")
    b = turn.admit("lookup", {"q": "b"}, "b")
    assert seen.get() is None  # the caller's context is as it was
    turn.call("lookup", {"q": "c"}, "c")
    b.complete("found b")
    elsewhere = threading.Thread(target=a.complete, args=("found a",))
    elsewhere.start()
    elsewhere.join()
    assert pairs == [("c", "c"), ("b", "b"), ("a", "a")]


def test_async_ticket_matches_the_sync_one() -> None:
    async def main() -> list[ToolResult]:
        engine, _ = rails()
        turn = engine.turn()
        out = []
        ticket = await turn.aadmit("lookup", {"q": "a"}, "c1")
        out.append(await ticket.acomplete("found a"))
        ticket = await turn.aadmit("lookup", {"q": "b"}, "c2")
        out.append(await ticket.afail(ValueError()))
        refused = await turn.aadmit("lookup", {"q": "blocked"}, "c3")
        assert refused.result is not None
        out.append(refused.result)
        with pytest.raises(TicketClosed):
            await ticket.acomplete("again")
        await turn.aadmit("lookup", {"q": "c"}, "c4")
        async with turn:
            pass
        out.append(turn.results[-1])
        return out

    engine, _ = rails()
    turn = engine.turn()
    sync = [turn.admit("lookup", {"q": "a"}, "c1").complete("found a")]
    sync.append(turn.admit("lookup", {"q": "b"}, "c2").fail(ValueError()))
    refused = turn.admit("lookup", {"q": "blocked"}, "c3").result
    assert refused is not None
    sync.append(refused)
    turn.admit("lookup", {"q": "c"}, "c4")
    sync.extend(turn.end())
    for a, b in zip(asyncio.run(main()), sync, strict=True):
        same(a, b)


def test_stop_in_a_hook_before_the_body_is_decided_at_admission() -> None:
    class Closed:
        def before(self, inv: Invocation) -> Stop:
            return Stop(Outcome.UNAVAILABLE, Reason.OUT_OF_ORDER)

        def after(self, inv: Invocation, result: ToolResult) -> ToolResult:
            return result

    engine, store = rails(hooks=[Closed()])
    ticket = engine.turn().admit("lookup", {"q": "a"}, "c1")
    assert not ticket.admitted and ticket.result is not None
    assert ticket.result.reason == Reason.OUT_OF_ORDER
    assert rows(store) == [("c1", "lookup", "unavailable", "pass", "out_of_order", None)]


def test_ticket_is_public_and_says_what_it_is() -> None:
    engine, _ = rails()
    ticket = engine.turn().admit("lookup", {"q": "a"}, "c1")
    assert isinstance(ticket, Ticket)
    assert repr(ticket) == "<Ticket 'c1' 'lookup' open>"
    ticket.complete("x")
    assert repr(ticket) == "<Ticket 'c1' 'lookup' settled>"
    recorder = MemoryRecorder()
    engine = Guardrails([lookup], recorder=recorder)
    engine.turn().admit("lookup", {"q": "a"}).complete("x")
    assert recorder.outcomes == [Outcome.OK]


def test_an_aadmit_cancelled_as_it_returns_leaves_its_ticket_to_the_turn_end() -> None:
    caller: list[asyncio.Task[Any]] = []
    given: list[Invocation] = []

    class CancelsTheCaller:
        async def abefore(self, inv: Invocation) -> None:
            caller[0].cancel()  # the caller goes away as the decision is made
            given.append(inv)

        def before(self, inv: Invocation) -> None:
            return None

        def after(self, inv: Invocation, result: ToolResult) -> ToolResult:
            given.append(inv)
            return result

    async def main() -> list[ToolResult]:
        engine, store = rails(hooks=[CancelsTheCaller()])
        turn = engine.turn()
        caller.append(asyncio.create_task(turn.aadmit("lookup", {"q": "a"}, "c1")))
        with pytest.raises(asyncio.CancelledError):
            await caller[0]
        ended = await turn.aend()
        assert rows(store) == [("c1", "lookup", "error", "pass", "not_completed", None)]
        return ended

    ended = asyncio.run(main())
    assert [(r.call_id, r.reason) for r in ended] == [("c1", "not_completed")]
    assert len(given) == 2  # the hook's after saw the call it let through


def test_a_stop_while_completing_is_recorded_once_and_closes_the_ticket() -> None:
    @guard
    def stops(subject: tuple[Invocation, ToolResult]) -> Verdict:
        raise KeyboardInterrupt  # a stop reaches the caller, as under turn.call

    store = MemoryStore()
    audit = AuditLog(store, clock=FakeClock())
    schema = {"type": "object", "properties": {"q": {"type": "string"}}}
    engine = Guardrails(
        [Tool("echo", lambda q: q, schema, output_guards=[stops])], hooks=[audit], recorder=[audit]
    )
    turn = engine.turn()
    ticket = turn.admit("echo", {"q": "a"}, "c1")
    with pytest.raises(KeyboardInterrupt):
        ticket.complete("a")
    assert not ticket.open and ticket.result is None
    with pytest.raises(TicketClosed):
        ticket.complete("a")
    assert turn.end() == []
    assert [r.reason for r in turn.results] == [Reason.INTERRUPTED]
    assert rows(store) == [("c1", "echo", "unavailable", "reject", "interrupted", None)]


def test_an_acomplete_whose_caller_is_cancelled_still_settles_with_the_answer() -> None:
    class SlowAudit:
        def __init__(self) -> None:
            self.entered = asyncio.Event()
            self.release = asyncio.Event()
            self.seen: list[ToolResult] = []

        def before(self, inv: Invocation) -> None:
            return None

        def after(self, inv: Invocation, result: ToolResult) -> ToolResult:
            raise AssertionError("acomplete awaits aafter")

        async def aafter(self, inv: Invocation, result: ToolResult) -> ToolResult:
            self.entered.set()
            await self.release.wait()
            self.seen.append(result)
            return result

    async def main() -> tuple[Ticket, SlowAudit, list[Any]]:
        slow = SlowAudit()
        engine, store = rails(hooks=[slow])
        turn = engine.turn()
        ticket = await turn.aadmit("lookup", {"q": "a"}, "c1")
        caller = asyncio.create_task(ticket.acomplete("found a"))
        await slow.entered.wait()
        caller.cancel()  # the caller goes away while the hooks settle the call
        with pytest.raises(asyncio.CancelledError):
            await caller
        slow.release.set()
        for _ in range(10_000):  # a few turns of the loop
            if not ticket.open:
                break
            await asyncio.sleep(0)
        return ticket, slow, rows(store)

    ticket, slow, written = asyncio.run(main())
    assert ticket.result is not None and ticket.result.outcome == Outcome.OK
    assert [r.content for r in slow.seen] == ["found a"]
    assert written == [("c1", "lookup", "ok", "pass", None, None)]
