"""Rewrite: the backend's values overwrite the model's, each change recorded."""

from __future__ import annotations

import pytest

from guardrails import ConfigurationError, EscapeReason, Guardrails, Verdict
from guardrails.rules import Change, rewrite


def test_computed_fields_overwrite_the_models_values() -> None:
    rails = Guardrails([], [rewrite({"total": "total", "tax": lambda run: 20})])
    turn = rails.turn(values={"total": 120})
    report = turn.post_run(structured={"total": 100, "tax": 20, "note": "hi"})
    assert report.structured == {"total": 120, "tax": 20, "note": "hi"}
    assert report.changes == (Change(("total",), 100, 120),)
    assert report.verdict is Verdict.REJECT and report.verdicts[0].reason == "overwritten"


def test_a_number_of_another_type_is_overwritten_too() -> None:
    rails = Guardrails([], [rewrite({"total": "total"})])
    report = rails.turn(values={"total": 120}).post_run(structured={"total": 120.0})
    assert report.changes == (Change(("total",), 120.0, 120),)


def test_equal_values_pass_unchanged() -> None:
    rails = Guardrails([], [rewrite({"total": "total"})])
    report = rails.turn(values={"total": 5}).post_run(structured={"total": 5})
    assert report.verdict is Verdict.PASS and report.changes == ()


def test_a_missing_backend_value_rewrites_nothing_and_is_an_escape() -> None:
    rails = Guardrails([], [rewrite({"total": "total", "tax": "tax"})])
    report = rails.turn(values={"total": 1}).post_run(structured={"total": 0, "tax": 0})
    assert report.structured == {"total": 0, "tax": 0}
    assert report.verdict is Verdict.NOT_EVALUATED
    assert report.escapes[0].reason is EscapeReason.NOT_CONFIGURED


def test_output_that_is_not_an_object_is_not_evaluated() -> None:
    rails = Guardrails([], [rewrite({"total": "total"})])
    for output in ("{", "[1]", "3"):
        report = rails.turn(values={"total": 1}).post_run(structured=output)
        assert report.verdict is Verdict.NOT_EVALUATED
        assert report.structured is None


def test_bad_configuration_fails_at_construction() -> None:
    with pytest.raises(ConfigurationError):
        rewrite({})
    with pytest.raises(ConfigurationError):
        rewrite({"": "x"})
    with pytest.raises(ConfigurationError):
        rewrite({"a": 3})  # type: ignore[dict-item]
