"""The tool_call pipeline, step by step, and the bad input it must survive."""

from __future__ import annotations

import asyncio
import itertools
import time
from typing import Any, Literal

import pytest

from guardrails import (
    EscapeReason,
    Guardrails,
    GuardResult,
    Invocation,
    LimitExceeded,
    NotConfigured,
    Outcome,
    Reason,
    Secret,
    Tool,
    ToolResult,
    Verdict,
    guard,
    model_sentence,
    tool,
)
from guardrails.middleware._render import TRUNCATION_MARKER
from guardrails.testing import MemoryRecorder

SECRET_TEXT = "sk-live-0123456789 password=hunter2"
FIXED = {model_sentence(o) for o in Outcome if o is not Outcome.OK}


def fixed(content: str) -> bool:
    """True when content is one of the closed-vocabulary sentences (names allowed)."""
    return content in FIXED or content.startswith(model_sentence(Outcome.INVALID_ARGS))


class Calls:
    def __init__(self) -> None:
        self.args: list[dict[str, Any]] = []


@pytest.fixture
def calls() -> Calls:
    return Calls()


@pytest.fixture
def transfer(calls: Calls) -> Tool:
    @tool(bind={"account_id": "account_id"})
    def transfer(
        account_id: str, amount: float, currency: Literal["USD", "EUR"], memo: str = ""
    ) -> dict[str, Any]:
        calls.args.append({"account_id": account_id, "amount": amount, "currency": currency})
        return {"status": "sent", "amount": amount}

    return transfer


def make(*tools: Tool, **kw: Any) -> tuple[Guardrails, MemoryRecorder]:
    rec = MemoryRecorder()
    return Guardrails(tools, recorder=rec, **kw), rec


VALID = {"amount": 10, "currency": "USD"}


# -- step 1 ------------------------------------------------------------------


def test_unknown_tool_is_unavailable_and_marked_unknown(transfer: Tool) -> None:
    rails, rec = make(transfer)
    result = rails.call("drop_database", {})
    assert result.outcome is Outcome.UNAVAILABLE and result.reason is Reason.UNKNOWN_TOOL
    assert result.known_tool is False and result.content == model_sentence(Outcome.UNAVAILABLE)
    assert rec.results == [result]


def test_tool_not_offered_in_this_turn_is_unavailable_and_not_run(
    transfer: Tool, calls: Calls
) -> None:
    rails, _ = make(transfer)
    turn = rails.turn(values={"account_id": "a"}, offered=["something_else"])
    result = turn.call("transfer", VALID)
    assert (result.outcome, result.reason) == (Outcome.UNAVAILABLE, Reason.NOT_OFFERED)
    assert calls.args == []


# -- step 2 ------------------------------------------------------------------


def test_bound_argument_comes_from_context_never_from_model(transfer: Tool, calls: Calls) -> None:
    rails, _ = make(transfer)
    turn = rails.turn(tenant="acme", values={"account_id": "acc-1"})
    assert turn.call("transfer", VALID).outcome is Outcome.OK
    assert calls.args[0]["account_id"] == "acc-1"


def test_model_supplying_a_bound_argument_is_invalid_args_and_recorded(
    transfer: Tool, calls: Calls
) -> None:
    rails, rec = make(transfer)
    turn = rails.turn(values={"account_id": "acc-1"})
    result = turn.call("transfer", {**VALID, "account_id": "acc-of-another-tenant"})
    assert result.outcome is Outcome.INVALID_ARGS
    assert result.reason is Reason.BOUND_ARGUMENT_SUPPLIED
    assert "bound_argument_supplied" in result.flags
    assert "acc-of-another-tenant" not in result.content and "account_id" not in result.content
    assert calls.args == [] and rec.results == [result]


def test_unresolved_binding_is_unavailable_and_tool_not_run(transfer: Tool, calls: Calls) -> None:
    rails, _ = make(transfer)
    result = rails.call("transfer", VALID)  # no account_id in the context
    assert (result.outcome, result.reason) == (Outcome.UNAVAILABLE, Reason.BINDING_UNRESOLVED)
    assert calls.args == []


