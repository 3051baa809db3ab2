"""The leak check itself: it must catch what it is meant to catch.

Every family relies on ``Ledger.check``; here a fresh ledger is shown results
that leak (exception text, an argument value, a traceback, a parameter name
the schema does not declare) and results that do not.
"""

from __future__ import annotations

from typing import Any

import pytest

from guardrails import Outcome, ToolResult, Verdict, model_sentence

SECRET_MARK = "sk-live-7f3a9c"


def result(outcome: Outcome, content: str, params: tuple[str, ...] = ()) -> ToolResult:
    return ToolResult("c1", "lookup", outcome, content, Verdict.REJECT, params=params)


LEAKS = {
    "exception_text": result(Outcome.ERROR, "ConnectionError: host 10.0.0.7 refused"),
    "sentence_plus_detail": result(
        Outcome.ERROR, model_sentence(Outcome.ERROR) + " (KeyError: 'amount')"
    ),
    "argument_value": result(Outcome.INVALID_ARGS, "amount=-5 is below 0"),
    "traceback": result(Outcome.ERROR, "Traceback (most recent call last):"),
    "undeclared_name": result(
        Outcome.INVALID_ARGS,
        model_sentence(Outcome.INVALID_ARGS, ["password"]),
        ("password",),
    ),
    "planted_in_ok": result(Outcome.OK, f"token {SECRET_MARK}"),
    "wrong_outcome_sentence": result(Outcome.LIMIT, model_sentence(Outcome.UNAVAILABLE)),
}

CLEAN = {
    "unavailable": result(Outcome.UNAVAILABLE, model_sentence(Outcome.UNAVAILABLE)),
    "invalid_with_names": result(
        Outcome.INVALID_ARGS, model_sentence(Outcome.INVALID_ARGS, ["q"]), ("q",)
    ),
    "invalid_undeclared": result(
        Outcome.INVALID_ARGS, model_sentence(Outcome.INVALID_ARGS, undeclared=True)
    ),
    "ok_output": result(Outcome.OK, "found 3 invoices"),
}


@pytest.mark.parametrize("kind", sorted(LEAKS))
def test_the_check_catches_each_kind_of_leak(kind: str, ledger: Any) -> None:
    fresh = type(ledger)()

    assert fresh.check("meta", LEAKS[kind], ("q",)) != []
    assert fresh.summary()["meta"]["leaks"] == 1


@pytest.mark.parametrize("kind", sorted(CLEAN))
def test_the_check_passes_fixed_sentences_and_tool_output(kind: str, ledger: Any) -> None:
    fresh = type(ledger)()

    assert fresh.check("meta", CLEAN[kind], ("q",)) == []
    assert fresh.summary()["meta"]["leaks"] == 0
