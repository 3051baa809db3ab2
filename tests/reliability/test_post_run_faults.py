"""Faults and hostile output at the post_run choke-point.

post_run guards that raise, hang, return a non-verdict or lack configuration;
a backstop action whose tool fails or cannot be bound; a final output from
the model that is deeply nested, not JSON, or not an object. Nothing is raised
to the caller, every escape and backstop action is recorded, and a backstop
call's result carries only a fixed sentence.
"""

from __future__ import annotations

import asyncio
import threading
from typing import Any

import pytest

from guardrails import (
    EscapeReason,
    Guardrails,
    NotConfigured,
    Outcome,
    Reason,
    Tool,
    Verdict,
    guard,
)
from guardrails.rules import required_action
from guardrails.testing import MemoryRecorder

SECRET_MARK = "sk-live-7f3a9c"
NOTIFY_SCHEMA = {
    "type": "object",
    "properties": {"ticket": {"type": "string"}, "reason": {"type": "string"}},
    "required": ["ticket", "reason"],
}


def _raise(exc: BaseException) -> Any:
    def body(_: Any) -> Any:
        raise exc

    return body


FAULTS: dict[str, tuple[Any, EscapeReason]] = {
    "raises": (_raise(RuntimeError(SECRET_MARK)), EscapeReason.RAISED),
    "not_configured": (_raise(NotConfigured(SECRET_MARK)), EscapeReason.NOT_CONFIGURED),
    "returns_string": (lambda _: "reject", EscapeReason.INVALID_RETURN),
    "declines": (lambda _: Verdict.NOT_EVALUATED, EscapeReason.DECLINED),
    "hangs": (None, EscapeReason.TIMEOUT),
}


def escalation_rails(notify: Any, *extra: Any, recorder: Any = None) -> Guardrails:
    needs_human = required_action(
        "notify_human",
        when=lambda run: "escalate" in (run.text or ""),
        arguments={"reason": "promised escalation"},
    )
    tool = Tool("notify_human", notify, NOTIFY_SCHEMA, bind={"ticket": "ticket"}, effect=True)
    return Guardrails([tool], [needs_human, *extra], recorder=recorder)


@pytest.mark.parametrize("driver", ["sync", "async"])
@pytest.mark.parametrize("fault", sorted(FAULTS))
def test_failing_post_run_guard_is_an_escape_and_the_backstop_still_acts(
    fault: str, driver: str, release: threading.Event, ledger: Any
) -> None:
    body, reason = FAULTS[fault]
    # Only the hanging guard may miss its deadline: an answer after the
    # deadline is a timeout, so the others get one a loaded machine cannot miss.
    timeout = 0.3 if body is None else 30.0
    if body is None:

        def body(_: Any) -> Any:
            release.wait(1.0)
            return Verdict.PASS

    broken = guard(body, name=f"post_{fault}", at="post_run", timeout=timeout)
    notified: list[str] = []
    recorder = MemoryRecorder()
    rails = escalation_rails(
        lambda ticket, reason: notified.append(ticket), broken, recorder=recorder
    )
    turn = rails.turn(values={"ticket": "T-1"})

    if driver == "sync":
        report = turn.post_run("I will escalate this to a human.")
    else:
        report = asyncio.run(turn.apost_run("I will escalate this to a human."))

    counted = [(e.guard, e.reason) for e in report.escapes] == [(broken.name, reason)]
    ledger.add("post_run_faults", inputs=1, faults_injected=1, escapes=len(report.escapes))
    ledger.add("post_run_faults", faults_counted=int(counted))
    assert [(e.guard, e.reason) for e in report.escapes] == [(broken.name, reason)]
    assert notified == ["T-1"]
    assert [a.outcome for a in report.actions] == [Outcome.OK]
    assert [kind for kind, _ in recorder.events].count("backstop") == 1


BACKSTOP_FAULTS: dict[str, tuple[Any, dict[str, Any], Outcome, str]] = {
    "tool_raises": (
        _raise(RuntimeError(SECRET_MARK)),
        {"ticket": "T-1"},
        Outcome.ERROR,
        Reason.RAISED,
    ),
    "binding_missing": (
        lambda ticket, reason: "sent",
        {},
        Outcome.UNAVAILABLE,
        Reason.BINDING_UNRESOLVED,
    ),
}


@pytest.mark.parametrize("kind", sorted(BACKSTOP_FAULTS))
def test_failing_backstop_action_is_recorded_once_with_a_fixed_sentence(
    kind: str, ledger: Any
) -> None:
    fn, values, outcome, reason = BACKSTOP_FAULTS[kind]
    recorder = MemoryRecorder()
    rails = escalation_rails(
        fn if kind == "binding_missing" else lambda **kw: fn(kw), recorder=recorder
    )
    turn = rails.turn(values=values)

    first = turn.post_run("let me escalate")
    second = turn.post_run("let me escalate")

    (action,) = first.actions
    assert action.result is not None
    assert ledger.check("post_run_faults", action.result, ("reason",)) == []
    assert action.outcome is outcome and action.result.reason == reason
    # Attempted at most once per rule and turn, and counted.
    assert [a.result for a in second.actions] == [None]
    assert turn.counters["backstop"] == 1
    assert [kind for kind, _ in recorder.events].count("backstop") == 2
    ledger.add("post_run_faults", faults_injected=1, faults_counted=1)


def nested_json(depth: int) -> str:
    return '{"a":' * depth + "1" + "}" * depth


# kind -> (structured output, what RunRecord.structured_error says)
STRUCTURED: dict[str, tuple[Any, str | None]] = {
    "not_json": ('{"score": ', "not_json"),
    "json_list": ("[1, 2, 3]", "not_an_object"),
    "json_number": ("42", "not_an_object"),
    "bytes": (b'{"score": 1}', None),
    # The object and 128 levels inside it (docs/post_run.md): at the bound and one past it.
    "nested_129": (nested_json(129), None),
    "nested_130": (nested_json(130), "too_deep"),
    "nested_200": (nested_json(200), "too_deep"),
    "nested_600": (nested_json(600), "too_deep"),
    "nested_950": (nested_json(950), "too_deep"),
    "nested_100000": (nested_json(100_000), "too_deep"),  # found before the parser recurses
    "huge_text": ('{"note": "' + "x" * 10_000_000 + '"}', None),
    "object": (object(), "not_an_object"),
}


@pytest.mark.parametrize("kind", sorted(STRUCTURED))
def test_hostile_structured_output_never_raises_to_the_caller(kind: str, ledger: Any) -> None:
    seen: list[Any] = []

    @guard(at="post_run")
    def reads_structured(run: Any) -> Verdict:
        seen.append(run.structured_error)
        return Verdict.PASS

    rails = Guardrails([], [reads_structured])

    structured, error = STRUCTURED[kind]

    report = rails.turn().post_run("done", structured=structured)

    ledger.add("post_run_output", inputs=1)
    assert report.verdict is Verdict.PASS
    assert seen == [error]