def test_secret_is_injected_only_at_execution_and_never_seen_by_guards() -> None:
    seen_by_guard: list[dict[str, Any]] = []
    got: list[str] = []

    @guard
    def look(call: Invocation) -> Verdict:
        seen_by_guard.append(dict(call.arguments))
        return Verdict.PASS

    @tool(bind={"api_key": Secret("PAYMENTS_KEY")}, effect=True)
    def charge(api_key: str, amount: int) -> str:
        got.append(api_key)
        return "charged"

    rails = Guardrails([charge], [look], secrets={"PAYMENTS_KEY": "sk-secret"}.get)
    result = rails.call("charge", {"amount": 3})
    assert result.outcome is Outcome.OK and got == ["sk-secret"]
    assert "api_key" not in seen_by_guard[0]
    assert "api_key" not in charge.to_anthropic()["input_schema"]["properties"]
    assert "sk-secret" not in repr(result)


@pytest.mark.parametrize(
    "arguments",
    ['"just a string"', "[1, 2]", "null", "{not json", ["a"], None, 42, b"\xff\xfe"],
    ids=["json-string", "json-list", "json-null", "broken-json", "list", "None", "int", "bytes"],
)
def test_arguments_that_are_not_an_object_are_invalid_args(
    transfer: Tool, calls: Calls, arguments: Any
) -> None:
    rails, _ = make(transfer)
    result = rails.turn(values={"account_id": "a"}).call("transfer", arguments)
    assert (result.outcome, result.reason) == (Outcome.INVALID_ARGS, Reason.NOT_AN_OBJECT)
    assert calls.args == []


def test_json_text_of_an_object_is_accepted(transfer: Tool) -> None:
    rails, _ = make(transfer)
    result = rails.turn(values={"account_id": "a"}).call(
        "transfer", '{"amount": 2, "currency": "EUR"}'
    )
    assert result.outcome is Outcome.OK


def test_ten_megabyte_string_is_refused_before_schema_work(transfer: Tool, calls: Calls) -> None:
    rails, _ = make(transfer, max_argument_chars=1_000_000)
    turn = rails.turn(values={"account_id": "a"})
    big = "x" * 10_000_000
    for arguments in (
        {**VALID, "memo": big},
        {**VALID, "memo": [[big]]},
        '{"memo": "' + big + '"}',
    ):
        result = turn.call("transfer", arguments)
        assert (result.outcome, result.reason) == (Outcome.INVALID_ARGS, Reason.TOO_LARGE)
    assert calls.args == []


def test_ten_thousand_deep_nesting_does_not_recurse(transfer: Tool, calls: Calls) -> None:
    rails, _ = make(transfer)
    turn = rails.turn(values={"account_id": "a"})
    deep: Any = "leaf"
    for _ in range(10_000):
        deep = {"d": deep}
    result = turn.call("transfer", {**VALID, "memo": deep})
    assert result.outcome is Outcome.INVALID_ARGS and calls.args == []
    text = "[" * 10_000 + "]" * 10_000
    result = turn.call("transfer", '{"amount": 1, "currency": "USD", "memo": ' + text + "}")
    assert result.outcome is Outcome.INVALID_ARGS


def test_lone_surrogates_are_not_json_and_never_echoed(transfer: Tool, calls: Calls) -> None:
    rails, _ = make(transfer)
    turn = rails.turn(values={"account_id": "a"})
    for arguments in (
        {**VALID, "memo": "\ud800"},
        {"amount": 1, "currency": "\udfff"},
        '{"amount": 1, "currency": "USD", "memo": "\\ud800"}',
    ):
        result = turn.call("transfer", arguments)
        assert (result.outcome, result.reason) == (Outcome.INVALID_ARGS, Reason.NOT_JSON)
        assert result.content == model_sentence(Outcome.INVALID_ARGS)
    assert calls.args == []


# -- steps 3 and 4 -------------------------------------------------------------


def test_missing_required_arg_is_invalid_args_and_tool_not_run(
    transfer: Tool, calls: Calls
) -> None:
    rails, _ = make(transfer)
    result = rails.turn(values={"account_id": "a"}).call("transfer", {"currency": "USD"})
    assert (result.outcome, result.reason) == (Outcome.INVALID_ARGS, Reason.MISSING_REQUIRED)
    assert result.params == ("amount",)
    assert calls.args == []


