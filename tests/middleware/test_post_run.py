"""The post_run choke-point: the run record, backstop actions, rewrites, records."""

from __future__ import annotations

from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from guardrails import (
    EscapeReason,
    Guardrails,
    GuardResult,
    Invocation,
    Outcome,
    Verdict,
    guard,
    tool,
)
from guardrails.middleware.post_run import BACKSTOP_COUNTER, RunRecord, run_record
from guardrails.rules import Change, Rewrite, required_action, rewrite
from guardrails.testing import MemoryRecorder
from guardrails.verdicts import ChokePoint

CALLS: list[str] = []


@tool(bind={"customer": "customer_id"}, effect=True)
def notify_human(customer: str, reason: str) -> str:
    """Escalate to a person."""
    CALLS.append(f"{customer}:{reason}")
    return "ticket-1"


@tool
def flaky_notify(reason: str) -> str:
    """An escalation channel that is down."""
    CALLS.append("flaky")
    raise ConnectionError("pager at 10.0.0.9 refused, token=abc")


@tool
def lookup(key: str) -> dict[str, Any]:
    """Look something up."""
    return {"key": key}


def escalation_promised(run: RunRecord) -> bool:
    return "escalate" in (run.text or "")


def engine(*guards: Any, recorder: MemoryRecorder | None = None) -> Guardrails:
    return Guardrails([notify_human, flaky_notify, lookup], guards, recorder=recorder)


def setup_function() -> None:
    CALLS.clear()


def test_without_post_run_guards_the_report_is_not_evaluated_and_keeps_the_output() -> None:
    report = engine().turn().post_run("done", structured={"a": 1})
    assert report.verdict is Verdict.NOT_EVALUATED
    assert report.text == "done" and report.structured == {"a": 1}
    assert report.actions == () and report.changes == ()


def test_the_run_record_holds_every_call_with_outcome_and_value() -> None:
    seen: list[RunRecord] = []

    @guard(at="post_run")
    def look(run: RunRecord) -> Verdict:
        seen.append(run)
        return Verdict.PASS

    turn = engine(look).turn(tenant="t")
    turn.call("lookup", {"key": "k"})
    turn.call("nope", {})
    report = turn.post_run("text")
    [run] = seen
    assert [(r.tool, r.outcome) for r in run.results] == [
        ("lookup", Outcome.OK),
        ("nope", Outcome.UNAVAILABLE),
    ]
    assert run.results[0].value == {"key": "k"}
    assert run.called_ok("lookup") and not run.called_ok("nope")
    assert run.context.tenant == "t" and run.text == "text"
    assert report.verdict is Verdict.PASS


def test_required_action_is_performed_through_tool_call_with_bound_arguments() -> None:
    recorder = MemoryRecorder()
    rule = required_action("notify_human", when=escalation_promised, arguments={"reason": "r"})
    turn = engine(rule, recorder=recorder).turn(values={"customer_id": "c-1"})
    report = turn.post_run("I will escalate this.")
    [action] = report.actions
    assert (action.guard, action.tool, action.outcome) == (
        "required_notify_human",
        "notify_human",
        Outcome.OK,
    )
    assert CALLS == ["c-1:r"]
    assert turn.counters[BACKSTOP_COUNTER] == 1
    assert report.verdict_of("required_notify_human").verdict is Verdict.REJECT  # type: ignore[union-attr]
    assert [k for k, _ in recorder.events] == ["backstop", "post_run"]
    assert recorder.events[0][1] is action
    assert recorder.results[-1].tool == "notify_human"


def test_required_action_is_not_performed_when_done_or_not_needed() -> None:
    rule = required_action("notify_human", when=escalation_promised, arguments={"reason": "r"})
    turn = engine(rule).turn(values={"customer_id": "c-1"})
    assert turn.post_run("all fine").actions == ()
    turn.call("notify_human", {"reason": "model did it"})
    report = turn.post_run("I will escalate this.")
    assert report.actions == () and report.verdict is Verdict.PASS
    assert CALLS == ["c-1:model did it"]


def test_a_failing_required_tool_is_recorded_once_and_never_retried() -> None:
    rule = required_action("flaky_notify", when=escalation_promised, arguments={"reason": "r"})
    turn = engine(rule).turn()
    report = turn.post_run("I will escalate this.")
    [action] = report.actions
    assert action.outcome is Outcome.ERROR
    assert action.result is not None and "10.0.0.9" not in action.result.content
    again = turn.post_run("I will escalate this.")
    [skipped] = again.actions
    assert skipped.result is None
    assert CALLS == ["flaky"]
    assert turn.counters[BACKSTOP_COUNTER] == 1


def test_backstop_calls_a_tool_the_model_was_not_offered_and_restores_the_offer() -> None:
    rule = required_action("notify_human", when=escalation_promised, arguments={"reason": "r"})
    turn = engine(rule).turn(values={"customer_id": "c"})
    turn.offer(["lookup"])
    report = turn.post_run("escalate")
    assert report.actions[0].outcome is Outcome.OK
    assert turn.offered == frozenset({"lookup"})


