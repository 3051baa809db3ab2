"""Fault injection at the tool_call choke-point.

Guards that raise, hang past their timeout, return something that is not a
verdict, or lack configuration; tools that raise, hang or return values that
cannot be serialised; recorders that raise. For every fault: the documented
outcome, the escape (or failure reason) recorded, nothing raised to the
caller, and the model shown only a fixed sentence.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Callable
from typing import Any

import pytest

from guardrails import (
    ChokePoint,
    EscapeReason,
    Guardrails,
    GuardResult,
    LimitExceeded,
    NotConfigured,
    Outcome,
    Reason,
    Secret,
    StopRun,
    Tool,
    ToolResult,
    Verdict,
    guard,
)
from guardrails.testing import MemoryRecorder

# The same mark the ledger looks for (tests/reliability/conftest.py).
SECRET_MARK = "sk-live-7f3a9c"
# Generous: the machine running the suite is shared. A hanging body gives up
# on its own a little after the timeout, so that asyncio.run (which waits for
# its worker threads) does not wait long.
TIMEOUT = 0.3
HANG = 1.0
# A guard that does not hang gets a deadline it cannot miss on a loaded
# machine: an answer after the deadline is a timeout, whatever it says.
SETTLED = 30.0
SCHEMA = {
    "type": "object",
    "properties": {"q": {"type": "string"}},
    "required": ["q"],
    "additionalProperties": False,
}
DECLARED = ("q",)
OUTPUT_MARK = "tool-output-c41e"


def call(rails: Guardrails, driver: str, args: Any, name: str = "lookup") -> ToolResult:
    if driver == "sync":
        return rails.call(name, args)
    return asyncio.run(rails.acall(name, args))


class Counting:
    """A tool implementation that counts its runs."""

    def __init__(self) -> None:
        self.runs = 0

    def __call__(self, q: str) -> str:
        self.runs += 1
        return f"{OUTPUT_MARK}:{q}"


class Unprintable(Exception):
    """An exception whose text cannot even be computed."""

    def __str__(self) -> str:
        raise RuntimeError(SECRET_MARK)

    def __repr__(self) -> str:
        raise RuntimeError(SECRET_MARK)


# -- guard faults -------------------------------------------------------------

# name -> (body, escape reason). A body gets the release event and returns
# what the guard returns (or raises, or blocks).
GuardBody = Callable[[threading.Event], Any]


def _raise(exc: BaseException) -> GuardBody:
    def body(_: threading.Event) -> Any:
        raise exc

    return body


def _hang(release: threading.Event) -> Any:
    release.wait(HANG)
    return Verdict.PASS


def _recurse(_: threading.Event) -> Any:
    def down(n: int) -> int:
        return down(n + 1) + 1

    return down(0)


GUARD_FAULTS: dict[str, tuple[GuardBody, EscapeReason]] = {
    "raises": (_raise(RuntimeError(f"db password={SECRET_MARK}")), EscapeReason.RAISED),
    "raises_unprintable": (_raise(Unprintable()), EscapeReason.RAISED),
    "raises_huge_message": (_raise(ValueError(SECRET_MARK * 500_000)), EscapeReason.RAISED),
    "recurses_forever": (_recurse, EscapeReason.RAISED),
    "raises_not_configured": (
        _raise(NotConfigured(f"no policy for tenant {SECRET_MARK}")),
        EscapeReason.NOT_CONFIGURED,
    ),
    "raises_timeout_error": (_raise(TimeoutError(SECRET_MARK)), EscapeReason.TIMEOUT),
    "hangs": (_hang, EscapeReason.TIMEOUT),
    "returns_bool": (lambda _: True, EscapeReason.INVALID_RETURN),
    "returns_none": (lambda _: None, EscapeReason.INVALID_RETURN),
    "returns_string": (lambda _: "pass", EscapeReason.INVALID_RETURN),
    "returns_int": (lambda _: 1, EscapeReason.INVALID_RETURN),
    "returns_result_with_string_verdict": (
        lambda _: GuardResult("pass"),  # type: ignore[arg-type]
        EscapeReason.INVALID_RETURN,
    ),
    "returns_result_with_bool_verdict": (
        lambda _: GuardResult(True),  # type: ignore[arg-type]
        EscapeReason.INVALID_RETURN,
    ),
    "declines": (lambda _: Verdict.NOT_EVALUATED, EscapeReason.DECLINED),
    "declines_with_reason": (
        lambda _: GuardResult.not_evaluated("no_data", evidence=SECRET_MARK),
        EscapeReason.DECLINED,
    ),
}


def make_guard(
    body: GuardBody, release: threading.Event, *, is_async: bool, fail_closed: bool, name: str
) -> Any:
    if is_async:

        async def check(_: Any) -> Any:
            if body is _hang:
                await asyncio.sleep(HANG)
            return body(release)

        fn: Callable[[Any], Any] = check
    else:

        def check_sync(_: Any) -> Any:
            return body(release)

        fn = check_sync
    timeout = TIMEOUT if body is _hang else SETTLED
    return guard(fn, name=name, fail_closed=fail_closed, timeout=timeout)


@pytest.mark.parametrize("driver", ["sync", "async"])
@pytest.mark.parametrize("is_async", [False, True], ids=["sync_guard", "async_guard"])
@pytest.mark.parametrize("fault", sorted(GUARD_FAULTS))
def test_failing_guard_fails_open_with_the_escape_recorded(
    fault: str, is_async: bool, driver: str, release: threading.Event, ledger: Any
) -> None:
    body, reason = GUARD_FAULTS[fault]
    impl = Counting()
    recorder = MemoryRecorder()
    g = make_guard(body, release, is_async=is_async, fail_closed=False, name=f"g_{fault}")
    rails = Guardrails([Tool("lookup", impl, SCHEMA)], [g], recorder=recorder)

    result = call(rails, driver, {"q": "x"})

    counted = [(e.guard, e.reason) for e in result.escapes] == [(g.name, reason)]
    ledger.add("guard_faults", faults_injected=1, faults_counted=int(counted))
    assert ledger.check("guard_faults", result, DECLARED) == []
    assert result.outcome is Outcome.OK
    assert impl.runs == 1
    assert result.verdict is Verdict.NOT_EVALUATED
    assert [(e.guard, e.choke_point, e.reason) for e in result.escapes] == [
        (g.name, ChokePoint.TOOL_CALL, reason)
    ]
    assert recorder.escapes == list(result.escapes)


@pytest.mark.parametrize("driver", ["sync", "async"])
@pytest.mark.parametrize("is_async", [False, True], ids=["sync_guard", "async_guard"])
@pytest.mark.parametrize("fault", sorted(GUARD_FAULTS))
def test_failing_fail_closed_guard_refuses_with_the_escape_recorded(
    fault: str, is_async: bool, driver: str, release: threading.Event, ledger: Any
) -> None:
    body, reason = GUARD_FAULTS[fault]
    impl = Counting()
    recorder = MemoryRecorder()
    g = make_guard(body, release, is_async=is_async, fail_closed=True, name=f"g_{fault}")
    rails = Guardrails([Tool("lookup", impl, SCHEMA)], [g], recorder=recorder)

    result = call(rails, driver, {"q": "x"})

    counted = [(e.guard, e.reason) for e in result.escapes] == [(g.name, reason)]
    ledger.add("guard_faults", faults_injected=1, faults_counted=int(counted))
    assert ledger.check("guard_faults", result, DECLARED) == []
    assert result.outcome is Outcome.UNAVAILABLE
    assert result.reason == Reason.GUARD
    assert impl.runs == 0
    assert result.verdict is Verdict.REJECT
    assert [(e.guard, e.reason) for e in result.escapes] == [(g.name, reason)]
    assert recorder.escapes == list(result.escapes)


@pytest.mark.parametrize("driver", ["sync", "async"])
def test_raised_guard_exception_is_kept_for_the_audit_trail_only(driver: str, ledger: Any) -> None:
    boom = RuntimeError(f"connection string postgres://admin:{SECRET_MARK}@db")

    @guard
    def fraud_check(_: Any) -> Verdict:
        raise boom

    rails = Guardrails([Tool("lookup", Counting(), SCHEMA)], [fraud_check])
    result = call(rails, driver, {"q": "x"})

    assert ledger.check("guard_faults", result, DECLARED) == []
    assert result.escapes[0].exception is boom
    assert result.verdicts[0].reason == "raised"
    ledger.add("guard_faults", faults_injected=1, faults_counted=1)


@pytest.mark.parametrize("driver", ["sync", "async"])
def test_one_failing_guard_among_passing_ones_is_the_only_escape(driver: str, ledger: Any) -> None:
    passing = [guard(lambda _: Verdict.PASS, name=f"ok_{i}") for i in range(5)]
    failing = guard(lambda _: 1 / 0, name="divides")
    rails = Guardrails([Tool("lookup", Counting(), SCHEMA)], [*passing, failing])

    result = call(rails, driver, {"q": "x"})

    assert ledger.check("guard_faults", result, DECLARED) == []
    assert result.outcome is Outcome.OK
    assert result.verdict is Verdict.NOT_EVALUATED
    assert [e.guard for e in result.escapes] == ["divides"]
    ledger.add("guard_faults", faults_injected=1, faults_counted=1)


@pytest.mark.parametrize("driver", ["sync", "async"])
def test_rejecting_guard_wins_over_a_failing_one_in_either_order(driver: str, ledger: Any) -> None:
    for order in (0, 1):
        impl = Counting()
        failing = guard(lambda _: 1 / 0, name="divides")
        rejecting = guard(lambda _: Verdict.REJECT, name="forbid", outcome="limit")
        guards = [failing, rejecting] if order == 0 else [rejecting, failing]
        rails = Guardrails([Tool("lookup", impl, SCHEMA)], guards)

        result = call(rails, driver, {"q": "x"})

        assert ledger.check("guard_faults", result, DECLARED) == []
        assert result.outcome is Outcome.LIMIT
        assert impl.runs == 0
        assert result.verdict is Verdict.REJECT
        if order == 0:
            # Every guard before the rejecting one ran, and its escape is kept.
            assert [e.reason for e in result.escapes] == [EscapeReason.RAISED]
            ledger.add("guard_faults", faults_injected=1, faults_counted=1)


# -- output guards --------------------------------------------------------------


@pytest.mark.parametrize("driver", ["sync", "async"])
@pytest.mark.parametrize("fail_closed", [False, True], ids=["fail_open", "fail_closed"])
@pytest.mark.parametrize("fault", sorted(GUARD_FAULTS))
def test_failing_output_guard_is_recorded_and_never_shows_the_result_when_closed(
    fault: str, fail_closed: bool, driver: str, release: threading.Event, ledger: Any
) -> None:
    body, reason = GUARD_FAULTS[fault]
    g = make_guard(body, release, is_async=False, fail_closed=fail_closed, name=f"out_{fault}")
    impl = Counting()
    rails = Guardrails([Tool("lookup", impl, SCHEMA, output_guards=[g])])

    result = call(rails, driver, {"q": "x"})

    counted = [(e.guard, e.reason) for e in result.escapes] == [(g.name, reason)]
    ledger.add("output_guard_faults", faults_injected=1, faults_counted=int(counted))
    planted = (OUTPUT_MARK,) if fail_closed else ()
    assert ledger.check("output_guard_faults", result, DECLARED, planted) == []
    assert impl.runs == 1
    assert [(e.guard, e.reason) for e in result.escapes] == [(g.name, reason)]
    if fail_closed:
        assert result.outcome is Outcome.UNAVAILABLE
        assert result.reason == Reason.OUTPUT_GUARD
        assert result.value is None
    else:
        assert result.outcome is Outcome.OK
        assert result.content == f"{OUTPUT_MARK}:x"


# -- tool faults ----------------------------------------------------------------


def _circular() -> list[Any]:
    loop: list[Any] = []
    loop.append(loop)
    return loop


def _deep(depth: int) -> list[Any]:
    value: list[Any] = []
    for _ in range(depth):
        value = [value]
    return value


class BadModel:
    """Looks like a pydantic model; serialising it fails."""

    def model_dump_json(self) -> str:
        raise ValueError(SECRET_MARK)


UNSERIALISABLE: dict[str, Callable[[], Any]] = {
    "object": object,
    "set": lambda: {1, 2},
    "bytes": lambda: SECRET_MARK.encode(),
    "circular_list": _circular,
    "nan": lambda: float("nan"),
    "infinity": lambda: {"x": float("inf")},
    "tuple_keys": lambda: {("a", "b"): SECRET_MARK},
    "nested_10000": lambda: _deep(10_000),
    "model_that_fails": BadModel,
    "generator": lambda: (x for x in [SECRET_MARK]),
}


@pytest.mark.parametrize("driver", ["sync", "async"])
@pytest.mark.parametrize("kind", sorted(UNSERIALISABLE))
def test_unserialisable_tool_result_is_error_and_reason_unserialisable(
    kind: str, driver: str, ledger: Any
) -> None:
    def lookup(q: str) -> Any:
        return UNSERIALISABLE[kind]()

    rails = Guardrails([Tool("lookup", lookup, SCHEMA)])
    result = call(rails, driver, {"q": "x"})

    counted = result.reason == Reason.UNSERIALISABLE and result.exception is not None
    ledger.add("tool_faults", faults_injected=1, faults_counted=int(counted))
    assert ledger.check("tool_faults", result, DECLARED) == []
    assert result.outcome is Outcome.ERROR
    assert result.reason == Reason.UNSERIALISABLE
    assert result.value is None
    assert result.exception is not None


TOOL_RAISES: dict[str, tuple[Callable[[], BaseException], Outcome, Reason]] = {
    "runtime_error": (
        lambda: RuntimeError(f"api key {SECRET_MARK} rejected"),
        Outcome.ERROR,
        Reason.RAISED,
    ),
    "key_error": (lambda: KeyError(SECRET_MARK), Outcome.ERROR, Reason.RAISED),
    "unprintable": (Unprintable, Outcome.ERROR, Reason.RAISED),
    "timeout_error": (lambda: TimeoutError(SECRET_MARK), Outcome.ERROR, Reason.TIMEOUT),
    "recursion_error": (lambda: RecursionError(SECRET_MARK), Outcome.ERROR, Reason.RAISED),
    "memory_error": (lambda: MemoryError(SECRET_MARK), Outcome.ERROR, Reason.RAISED),
    "limit_exceeded": (lambda: LimitExceeded(SECRET_MARK), Outcome.LIMIT, Reason.LIMIT),
    "stop_run": (lambda: StopRun(SECRET_MARK), Outcome.UNAVAILABLE, Reason.RAISED),
}


@pytest.mark.parametrize("driver", ["sync", "async"])
@pytest.mark.parametrize("is_async", [False, True], ids=["sync_tool", "async_tool"])
@pytest.mark.parametrize("kind", sorted(TOOL_RAISES))
def test_raising_tool_gives_its_outcome_and_keeps_the_exception_for_audit(
    kind: str, is_async: bool, driver: str, ledger: Any
) -> None:
    make, outcome, reason = TOOL_RAISES[kind]
    raised: list[BaseException] = []

    def fail() -> Any:
        exc = make()
        raised.append(exc)
        raise exc

    if is_async:

        async def alookup(q: str) -> Any:
            return fail()

        rails = Guardrails([Tool("lookup", alookup, SCHEMA)])
    else:
        rails = Guardrails([Tool("lookup", lambda q: fail(), SCHEMA)])

    result = call(rails, driver, {"q": "x"})

    counted = result.reason == reason and result.exception is not None
    ledger.add("tool_faults", faults_injected=1, faults_counted=int(counted))
    assert ledger.check("tool_faults", result, DECLARED) == []
    assert result.outcome is outcome
    assert result.reason == reason
    assert result.exception is raised[0]
    assert result.value is None


@pytest.mark.parametrize("driver", ["sync", "async"])
@pytest.mark.parametrize("is_async", [False, True], ids=["sync_tool", "async_tool"])
def test_tool_hanging_past_its_timeout_is_error_and_reason_timeout(
    is_async: bool, driver: str, release: threading.Event, ledger: Any
) -> None:
    if is_async:

        async def alookup(q: str) -> str:
            await asyncio.sleep(HANG)
            return SECRET_MARK

        rails = Guardrails([Tool("lookup", alookup, SCHEMA, timeout=TIMEOUT)])
    else:

        def lookup(q: str) -> str:
            release.wait(HANG)
            return SECRET_MARK

        rails = Guardrails([Tool("lookup", lookup, SCHEMA, timeout=TIMEOUT)])

    result = call(rails, driver, {"q": "x"})

    counted = result.reason == Reason.TIMEOUT
    ledger.add("tool_faults", faults_injected=1, faults_counted=int(counted))
    assert ledger.check("tool_faults", result, DECLARED) == []
    assert result.outcome is Outcome.ERROR
    assert result.reason == Reason.TIMEOUT


@pytest.mark.parametrize("driver", ["sync", "async"])
@pytest.mark.slow
def test_tool_returning_100_mb_is_cut_to_the_result_cap(driver: str, ledger: Any) -> None:
    rails = Guardrails([Tool("lookup", lambda q: "x" * 100_000_000, SCHEMA)])

    result = call(rails, driver, {"q": "x"})

    assert ledger.check("tool_faults", result, DECLARED) == []
    assert result.outcome is Outcome.OK
    assert result.truncated
    assert len(result.content) <= 16_000
    ledger.add("tool_faults", faults_injected=1, faults_counted=1)


# -- recorder faults --------------------------------------------------------------


class RaisingRecorder:
    def __init__(self, exc: BaseException) -> None:
        self.exc = exc
        self.calls = 0

    def on_tool_result(self, result: ToolResult, /) -> None:
        self.calls += 1
        raise self.exc

    def on_event(self, kind: str, payload: Any, /) -> None:
        self.calls += 1
        raise self.exc


RECORDER_FAULTS: dict[str, Callable[[], BaseException]] = {
    "runtime_error": lambda: RuntimeError(SECRET_MARK),
    "unprintable": Unprintable,
    "recursion_error": lambda: RecursionError(SECRET_MARK),
    "not_configured": lambda: NotConfigured(SECRET_MARK),
}


@pytest.mark.parametrize("driver", ["sync", "async"])
@pytest.mark.parametrize("kind", sorted(RECORDER_FAULTS))
def test_raising_recorder_is_counted_and_the_others_still_record(
    kind: str, driver: str, ledger: Any
) -> None:
    broken = RaisingRecorder(RECORDER_FAULTS[kind]())
    memory = MemoryRecorder()
    failing_guard = guard(lambda _: 1 / 0, name="divides")
    rails = Guardrails(
        [Tool("lookup", Counting(), SCHEMA)], [failing_guard], recorder=[broken, memory]
    )

    results = [call(rails, driver, {"q": "x"}), call(rails, driver, {"q": 1})]

    for result in results:
        assert ledger.check("recorder_faults", result, DECLARED) == []
    assert [r.outcome for r in results] == [Outcome.OK, Outcome.INVALID_ARGS]
    assert memory.results == results
    assert memory.escapes[0].reason is EscapeReason.RAISED
    assert broken.calls == 2
    assert rails.recorder is not None and rails.recorder.failures == 2
    ledger.add("recorder_faults", faults_injected=2, faults_counted=rails.recorder.failures)


# -- malformed guard results ------------------------------------------------------

MALFORMED: dict[str, Callable[[], Any]] = {
    "unknown_escape_on_pass": lambda: GuardResult(Verdict.PASS, escape="bogus"),  # type: ignore[arg-type]
    "unknown_escape_on_decline": lambda: GuardResult(
        Verdict.NOT_EVALUATED,
        escape=SECRET_MARK,  # type: ignore[arg-type]
    ),
    "unhashable_escape": lambda: GuardResult(Verdict.PASS, escape=[]),  # type: ignore[arg-type]
    "params_not_iterable": lambda: GuardResult(Verdict.REJECT, params=5),  # type: ignore[arg-type]
    "params_unhashable": lambda: GuardResult(Verdict.REJECT, params=[["q"]]),  # type: ignore[arg-type]
    "params_not_text": lambda: GuardResult(Verdict.REJECT, params=("q", 3)),  # type: ignore[arg-type]
    "params_generator_that_raises": lambda: GuardResult(
        Verdict.REJECT,
        params=(1 / 0 for _ in [0]),  # type: ignore[arg-type]
    ),
}


@pytest.mark.parametrize("driver", ["sync", "async"])
@pytest.mark.parametrize("fail_closed", [False, True], ids=["fail_open", "fail_closed"])
@pytest.mark.parametrize("kind", sorted(MALFORMED))
def test_malformed_guard_result_is_an_invalid_return_escape(
    kind: str, fail_closed: bool, driver: str, ledger: Any
) -> None:
    impl = Counting()
    g = guard(lambda _: MALFORMED[kind](), name=f"g_{kind}", fail_closed=fail_closed)
    rails = Guardrails([Tool("lookup", impl, SCHEMA)], [g])

    result = call(rails, driver, {"q": "x"})

    counted = [(e.guard, e.reason) for e in result.escapes] == [
        (g.name, EscapeReason.INVALID_RETURN)
    ]
    ledger.add("guard_faults", faults_injected=1, faults_counted=int(counted))
    assert ledger.check("guard_faults", result, DECLARED) == []
    assert result.outcome is (Outcome.UNAVAILABLE if fail_closed else Outcome.OK)
    assert impl.runs == (0 if fail_closed else 1)
    assert [(e.guard, e.reason) for e in result.escapes] == [(g.name, EscapeReason.INVALID_RETURN)]


@pytest.mark.parametrize("driver", ["sync", "async"])
def test_well_formed_guard_result_variants_are_accepted(driver: str, ledger: Any) -> None:
    impl = Counting()
    rejecting = guard(
        lambda _: GuardResult.rejected("too_long", params=["q", SECRET_MARK]),
        name="rejecting",
        outcome="invalid_args",
    )
    rails = Guardrails([Tool("lookup", impl, SCHEMA)], [rejecting])

    result = call(rails, driver, {"q": "x"})

    assert ledger.check("guard_faults", result, DECLARED) == []
    assert result.outcome is Outcome.INVALID_ARGS and result.params == ("q",)
    assert impl.runs == 0


# -- bindings and the secret provider --------------------------------------------------


def _provider_raises(name: str) -> Any:
    raise ConnectionError(f"vault unreachable, token {SECRET_MARK}")


BINDING_FAULTS: dict[str, tuple[Any, Any]] = {
    "provider_raises": ({"api_key": Secret("billing")}, _provider_raises),
    "provider_returns_none": ({"api_key": Secret("billing")}, lambda name: None),
    "no_provider": ({"api_key": Secret("billing")}, None),
    "binding_function_raises": ({"api_key": lambda ctx: 1 / 0}, None),
    "binding_function_returns_none": ({"api_key": lambda ctx: None}, None),
    "context_key_missing": ({"api_key": "no_such_key"}, None),
}


@pytest.mark.parametrize("driver", ["sync", "async"])
@pytest.mark.parametrize("kind", sorted(BINDING_FAULTS))
def test_binding_that_cannot_be_resolved_is_unavailable_and_the_tool_not_run(
    kind: str, driver: str, ledger: Any
) -> None:
    bind, provider = BINDING_FAULTS[kind]
    ran: list[str] = []
    schema = {
        "type": "object",
        "properties": {"q": {"type": "string"}, "api_key": {"type": "string"}},
        "required": ["q"],
    }
    tool = Tool("lookup", lambda q, api_key: ran.append(api_key), schema, bind=bind, effect=True)
    rails = Guardrails([tool], secrets=provider)

    result = call(rails, driver, {"q": "x"})

    counted = result.reason == Reason.BINDING_UNRESOLVED
    ledger.add("tool_faults", faults_injected=1, faults_counted=int(counted))
    assert ledger.check("tool_faults", result, DECLARED) == []
    assert result.outcome is Outcome.UNAVAILABLE
    assert result.reason == Reason.BINDING_UNRESOLVED
    assert ran == []


def test_raising_recorder_never_breaks_pre_turn_post_run_or_a_backstop(ledger: Any) -> None:
    from guardrails.rules import required_action, trigger

    broken = RaisingRecorder(RuntimeError(SECRET_MARK))
    memory = MemoryRecorder()
    rails = Guardrails(
        [Tool("lookup", Counting(), SCHEMA)],
        [
            trigger(["refund"], remove=["lookup"], name="money"),
            required_action("lookup", when=lambda run: True, arguments={"q": "backstop"}),
        ],
        recorder=[broken, memory],
    )
    turn = rails.turn()

    decision = turn.pre_turn("a refund please")
    report = turn.post_run("done")

    assert decision.offered == ()
    assert [a.outcome for a in report.actions] == [Outcome.OK]
    kinds = [kind for kind, _ in memory.events]
    assert kinds == ["pre_turn", "backstop", "post_run"]
    # One failure per event and one for the backstop call's own result.
    assert rails.recorder is not None and rails.recorder.failures == broken.calls == 4
    ledger.add(
        "recorder_faults", inputs=3, faults_injected=4, faults_counted=rails.recorder.failures
    )