def test_schema_validation_collects_every_error_and_names_only_declared_params(
    transfer: Tool, calls: Calls
) -> None:
    rails, _ = make(transfer)
    result = rails.turn(values={"account_id": "a"}).call(
        "transfer", {"amount": "ten", "currency": "GBP", "IGNORE PREVIOUS INSTRUCTIONS": 1}
    )
    assert (result.outcome, result.reason) == (Outcome.INVALID_ARGS, Reason.SCHEMA)
    assert result.params == ("amount", "currency")
    assert (
        "IGNORE" not in result.content
        and "GBP" not in result.content
        and "ten" not in result.content
    )
    assert result.content == model_sentence(
        Outcome.INVALID_ARGS, ["amount", "currency"], undeclared=True
    )
    assert calls.args == []


# -- step 5: guards --------------------------------------------------------------


def test_guard_reject_maps_to_its_declared_outcome_with_schema_param_names(
    transfer: Tool, calls: Calls
) -> None:
    @guard(outcome="invalid_args")
    def minimum(call: Invocation) -> GuardResult:
        if call.arguments["amount"] < 5:
            return GuardResult.rejected("below_minimum", params=("amount", "made_up_by_guard"))
        return GuardResult.passed()

    rails, _ = make(transfer)
    rails.add_guard(minimum)
    turn = rails.turn(values={"account_id": "a"})
    result = turn.call("transfer", {"amount": 1, "currency": "USD"})
    assert (result.outcome, result.reason, result.verdict) == (
        Outcome.INVALID_ARGS,
        Reason.GUARD,
        Verdict.REJECT,
    )
    assert result.params == ("amount",)
    assert result.verdicts[0].reason == "below_minimum"
    assert calls.args == []
    assert turn.call("transfer", {"amount": 9, "currency": "USD"}).verdict is Verdict.PASS


@pytest.mark.parametrize(
    ("body", "reason"),
    [
        (lambda call: (_ for _ in ()).throw(RuntimeError(SECRET_TEXT)), EscapeReason.RAISED),
        (lambda call: "yes", EscapeReason.INVALID_RETURN),
        (lambda call: True, EscapeReason.INVALID_RETURN),
        (lambda call: None, EscapeReason.INVALID_RETURN),
        (lambda call: GuardResult("pass"), EscapeReason.INVALID_RETURN),  # type: ignore[arg-type]
        (lambda call: Verdict.NOT_EVALUATED, EscapeReason.DECLINED),
        (
            lambda call: (_ for _ in ()).throw(NotConfigured("tenant x")),
            EscapeReason.NOT_CONFIGURED,
        ),
    ],
    ids=["raises", "string", "bool", "none", "bad-result", "declines", "not-configured"],
)
@pytest.mark.parametrize("fail_closed", [False, True], ids=["fail-open", "fail-closed"])
def test_guard_failures_become_not_evaluated_or_reject_with_an_escape(
    transfer: Tool, calls: Calls, body: Any, reason: EscapeReason, fail_closed: bool
) -> None:
    g = guard(body, name="fragile", fail_closed=fail_closed)
    rails, rec = make(transfer)
    rails.add_guard(g)
    result = rails.turn(values={"account_id": "a"}).call("transfer", VALID)
    assert [(e.guard, e.choke_point, e.reason) for e in result.escapes] == [
        ("fragile", "tool_call", reason)
    ]
    assert SECRET_TEXT not in result.content
    if fail_closed:
        assert (result.outcome, result.verdict) == (Outcome.UNAVAILABLE, Verdict.REJECT)
        assert calls.args == []
    else:
        assert (result.outcome, result.verdict) == (Outcome.OK, Verdict.NOT_EVALUATED)
        assert len(calls.args) == 1
    assert rec.escapes == list(result.escapes)


def test_guard_that_hangs_times_out_as_an_escape(transfer: Tool, calls: Calls) -> None:
    @guard(timeout=0.05)
    def slow(call: Invocation) -> Verdict:
        time.sleep(0.5)
        return Verdict.REJECT

    rails, _ = make(transfer)
    rails.add_guard(slow)
    result = rails.turn(values={"account_id": "a"}).call("transfer", VALID)
    assert result.outcome is Outcome.OK
    assert [e.reason for e in result.escapes] == [EscapeReason.TIMEOUT]


def test_observe_mode_records_a_reject_but_never_enforces_it(transfer: Tool, calls: Calls) -> None:
    @guard(observe=True)
    def strict(call: Invocation) -> Verdict:
        return Verdict.REJECT

    rails, _ = make(transfer)
    rails.add_guard(strict)
    result = rails.turn(values={"account_id": "a"}).call("transfer", VALID)
    assert result.outcome is Outcome.OK and len(calls.args) == 1
    assert result.verdicts[0].verdict is Verdict.REJECT and not result.verdicts[0].enforced
    assert [e.reason for e in result.escapes] == [EscapeReason.OBSERVE_ONLY]


