"""Confidence thresholds per source."""

from __future__ import annotations

import pytest

from guardrails import ConfigurationError, EscapeReason, Guardrails, Verdict
from guardrails.rules import thresholds

BY_SOURCE = {"registry": 0.6, "social": 0.9}


def verdict(items: object, **options: object) -> object:
    rails = Guardrails([], [thresholds(BY_SOURCE, items="matches", **options)])  # type: ignore[arg-type]
    return rails.turn().post_run(structured={"matches": items})


def test_one_score_is_judged_against_its_own_source() -> None:
    ok = verdict(
        [{"source": "registry", "confidence": 0.7}, {"source": "social", "confidence": 0.95}]
    )
    assert ok.verdict is Verdict.PASS  # type: ignore[attr-defined]
    low = verdict([{"source": "social", "confidence": 0.85}])
    assert low.verdict is Verdict.REJECT  # type: ignore[attr-defined]
    assert low.verdicts[0].evidence["below"] == [  # type: ignore[attr-defined]
        {"item": 0, "source": "social", "score": 0.85, "min": 0.9}
    ]


def test_a_score_that_is_not_a_number_rejects() -> None:
    for score in ("high", None, True, float("nan")):
        report = verdict([{"source": "registry", "confidence": score}])
        assert report.verdict is Verdict.REJECT  # type: ignore[attr-defined]


def test_a_source_without_threshold_fails_open_or_closed() -> None:
    items = [{"source": "forum", "confidence": 0.99}]
    report = verdict(items)
    assert report.verdict is Verdict.NOT_EVALUATED  # type: ignore[attr-defined]
    assert report.escapes[0].reason is EscapeReason.NOT_CONFIGURED  # type: ignore[attr-defined]
    closed = verdict(items, fail_closed=True)
    assert closed.verdict is Verdict.REJECT  # type: ignore[attr-defined]


def test_a_low_score_rejects_even_beside_an_unknown_source() -> None:
    items = [{"source": "forum", "confidence": 0.99}, {"source": "registry", "confidence": 0.1}]
    assert verdict(items).verdict is Verdict.REJECT  # type: ignore[attr-defined]


def test_unreadable_items_do_not_evaluate() -> None:
    assert verdict("nope").verdict is Verdict.NOT_EVALUATED  # type: ignore[attr-defined]
    rails = Guardrails([], [thresholds(BY_SOURCE)])
    assert rails.turn().post_run(structured="[").verdict is Verdict.NOT_EVALUATED


def test_bad_configuration_fails_at_construction() -> None:
    with pytest.raises(ConfigurationError):
        thresholds({})
    with pytest.raises(ConfigurationError):
        thresholds({"a": "high"})  # type: ignore[dict-item]
