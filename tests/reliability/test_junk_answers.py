"""Junk answers from guards and hooks stay inside the boundary and are counted.

Reproductions: a ``GuardResult`` whose ``escape``, ``reason`` or ``params`` is a
hostile object used to raise out of ``turn.call`` with its text.
"""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from guardrails import (
    EscapeReason,
    Guardrails,
    GuardResult,
    Invocation,
    Outcome,
    Reason,
    Stop,
    Tool,
    ToolResult,
    Verdict,
    guard,
)

from .conftest import SECRET_MARK

SCHEMA = {"type": "object", "properties": {"q": {"type": "string"}}}


class Loud(str):
    """Text whose comparison, hash, length and str() raise."""

    def __eq__(self, other: object) -> bool:
        raise RuntimeError(SECRET_MARK)

    def __hash__(self) -> int:
        raise RuntimeError(SECRET_MARK)

    def __len__(self) -> int:
        raise RuntimeError(SECRET_MARK)

    def __str__(self) -> str:
        raise RuntimeError(SECRET_MARK)


class Runs:
    def __init__(self) -> None:
        self.count = 0

    def __call__(self, **kwargs: Any) -> str:
        self.count += 1
        return "ran"


JUNK: dict[str, Any] = {
    "escape_loud": GuardResult(Verdict.NOT_EVALUATED, escape=Loud("raised")),  # type: ignore[arg-type]
    "escape_unknown": GuardResult(Verdict.PASS, escape="made_up"),  # type: ignore[arg-type]
    "reason_object": GuardResult(Verdict.PASS, reason=object()),  # type: ignore[arg-type]
    "reason_loud": GuardResult(Verdict.PASS, reason=Loud("ok")),
    "params_loud": GuardResult(Verdict.REJECT, params=Loud("q")),  # type: ignore[arg-type]
    "params_generator": GuardResult(Verdict.REJECT, params=(p for p in ["q"])),  # type: ignore[arg-type]
    "params_not_text": GuardResult(Verdict.REJECT, params=(Loud("q"),)),
    "verdict_text": GuardResult("pass"),  # type: ignore[arg-type]
    "none": None,
    "bool": True,
}


@pytest.mark.parametrize("driver", ["sync", "async"])
@pytest.mark.parametrize("kind", sorted(JUNK))
@pytest.mark.parametrize("fail_closed", [False, True])
def test_a_junk_guard_answer_is_an_invalid_return_escape(
    kind: str, driver: str, fail_closed: bool, ledger: Any
) -> None:
    answer = JUNK[kind]

    @guard(name="junk", fail_closed=fail_closed)
    def junk(call: Invocation) -> Any:
        return answer

    runs = Runs()
    rails = Guardrails([Tool("t", runs, SCHEMA)], [junk])
    if driver == "sync":
        result = rails.call("t", {"q": "x"})
    else:
        result = asyncio.run(rails.acall("t", {"q": "x"}))
    assert ledger.check("junk_answers", result, ("q",)) == []
    assert [(e.guard, e.reason) for e in result.escapes] == [("junk", EscapeReason.INVALID_RETURN)]
    assert runs.count == (0 if fail_closed else 1)
    ledger.add("junk_answers", faults_injected=1, faults_counted=1)


class JunkHook:
    name = "junk_hook"

    def __init__(self, before: Any, after: Any) -> None:
        self._before, self._after = before, after

    def before(self, invocation: Invocation, /) -> Any:
        return self._before

    def after(self, invocation: Invocation, result: ToolResult, /) -> Any:
        return result if self._after is None else self._after


def _shown(answer: Any) -> str:
    """A test id that is the same in every process (xdist workers compare them)."""
    return "object()" if type(answer) is object else repr(answer)


@pytest.mark.parametrize(
    "answer", [object(), ("limit", "x"), Stop("limit", "x"), Loud("stop")], ids=_shown
)
def test_a_hook_that_answers_junk_before_the_tool_stops_the_call(answer: Any, ledger: Any) -> None:
    runs = Runs()
    rails = Guardrails([Tool("t", runs, SCHEMA)], hooks=[JunkHook(answer, None)])
    result = rails.call("t", {"q": "x"})
    assert ledger.check("junk_answers", result, ("q",)) == []
    assert (result.outcome, result.reason, runs.count) == (
        Outcome.UNAVAILABLE,
        Reason.HOOK_FAILED,
        0,
    )
    assert [(e.guard, e.reason) for e in result.escapes] == [
        ("junk_hook", EscapeReason.INVALID_RETURN)
    ]


@pytest.mark.parametrize("answer", [object(), "ok", ("ok",)], ids=_shown)
def test_a_hook_that_answers_junk_after_the_tool_keeps_the_result(answer: Any, ledger: Any) -> None:
    rails = Guardrails([Tool("t", Runs(), SCHEMA)], hooks=[JunkHook(None, answer)])
    result = rails.call("t", {"q": "x"})
    assert type(result) is ToolResult and (result.outcome, result.content) == (Outcome.OK, "ran")
    assert [(e.guard, e.reason) for e in result.escapes] == [
        ("junk_hook", EscapeReason.INVALID_RETURN)
    ]
    assert ledger.check("junk_answers", result, ("q",)) == []