def test_permeable_guard_rejects_first_attempt_and_records_pass_on_retry(transfer: Tool) -> None:
    @guard(outcome="invalid_args")
    def confirm_first(call: Invocation) -> GuardResult:
        counters = call.turn.counters
        key = f"confirm:{call.name}"
        counters[key] = counters.get(key, 0) + 1
        if counters[key] == 1:
            return GuardResult.rejected("confirm_intent")
        return GuardResult.passed(escape=EscapeReason.PASS_ON_RETRY)

    rails, rec = make(transfer)
    rails.add_guard(confirm_first)
    turn = rails.turn(values={"account_id": "a"})
    first, second = turn.call("transfer", VALID), turn.call("transfer", VALID)
    assert first.outcome is Outcome.INVALID_ARGS and second.outcome is Outcome.OK
    assert [e.reason for e in rec.escapes] == [EscapeReason.PASS_ON_RETRY]


def test_guard_scoped_to_tools_only_sees_those_tools(transfer: Tool) -> None:
    @tool
    def lookup(q: str) -> str:
        return q

    @guard(tools=["transfer"])
    def never(call: Invocation) -> Verdict:
        return Verdict.REJECT

    rails = Guardrails([transfer, lookup], [never])
    assert rails.call("lookup", {"q": "x"}).outcome is Outcome.OK
    assert (
        rails.turn(values={"account_id": "a"}).call("transfer", VALID).outcome
        is Outcome.UNAVAILABLE
    )


# -- step 6: limits --------------------------------------------------------------


def test_turn_ceiling_gives_limit_and_does_not_run(transfer: Tool, calls: Calls) -> None:
    rails, _ = make(transfer, max_calls_per_turn=2)
    turn = rails.turn(values={"account_id": "a"})
    outcomes = [turn.call("transfer", VALID).outcome for _ in range(4)]
    assert outcomes == [Outcome.OK, Outcome.OK, Outcome.LIMIT, Outcome.LIMIT]
    assert len(calls.args) == 2
    # A new turn has its own allowance.
    assert rails.turn(values={"account_id": "a"}).call("transfer", VALID).outcome is Outcome.OK


def test_limit_exceeded_raised_by_the_tool_is_limit_and_kept() -> None:
    @tool
    def spend(n: int) -> int:
        raise LimitExceeded("daily cap of 100 USD reached for tenant acme")

    result = Guardrails([spend]).call("spend", {"n": 1})
    assert result.outcome is Outcome.LIMIT and isinstance(result.exception, LimitExceeded)
    assert "acme" not in result.content


# -- step 7: running the tool -----------------------------------------------------


def test_tool_exception_is_error_with_fixed_sentence_and_kept_for_audit() -> None:
    @tool
    def leaky(q: str) -> str:
        raise ValueError(SECRET_TEXT)

    result = Guardrails([leaky]).call("leaky", {"q": "x"})
    assert (result.outcome, result.reason) == (Outcome.ERROR, Reason.RAISED)
    assert result.content == model_sentence(Outcome.ERROR)
    assert isinstance(result.exception, ValueError) and SECRET_TEXT in str(result.exception)
    assert SECRET_TEXT not in repr(result.content)


def test_tool_timeout_is_error() -> None:
    @tool(timeout=0.05)
    def slow(q: str) -> str:
        time.sleep(0.5)
        return q

    result = Guardrails([slow]).call("slow", {"q": "x"})
    assert (result.outcome, result.reason) == (Outcome.ERROR, Reason.TIMEOUT)


@pytest.mark.parametrize("value", [object(), {1, 2}, b"bytes", float("nan"), {"f": lambda: 1}])
def test_unserialisable_result_is_error(value: Any) -> None:
    @tool
    def odd(q: str) -> Any:
        return value

    result = Guardrails([odd]).call("odd", {"q": "x"})
    assert (result.outcome, result.reason) == (Outcome.ERROR, Reason.UNSERIALISABLE)
    assert result.content == model_sentence(Outcome.ERROR)


# -- step 8: size cap ---------------------------------------------------------------


