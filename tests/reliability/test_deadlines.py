"""Deadlines hold whatever a guard, tool or provider does, and what BaseException means.

No timed assertion: each faulty callable takes far longer than its deadline
(or never finishes until the test lets it), and the tests check outcomes,
escapes and whether the callable had finished when the call returned.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from typing import Any

import pytest

from guardrails import (
    EscapeReason,
    Guardrails,
    Invocation,
    Outcome,
    Reason,
    Secret,
    Stop,
    Tool,
    ToolResult,
    TurnContext,
    Verdict,
    guard,
    tool,
)
from guardrails.testing import MemoryRecorder

from .conftest import SECRET_MARK

SCHEMA = {"type": "object", "properties": {"q": {"type": "string"}}}
DECLARED = ("q",)


class Runs:
    def __init__(self) -> None:
        self.count = 0

    def __call__(self, **kwargs: Any) -> str:
        self.count += 1
        return "ran"


async def call(rails: Guardrails, driver: str, **kw: Any) -> ToolResult:
    if driver == "sync":
        return await asyncio.to_thread(rails.call, "t", {"q": "x"}, **kw)
    return await rails.acall("t", {"q": "x"}, **kw)


DRIVERS = pytest.mark.parametrize("driver", ["sync", "async"])


# -- guards ---------------------------------------------------------------------------


@DRIVERS
@pytest.mark.parametrize("fail_closed", [True, False])
async def test_an_async_guard_that_blocks_the_loop_past_its_deadline_is_a_timeout(
    driver: str, fail_closed: bool, ledger: Any
) -> None:
    @guard(timeout=0.05, fail_closed=fail_closed)
    async def blocks(call: Invocation) -> Verdict:
        time.sleep(0.3)
        return Verdict.PASS

    runs = Runs()
    result = await call(Guardrails([Tool("t", runs, SCHEMA)], [blocks]), driver)
    assert ledger.check("deadlines", result, DECLARED) == []
    assert [(e.guard, e.reason) for e in result.escapes] == [("blocks", EscapeReason.TIMEOUT)]
    if fail_closed:
        assert (result.outcome, result.verdict, runs.count) == (Outcome.UNAVAILABLE, "reject", 0)
    else:
        assert (result.outcome, result.verdict, runs.count) == (Outcome.OK, "not_evaluated", 1)
    ledger.add("deadlines", faults_injected=1, faults_counted=1)


@DRIVERS
async def test_a_guard_that_swallows_cancellation_is_a_timeout_and_the_caller_is_released(
    driver: str, ledger: Any
) -> None:
    state = {"cancelled": 0, "finished": False}

    @guard(timeout=0.05, fail_closed=True)
    async def stubborn(call: Invocation) -> Verdict:
        try:
            await asyncio.sleep(3600)
        except asyncio.CancelledError:
            state["cancelled"] += 1
        await asyncio.sleep(0.2 if driver == "sync" else 0)  # answers anyway, later
        state["finished"] = True
        return Verdict.PASS

    runs = Runs()
    result = await call(Guardrails([Tool("t", runs, SCHEMA)], [stubborn]), driver)
    # The call came back while the guard was still running.
    assert state["finished"] is False
    for _ in range(5):  # the async driver cancelled the guard's task and left it to run
        await asyncio.sleep(0)
    assert state["cancelled"] == 1
    assert (result.outcome, runs.count) == (Outcome.UNAVAILABLE, 0)
    assert [e.reason for e in result.escapes] == [EscapeReason.TIMEOUT]
    assert ledger.check("deadlines", result, DECLARED) == []
    ledger.add("deadlines", faults_injected=1, faults_counted=1)


@DRIVERS
async def test_a_sync_guard_that_hangs_past_its_deadline_is_a_timeout(
    driver: str, release: Any
) -> None:
    @guard(timeout=0.05, fail_closed=True)
    def hangs(call: Invocation) -> Verdict:
        release.wait(30)
        return Verdict.PASS

    runs = Runs()
    result = await call(Guardrails([Tool("t", runs, SCHEMA)], [hangs]), driver)
    assert (result.outcome, runs.count) == (Outcome.UNAVAILABLE, 0)
    assert [e.reason for e in result.escapes] == [EscapeReason.TIMEOUT]


@DRIVERS
async def test_a_guard_within_its_deadline_decides(driver: str) -> None:
    @guard(timeout=60, fail_closed=True)
    async def quick(call: Invocation) -> Verdict:
        await asyncio.sleep(0)
        return Verdict.PASS

    runs = Runs()
    result = await call(Guardrails([Tool("t", runs, SCHEMA)], [quick]), driver)
    assert (result.outcome, result.verdict, result.escapes, runs.count) == (
        Outcome.OK,
        "pass",
        (),
        1,
    )


class Custom(BaseException):
    pass


@DRIVERS
@pytest.mark.parametrize(
    "exc", [Custom, GeneratorExit, asyncio.CancelledError], ids=["custom", "exit", "cancel"]
)
async def test_a_base_exception_a_guard_raises_of_its_own_is_a_counted_failure(
    driver: str, exc: type[BaseException], ledger: Any
) -> None:
    @guard(fail_closed=True)
    async def odd(call: Invocation) -> Verdict:
        raise exc(SECRET_MARK)

    runs = Runs()
    result = await call(Guardrails([Tool("t", runs, SCHEMA)], [odd]), driver)
    assert (result.outcome, runs.count) == (Outcome.UNAVAILABLE, 0)
    assert [e.reason for e in result.escapes] == [EscapeReason.RAISED]
    assert ledger.check("deadlines", result, DECLARED) == []
    ledger.add("deadlines", faults_injected=1, faults_counted=1)


@pytest.mark.parametrize("exc", [KeyboardInterrupt, SystemExit])
@pytest.mark.parametrize("where", ["guard", "tool"])
def test_keyboard_interrupt_and_system_exit_propagate_and_the_tool_never_runs_after(
    exc: type[BaseException], where: str
) -> None:
    runs = Runs()

    def stop(call: Invocation) -> Verdict:
        raise exc()

    def stopping_tool(**kwargs: Any) -> str:
        raise exc()

    hook = Seen()
    memory = MemoryRecorder()
    fn, guards = (runs, [stop]) if where == "guard" else (stopping_tool, [])
    rails = Guardrails([Tool("t", fn, SCHEMA)], guards, hooks=[hook], recorder=memory)
    turn = rails.turn()
    with pytest.raises(exc):
        turn.call("t", {"q": "x"})
    assert runs.count == 0
    # The call is on the record all the same, with reason interrupted.
    assert [(r.outcome, r.reason) for r in turn.results] == [
        (Outcome.UNAVAILABLE, Reason.INTERRUPTED)
    ]
    assert len(memory.results) == 1
    assert hook.after_seen == ([Reason.INTERRUPTED] if where == "tool" else [])


class Seen:
    """A hook that records what its ``after`` saw."""

    def __init__(self) -> None:
        self.after_seen: list[Any] = []

    def before(self, invocation: Invocation, /) -> Stop | None:
        return None

    def after(self, invocation: Invocation, result: ToolResult, /) -> ToolResult:
        self.after_seen.append(result.reason)
        return result


async def test_the_callers_cancellation_during_a_guard_propagates_and_the_tool_never_runs() -> None:
    entered = asyncio.Event()

    @guard
    async def slow(call: Invocation) -> Verdict:
        entered.set()
        await asyncio.sleep(3600)
        return Verdict.PASS  # pragma: no cover

    runs = Runs()
    turn = Guardrails([Tool("t", runs, SCHEMA)], [slow]).turn()
    task = asyncio.ensure_future(turn.acall("t", {"q": "x"}))
    await entered.wait()
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert runs.count == 0
    assert [r.reason for r in turn.results] == [Reason.INTERRUPTED]


@pytest.mark.parametrize("timeout", [None, 60])
async def test_a_guard_that_swallows_the_callers_cancellation_cannot_let_the_tool_run(
    timeout: float | None,
) -> None:
    entered = asyncio.Event()

    @guard(timeout=timeout)
    async def swallow(call: Invocation) -> Verdict:
        entered.set()
        with contextlib.suppress(asyncio.CancelledError):
            await asyncio.sleep(3600)
        return Verdict.PASS

    runs = Runs()
    turn = Guardrails([Tool("t", runs, SCHEMA)], [swallow]).turn()
    task = asyncio.ensure_future(turn.acall("t", {"q": "x"}))
    await entered.wait()
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert runs.count == 0


# -- tools ------------------------------------------------------------------------------


@DRIVERS
async def test_an_async_tool_that_blocks_past_its_timeout_is_not_ok_and_the_row_says_late(
    driver: str, ledger: Any
) -> None:
    @tool(timeout=0.05)
    async def t(q: str) -> str:
        time.sleep(0.3)
        return SECRET_MARK

    result = await call(Guardrails([t]), driver)
    assert (result.outcome, result.reason) == (Outcome.ERROR, Reason.TIMEOUT)
    assert "late_result" in result.flags and result.value is None
    assert ledger.check("deadlines", result, DECLARED) == []
    ledger.add("deadlines", faults_injected=1, faults_counted=1)


@DRIVERS
async def test_a_tool_that_swallows_cancellation_times_out_and_the_caller_is_released(
    driver: str,
) -> None:
    state = {"finished": False}

    @tool(timeout=0.05)
    async def t(q: str) -> str:
        with contextlib.suppress(asyncio.CancelledError):
            await asyncio.sleep(3600)
        await asyncio.sleep(0.2 if driver == "sync" else 0)
        state["finished"] = True
        return SECRET_MARK

    result = await call(Guardrails([t]), driver)
    assert state == {"finished": False}
    assert (result.outcome, result.reason) == (Outcome.ERROR, Reason.TIMEOUT)
    assert "late_result" not in result.flags  # it never answered in time, nor at all yet


@DRIVERS
async def test_a_base_exception_a_tool_raises_of_its_own_is_an_error(driver: str) -> None:
    @tool
    async def t(q: str) -> str:
        raise Custom(SECRET_MARK)

    result = await call(Guardrails([t]), driver)
    assert (result.outcome, result.reason) == (Outcome.ERROR, Reason.RAISED)
    assert SECRET_MARK not in result.content


# -- binding and secret providers ---------------------------------------------------------


def _sleepy(seconds: float) -> Any:
    def provider(_: Any) -> str:
        time.sleep(seconds)
        return "value"

    return provider


def _raising(_: Any) -> str:
    raise RuntimeError(SECRET_MARK)


@DRIVERS
@pytest.mark.parametrize(
    ("kind", "why"),
    [
        ("binding_hangs", EscapeReason.TIMEOUT),
        ("binding_raises", EscapeReason.RAISED),
        ("binding_missing", EscapeReason.NOT_CONFIGURED),
        ("secret_hangs", EscapeReason.TIMEOUT),
        ("secret_raises", EscapeReason.RAISED),
    ],
)
async def test_a_provider_that_hangs_or_fails_makes_the_call_unavailable_with_an_escape(
    driver: str, kind: str, why: EscapeReason, ledger: Any
) -> None:
    runs = Runs()
    schema = {"type": "object", "properties": {"q": {"type": "string"}, "k": {}}}
    source: Any = {
        "binding_hangs": _sleepy(0.5),
        "binding_raises": _raising,
        "binding_missing": lambda ctx: None,
        "secret_hangs": Secret("api"),
        "secret_raises": Secret("api"),
    }[kind]
    provider = _sleepy(0.5) if kind == "secret_hangs" else _raising
    rails = Guardrails(
        [Tool("t", runs, schema, bind={"k": source}, effect=True)],
        secrets=provider,
        provider_timeout=0.05,
    )
    result = await call(rails, driver)
    assert (result.outcome, result.reason) == (Outcome.UNAVAILABLE, Reason.BINDING_UNRESOLVED)
    assert [(e.guard, e.reason) for e in result.escapes] == [("binding", why)]
    assert runs.count == 0
    assert ledger.check("deadlines", result, DECLARED) == []
    ledger.add("deadlines", faults_injected=1, faults_counted=1)


@DRIVERS
async def test_providers_within_the_deadline_bind_their_values(driver: str) -> None:
    received: list[dict[str, Any]] = []

    def impl(**kwargs: Any) -> str:
        received.append(kwargs)
        return "ran"

    schema = {"type": "object", "properties": {"q": {"type": "string"}, "k": {}, "s": {}}}
    rails = Guardrails(
        [
            Tool(
                "t",
                impl,
                schema,
                bind={"k": lambda ctx: ctx.tenant, "s": Secret("api")},
                effect=True,
            )
        ],
        secrets=lambda name: f"secret-{name}",
        provider_timeout=60,
    )
    result = await call(rails, driver, context=TurnContext(tenant="acme"))
    assert result.outcome is Outcome.OK
    assert received == [{"q": "x", "k": "acme", "s": "secret-api"}]


async def test_the_callers_cancellation_during_the_tool_is_recorded_and_hooks_see_it() -> None:
    entered = asyncio.Event()

    @tool
    async def t(q: str) -> str:
        entered.set()
        await asyncio.sleep(3600)
        return "never"  # pragma: no cover

    hook = Seen()
    memory = MemoryRecorder()
    turn = Guardrails([t], hooks=[hook], recorder=memory).turn()
    task = asyncio.ensure_future(turn.acall("t", {"q": "x"}))
    await entered.wait()
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert hook.after_seen == [Reason.INTERRUPTED]
    assert [r.reason for r in memory.results] == [Reason.INTERRUPTED]


@pytest.mark.parametrize("where", ["hook_before", "output_guard"])
def test_a_stop_in_a_hook_or_an_output_guard_still_reaches_the_hooks_after(where: str) -> None:
    class Stopping(Seen):
        def before(self, invocation: Invocation, /) -> Stop | None:
            if where == "hook_before":
                raise KeyboardInterrupt
            return None

    def stop(subject: Any) -> Verdict:
        raise KeyboardInterrupt

    runs = Runs()
    hook = Stopping()
    output_guards = [stop] if where == "output_guard" else []
    spec = Tool("t", runs, SCHEMA, output_guards=output_guards)
    turn = Guardrails([spec], hooks=[hook]).turn()
    with pytest.raises(KeyboardInterrupt):
        turn.call("t", {"q": "x"})
    assert hook.after_seen == [Reason.INTERRUPTED]
    assert runs.count == (1 if where == "output_guard" else 0)


@DRIVERS
async def test_the_audit_row_of_a_late_tool_says_it_ran_late(driver: str) -> None:
    from guardrails.audit import AuditLog
    from guardrails.store import MemoryStore

    @tool(timeout=0.05, effect=True)
    async def t(q: str) -> str:
        time.sleep(0.3)
        return "done"

    audit = AuditLog(MemoryStore())
    result = await call(Guardrails([t], hooks=[audit]), driver)
    assert (result.outcome, result.reason) == (Outcome.ERROR, Reason.TIMEOUT)
    rows = [r for r in audit.rows() if r.kind == "tool_call"]
    assert len(rows) == 1 and rows[0].reason == "timeout"
    assert "late_result" in (rows[0].detail or "")
