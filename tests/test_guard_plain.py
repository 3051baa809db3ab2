"""``evaluate_plain``: one loop over plain guards, the same outcomes as ``evaluate``."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from guardrails import (
    ChokePoint,
    Guard,
    Guardrails,
    GuardResult,
    Invocation,
    ToolResult,
    UsageError,
    Verdict,
    tool,
)
from guardrails.guard import evaluate_plain, plain_steps
from guardrails.verdicts import EscapeReason
from tests._examples import examples

_POINT = ChokePoint.TOOL_CALL

# What a guard can do: each is reached by the generated lists (see the branch test).
BEHAVIOURS: dict[str, Any] = {
    "pass": lambda: Verdict.PASS,
    "reject": lambda: Verdict.REJECT,
    "not_evaluated": lambda: Verdict.NOT_EVALUATED,
    "result_reject": lambda: GuardResult.rejected("why", params=("q",)),
    "result_pass_escape": lambda: GuardResult.passed(escape=EscapeReason.PASS_ON_RETRY),
    "result_reject_fault": lambda: GuardResult.rejected(escape=EscapeReason.NOT_CONFIGURED),
    "junk": lambda: "pass",
    "raises": lambda: 1 / 0,
}


def _guards(behaviours: list[str], fail_closed: bool, calls: list[str]) -> tuple[Guard, ...]:
    def make(i: int, what: str) -> Guard:
        def fn(subject: Any) -> Any:
            calls.append(f"{i}:{what}")
            return BEHAVIOURS[what]()

        return Guard(fn, name=f"g{i}", fail_closed=fail_closed)

    return tuple(make(i, what) for i, what in enumerate(behaviours))


def _comparable(outcomes: list[Any]) -> list[Any]:
    # Everything but the measured duration (and the exception object's identity).
    out = []
    for record, escape, params in outcomes:
        esc = None if escape is None else (escape.guard, escape.reason, type(escape.exception))
        out.append((record._replace(duration_ns=0), esc, params))
    return out


def _as_outcomes(ran: Any) -> list[Any]:
    if type(ran) is tuple:
        records, rejected = ran
        assert rejected == any(r.verdict is Verdict.REJECT for r in records)
        return [(record, None, ()) for record in records]
    return ran  # type: ignore[no-any-return]


@settings(max_examples=examples(300), deadline=None)
@given(st.lists(st.sampled_from(sorted(BEHAVIOURS)), min_size=1, max_size=6), st.booleans())
def test_one_loop_gives_what_evaluate_gives_guard_by_guard(
    behaviours: list[str], fail_closed: bool
) -> None:
    looped: list[str] = []
    each: list[str] = []
    ran = evaluate_plain(plain_steps(_guards(behaviours, fail_closed, looped)), None, _POINT)
    expected = [g.evaluate(None, _POINT) for g in _guards(behaviours, fail_closed, each)]
    assert _comparable(_as_outcomes(ran)) == _comparable(expected)
    assert looped == each  # every guard called once, in order
    if type(ran) is tuple:
        assert set(behaviours) <= {"pass", "reject"}
        assert all(r.duration_ns >= 0 for r in ran[0])
    else:
        assert not set(behaviours) <= {"pass", "reject"}


def test_both_forms_are_reached() -> None:
    both = (["pass", "reject"], ["pass", "raises", "pass"])
    ran = [evaluate_plain(plain_steps(_guards(b, False, [])), None, _POINT) for b in both]
    assert [type(r) for r in ran] == [tuple, list]


def test_a_usage_error_and_a_deliberate_stop_still_propagate() -> None:
    def misuse(subject: Any) -> Verdict:
        raise UsageError("misuse")

    def interrupt(subject: Any) -> Verdict:
        raise KeyboardInterrupt

    for fn, exc in ((misuse, UsageError), (interrupt, KeyboardInterrupt)):
        with pytest.raises(exc):
            steps = plain_steps((Guard(lambda s: Verdict.PASS, name="first"), Guard(fn)))
            evaluate_plain(steps, None, _POINT)


def test_plain_means_sync_without_timeout_or_observe_mode() -> None:
    async def later(subject: Any) -> Verdict:
        return Verdict.PASS

    assert Guard(lambda s: Verdict.PASS).plain
    assert not Guard(lambda s: Verdict.PASS, timeout=1.0).plain
    assert not Guard(lambda s: Verdict.PASS, observe=True).plain
    assert not Guard(later).plain


@tool
def echo(q: str) -> str:
    return q


def test_a_guard_that_fails_after_plain_passes_is_recorded_like_any_other() -> None:
    calls: list[str] = []
    rails = Guardrails([echo], list(_guards(["pass", "raises", "reject"], False, calls)))
    result = rails.turn().call("echo", {"q": "x"})
    assert calls == ["0:pass", "1:raises", "2:reject"]
    assert result.outcome == "unavailable" and result.reason == "guard"
    assert [r.verdict for r in result.verdicts] == ["pass", "not_evaluated", "reject"]
    assert [(e.guard, e.reason) for e in result.escapes] == [("g1", "raised")]


@settings(max_examples=examples(200), deadline=None)
@given(
    st.lists(
        st.tuples(st.booleans(), st.sampled_from(["invalid_args", "limit", "unavailable"])),
        min_size=1,
        max_size=5,
    )
)
def test_a_rejection_decided_in_the_loop_is_the_one_the_general_step_gives(
    guards: list[tuple[bool, str]],
) -> None:
    from guardrails.middleware._judge import judge as _judge
    from guardrails.middleware._judge import judge_plain as _judge_plain

    made = [
        Guard(
            (lambda r: lambda s: Verdict.REJECT if r else Verdict.PASS)(rejects),
            name=f"g{i}",
            outcome=outcome,
        )
        for i, (rejects, outcome) in enumerate(guards)
    ]
    rails = Guardrails([echo], made)
    turn = rails.turn()
    plan = rails._pipeline.plans["echo"]
    assert plan.plain
    inv = Invocation("echo", {"q": "x"}, {"q": "x"}, turn.context, "c1", plan.tool, turn)
    fast = _judge_plain(plan, inv, evaluate_plain(plan.steps, inv, _POINT), 0)
    general = _judge(plan, inv, [g.evaluate(inv, _POINT) for g in plan.guards], 0)
    if any(rejects for rejects, _ in guards):
        assert type(fast) is ToolResult and type(general) is ToolResult
        assert fast._replace(duration_ns=0, verdicts=()) == general._replace(
            duration_ns=0, verdicts=()
        )
        assert [r._replace(duration_ns=0) for r in fast.verdicts] == [
            r._replace(duration_ns=0) for r in general.verdicts
        ]
    else:
        assert type(fast) is tuple and fast[1:] == general[1:] == ([], Verdict.PASS)  # type: ignore[index]