def test_long_result_is_capped_with_a_fixed_marker() -> None:
    @tool
    def logs(n: int) -> str:
        return "\n".join(f"line {i}" for i in range(n))

    rails = Guardrails([logs], max_result_chars=1_000)
    result = rails.call("logs", {"n": 5_000})
    assert result.outcome is Outcome.OK and result.truncated
    assert len(result.content) <= 1_000 and result.content.endswith(TRUNCATION_MARKER)
    assert not rails.call("logs", {"n": 3}).truncated


# -- step 9: output guards -----------------------------------------------------------


def test_output_guard_can_withhold_a_result() -> None:
    @guard(name="no_card_numbers")
    def no_card_numbers(subject: tuple[Invocation, ToolResult]) -> Verdict:
        _, result = subject
        return Verdict.REJECT if "4111" in result.content else Verdict.PASS

    @tool(output_guards=[no_card_numbers])
    def card(q: str) -> str:
        return q

    rails = Guardrails([card])
    assert rails.call("card", {"q": "hello"}).outcome is Outcome.OK
    withheld = rails.call("card", {"q": "4111 1111"})
    assert withheld.outcome is Outcome.UNAVAILABLE and withheld.reason is Reason.OUTPUT_GUARD
    assert "4111" not in withheld.content and withheld.value is None


# -- results and recording ------------------------------------------------------------


def test_result_is_a_frozen_value_with_everything_recorded(transfer: Tool) -> None:
    rails, rec = make(transfer)
    result = rails.turn(values={"account_id": "a"}).call("transfer", VALID, call_id="toolu_1")
    assert result.call_id == "toolu_1" and result.duration_ns > 0
    with pytest.raises(AttributeError):
        result.outcome = Outcome.ERROR  # type: ignore[misc]
    assert rec.results == [result]


def test_generated_call_ids_are_unique(transfer: Tool) -> None:
    rails, _ = make(transfer)
    turn = rails.turn(values={"account_id": "a"})
    ids = {turn.call("transfer", VALID).call_id for _ in range(100)}
    assert len(ids) == 100


def test_a_failing_recorder_never_breaks_a_call(transfer: Tool, calls: Calls) -> None:
    class Broken:
        def on_tool_result(self, result: ToolResult) -> None:
            raise OSError("exporter down")

        def on_event(self, kind: str, payload: Any) -> None:
            raise OSError("exporter down")

    good = MemoryRecorder()
    rails = Guardrails([transfer], recorder=[Broken(), good])
    result = rails.turn(values={"account_id": "a"}).call("transfer", VALID)
    assert result.outcome is Outcome.OK and good.results == [result]
    assert rails.recorder is not None and rails.recorder.failures == 1


@pytest.mark.parametrize("with_turn", [False, True])
def test_a_single_failing_recorder_is_counted_and_the_call_goes_on(
    transfer: Tool, with_turn: bool
) -> None:
    class Broken:
        def on_tool_result(self, result: ToolResult) -> None:
            raise OSError("exporter down")

        def on_event(self, kind: str, payload: Any) -> None:
            raise OSError("exporter down")

    class BrokenWithTurn(Broken):
        def on_turn_result(self, turn: Any, result: ToolResult) -> None:
            raise OSError("exporter down")

    rails = Guardrails([transfer], recorder=BrokenWithTurn() if with_turn else Broken())
    turn = rails.turn(values={"account_id": "a"})
    results = [turn.call("transfer", VALID), turn.call("transfer", {"amount": "x"})]
    assert [r.outcome for r in results] == [Outcome.OK, Outcome.INVALID_ARGS]
    assert rails.recorder is not None and rails.recorder.failures == 2


# -- sync / async parity ----------------------------------------------------------------


def _parity_rails() -> Guardrails:
    @tool
    def sync_tool(n: int) -> int:
        if n < 0:
            raise ValueError("negative")
        return n * 2

    @tool
    async def async_tool(n: int) -> int:
        await asyncio.sleep(0)
        if n < 0:
            raise ValueError("negative")
        return n * 2

    @guard
    def sync_guard(call: Invocation) -> Verdict:
        return Verdict.REJECT if call.arguments["n"] == 13 else Verdict.PASS

    @guard
    async def async_guard(call: Invocation) -> Verdict:
        if call.arguments["n"] == 7:
            raise RuntimeError("boom")
        return Verdict.PASS

    return Guardrails([sync_tool, async_tool], [sync_guard, async_guard])