def test_tool_call_guards_apply_to_backstop_actions() -> None:
    @guard(outcome="limit", tools=["notify_human"])
    def paused(call: Invocation) -> Verdict:
        return Verdict.REJECT

    rule = required_action("notify_human", when=escalation_promised, arguments={"reason": "r"})
    turn = engine(rule, paused).turn(values={"customer_id": "c"})
    [action] = turn.post_run("escalate").actions
    assert action.outcome is Outcome.LIMIT
    assert CALLS == []


def test_a_required_action_on_an_unknown_tool_is_unavailable_not_a_crash() -> None:
    rule = required_action("page_oncall", when=lambda run: True)
    [action] = engine(rule).turn().post_run("x").actions
    assert action.outcome is Outcome.UNAVAILABLE


def test_structured_output_that_is_not_json_or_not_an_object_is_flagged() -> None:
    turn = engine().turn()
    assert run_record(turn, None, "{not json").structured_error == "not_json"
    assert run_record(turn, None, "[1, 2]").structured_error == "not_an_object"
    assert run_record(turn, None, 42).structured_error == "not_an_object"
    assert run_record(turn, None, '{"a": 1}').structured == {"a": 1}
    assert run_record(turn, {"a": 1}, None).structured == {"a": 1}


def test_output_as_a_message_with_content_blocks_gives_its_text() -> None:
    turn = engine().turn()
    message = {
        "role": "assistant",
        "content": [{"type": "text", "text": "hi"}, {"type": "tool_use", "id": "x"}],
    }
    assert run_record(turn, message, None).text == "hi"
    assert run_record(turn, {"content": "a field"}, None).structured == {"content": "a field"}


def test_a_rewrite_overwrites_a_copy_and_reports_every_change() -> None:
    answer = {"total": 99, "lines": [{"price": 5}]}
    rule = rewrite({"total": "total", "lines.0.price": lambda run: 7, "currency": "currency"})
    turn = engine(rule).turn(values={"total": 120, "currency": "EUR"})
    report = turn.post_run(structured=answer)
    assert report.structured == {"total": 120, "lines": [{"price": 7}], "currency": "EUR"}
    assert answer == {"total": 99, "lines": [{"price": 5}]}
    assert report.changes == (
        Change(("total",), 99, 120),
        Change(("lines", 0, "price"), 5, 7),
        Change(("currency",), None, "EUR"),
    )


def test_a_fail_open_rewrite_changes_nothing() -> None:
    @guard(at="post_run")
    def declines(run: RunRecord) -> GuardResult:
        return GuardResult.not_evaluated(
            "x", evidence=Rewrite((Change(("a",), 1, 2),)), escape=EscapeReason.NOT_CONFIGURED
        )

    report = engine(declines).turn().post_run(structured={"a": 1})
    assert report.structured == {"a": 1} and report.changes == ()
    assert report.escapes[0].reason is EscapeReason.NOT_CONFIGURED
    assert report.escapes[0].choke_point is ChokePoint.POST_RUN


def test_a_raising_post_run_guard_is_an_escape_and_nothing_is_done() -> None:
    @guard(at="post_run")
    def broken(run: RunRecord) -> Verdict:
        raise RuntimeError("no")

    report = engine(broken).turn().post_run("x")
    assert report.verdict is Verdict.NOT_EVALUATED
    assert report.escapes[0].reason is EscapeReason.RAISED


async def test_apost_run_matches_post_run() -> None:
    @guard(at="post_run")
    async def async_check(run: RunRecord) -> Verdict:
        return Verdict.PASS

    rule = required_action("notify_human", when=escalation_promised, arguments={"reason": "a"})
    turn = engine(rule, async_check).turn(values={"customer_id": "c"})
    report = await turn.apost_run("escalate", structured='{"x": 1}')
    sync_turn = engine(rule).turn(values={"customer_id": "c"})
    sync = sync_turn.post_run("escalate", structured='{"x": 1}')
    assert [a.outcome for a in report.actions] == [a.outcome for a in sync.actions] == [Outcome.OK]
    assert report.structured == sync.structured == {"x": 1}
    assert CALLS == ["c:a", "c:a"]


_json = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(max_size=5),
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=3), inner, max_size=3)
    ),
    max_leaves=10,
)


@given(st.one_of(_json, st.text(max_size=20)))
def test_any_structured_output_gives_a_dict_or_a_reason(value: Any) -> None:
    turn = engine().turn()
    run = run_record(turn, None, value)
    if run.structured is None:
        assert run.structured_error in (None, "not_json", "not_an_object")
        assert (value is None) == (run.structured_error is None)
    else:
        assert run.structured_error is None
        assert isinstance(run.structured, dict)