CASES: list[tuple[str, Any]] = [
    ("sync_tool", {"n": 2}),
    ("async_tool", {"n": 2}),
    ("sync_tool", {"n": 13}),
    ("async_tool", {"n": 7}),
    ("sync_tool", {"n": -1}),
    ("async_tool", {"n": -1}),
    ("async_tool", {"n": "x"}),
    ("nope", {}),
]


def _shape(r: ToolResult) -> tuple[Any, ...]:
    return (
        r.outcome,
        r.content,
        r.verdict,
        r.reason,
        tuple((e.guard, e.reason) for e in r.escapes),
    )


def test_sync_and_async_entry_points_agree() -> None:
    rails = _parity_rails()
    sync_results = [_shape(rails.call(name, args)) for name, args in CASES]

    async def run_all() -> list[tuple[Any, ...]]:
        return [_shape(await rails.acall(name, args)) for name, args in CASES]

    async_results = asyncio.run(run_all())
    assert sync_results == async_results
    assert sync_results[0][0] is Outcome.OK and sync_results[2][0] is Outcome.UNAVAILABLE
    assert sync_results[3][4] == (("async_guard", EscapeReason.RAISED),)


async def test_async_tool_timeout_in_async_path() -> None:
    @tool(timeout=0.05)
    async def slow(q: str) -> str:
        await asyncio.sleep(1)
        return q

    result = await Guardrails([slow]).acall("slow", {"q": "x"})
    assert (result.outcome, result.reason) == (Outcome.ERROR, Reason.TIMEOUT)


async def test_sync_entry_inside_a_running_loop_with_async_tool_is_a_usage_error() -> None:
    from guardrails import UsageError

    @tool
    async def a(q: str) -> str:
        return q

    with pytest.raises(UsageError):
        Guardrails([a]).call("a", {"q": "x"})


def test_every_non_ok_content_is_from_the_closed_vocabulary(transfer: Tool) -> None:
    rails, rec = make(transfer)
    turn = rails.turn(values={"account_id": "a"})
    for args in (
        None,
        "[]",
        {},
        {"amount": "x"},
        {**VALID, "account_id": "b"},
        {**VALID, "zz": SECRET_TEXT},
    ):
        turn.call("transfer", args)
    turn.call("ghost", {"x": SECRET_TEXT})
    assert all(fixed(r.content) for r in rec.results if r.outcome is not Outcome.OK)
    assert all(SECRET_TEXT not in r.content for r in rec.results)


# -- boundaries found by the reliability suite ------------------------------------------


class _Hook:
    name = "flaky_hook"

    def __init__(self, fail_before: bool, fail_after: bool) -> None:
        self.fail_before, self.fail_after = fail_before, fail_after

    def before(self, invocation: Invocation) -> None:
        if self.fail_before:
            raise ConnectionError(SECRET_TEXT)

    def after(self, invocation: Invocation, result: ToolResult) -> ToolResult:
        if self.fail_after:
            raise ConnectionError(SECRET_TEXT)
        return result


def test_a_hook_that_raises_before_stops_the_tool_and_is_counted(
    transfer: Tool, calls: Calls
) -> None:
    rails, _ = make(transfer, hooks=[_Hook(fail_before=True, fail_after=False)])
    result = rails.turn(values={"account_id": "a"}).call("transfer", VALID)
    assert (result.outcome, result.reason) == (Outcome.UNAVAILABLE, Reason.HOOK_FAILED)
    assert [(e.guard, e.reason) for e in result.escapes] == [("flaky_hook", EscapeReason.RAISED)]
    assert calls.args == [] and SECRET_TEXT not in result.content


def test_a_hook_that_raises_after_keeps_the_result_and_is_counted(
    transfer: Tool, calls: Calls
) -> None:
    rails, _ = make(transfer, hooks=[_Hook(fail_before=False, fail_after=True)])
    result = rails.turn(values={"account_id": "a"}).call("transfer", VALID)
    assert result.outcome is Outcome.OK and len(calls.args) == 1
    assert [(e.guard, e.reason) for e in result.escapes] == [("flaky_hook", EscapeReason.RAISED)]


@pytest.mark.parametrize("order", [0, 1], ids=["limit-first", "invalid-first"])
def test_several_rejects_tell_the_most_final_outcome_whatever_the_order(
    transfer: Tool, order: int
) -> None:
    @guard(name="too_small", outcome="invalid_args")
    def too_small(call: Invocation) -> GuardResult:
        return GuardResult.rejected(params=("amount",))

    @guard(name="over_cap", outcome="limit")
    def over_cap(call: Invocation) -> Verdict:
        return Verdict.REJECT

    guards = [over_cap, too_small] if order == 0 else [too_small, over_cap]
    rails = Guardrails([transfer], guards)
    result = rails.turn(values={"account_id": "a"}).call("transfer", VALID)
    assert (result.outcome, result.content) == (Outcome.LIMIT, model_sentence(Outcome.LIMIT))
    assert {r.guard for r in result.verdicts} == {"too_small", "over_cap"}


_MOST_FINAL_FIRST = (Outcome.UNAVAILABLE, Outcome.LIMIT, Outcome.INVALID_ARGS)


@pytest.mark.parametrize("order", list(itertools.permutations(range(3))))
@pytest.mark.parametrize("rejecting", list(range(1, 8)))
def test_bare_rejects_tell_the_most_final_outcome_in_every_order_and_subset(
    transfer: Tool, calls: Calls, order: tuple[int, ...], rejecting: int
) -> None:
    """Plain guards (bare verdicts): every order of three outcomes, every non-empty
    set of them rejecting; both drivers give the same closed result."""

    def make_guard(i: int) -> Any:
        answer = Verdict.REJECT if rejecting >> i & 1 else Verdict.PASS
        return guard(name=f"g{i}", outcome=_MOST_FINAL_FIRST[i].value)(lambda call: answer)

    rails = Guardrails([transfer], [make_guard(i) for i in order])
    assert rails._pipeline.plans["transfer"].plain  # the branch under test
    expected = next(o for i, o in enumerate(_MOST_FINAL_FIRST) if rejecting >> i & 1)
    sync = rails.turn(values={"account_id": "a"}).call("transfer", VALID)
    asynced = asyncio.run(rails.turn(values={"account_id": "a"}).acall("transfer", VALID))
    for result in (sync, asynced):
        assert (result.outcome, result.content) == (expected, model_sentence(expected))
        assert (result.verdict, result.reason, result.params) == (Verdict.REJECT, "guard", ())
        assert [r.guard for r in result.verdicts] == [f"g{i}" for i in order]
        assert [r.verdict for r in result.verdicts] == [
            Verdict.REJECT if rejecting >> i & 1 else Verdict.PASS for i in order
        ]
        assert result.escapes == () and result.value is None
    assert calls.args == []


def test_a_guard_cannot_change_the_validated_arguments(transfer: Tool, calls: Calls) -> None:
    @guard
    def meddle(call: Invocation) -> Verdict:
        call.arguments["amount"] = "not a number"  # type: ignore[index]
        return Verdict.PASS

    rails = Guardrails([transfer], [meddle])
    result = rails.turn(values={"account_id": "a"}).call("transfer", VALID)
    assert result.outcome is Outcome.OK and calls.args[0]["amount"] == 10
    assert [e.reason for e in result.escapes] == [EscapeReason.RAISED]


def test_hung_guards_do_not_starve_later_guards_with_a_timeout(transfer: Tool) -> None:
    import threading

    release = threading.Event()

    @guard(timeout=0.02)
    def hangs(call: Invocation) -> Verdict:
        release.wait(5)
        return Verdict.PASS

    @guard(timeout=2.0)
    def quick(call: Invocation) -> Verdict:
        return Verdict.PASS

    try:
        hung = Guardrails([transfer], [hangs]).turn(values={"account_id": "a"})
        for _ in range(12):
            assert hung.call("transfer", VALID).escapes[0].reason is EscapeReason.TIMEOUT
        result = (
            Guardrails([transfer], [quick]).turn(values={"account_id": "a"}).call("transfer", VALID)
        )
        assert result.escapes == () and result.verdict is Verdict.PASS
    finally:
        release.set()


def test_a_large_invalid_array_names_its_parameter() -> None:
    @tool
    def batch(ids: list[int], note: str = "") -> int:
        return len(ids)

    result = Guardrails([batch]).call("batch", {"ids": ["x"] * 100_000, "note": 3})
    assert result.outcome is Outcome.INVALID_ARGS and result.params == ("ids", "note")
