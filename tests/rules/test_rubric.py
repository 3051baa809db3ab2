"""The deterministic rubric: bands sum to 100, no-data answers, computed values, every error."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from guardrails import ConfigurationError, Guardrails, Verdict
from guardrails.rules import Rubric, RubricStatus, rubric

BANDS = {"income": 40, "history": 30, "debt": 30}


def check(scores: Any, total: Any = "sum", **options: Any) -> Any:
    rule = Rubric("credit", BANDS, no_data=("no_data", None), **options)
    output: dict[str, Any] = {"scores": scores}
    if total == "sum":
        total = sum(v for v in scores.values() if isinstance(v, int | float))
    if total is not None:
        output["total"] = total
    return rule.check(output, lambda key: {"history_points": 25}.get(key))  # type: ignore[arg-type]


def test_bands_that_do_not_sum_to_100_fail_at_construction_naming_the_rubric() -> None:
    with pytest.raises(ConfigurationError, match=r"'credit'.*sum to 100, not 90"):
        Rubric("credit", {"a": 50, "b": 40})
    with pytest.raises(ConfigurationError, match="'credit'"):
        Rubric("credit", {"a": 100, "b": 0})
    with pytest.raises(ConfigurationError, match="'credit'"):
        Rubric("credit", {"a": 100}, computed={"b": "x"})


def test_a_full_and_correct_answer_is_complete() -> None:
    result = check(
        {"income": 30, "history": 25, "debt": 10}, computed={"history": "history_points"}
    )
    assert result.status is RubricStatus.COMPLETE and result.points == 65


def test_a_legitimate_no_data_answer_is_not_an_error() -> None:
    result = check({"income": "no_data", "history": None, "debt": 10})
    assert result.status is RubricStatus.COMPLETE
    assert result.no_data == ("income", "history")


def test_a_missing_band_or_total_is_incomplete() -> None:
    assert check({"income": 1, "history": 2}).status is RubricStatus.INCOMPLETE
    assert (
        check({"income": 1, "history": 2, "debt": 3}, total=None).status is RubricStatus.INCOMPLETE
    )


def test_every_error_is_collected_and_any_wrong_value_makes_it_invalid() -> None:
    result = check(
        {"income": 41, "history": 20, "debt": "lots", "extra": 1},
        total=999,
        computed={"history": "history_points"},
    )
    assert result.status is RubricStatus.INVALID
    assert {(i.field, i.problem) for i in result.issues} == {
        ("income", "out_of_range_0_40"),
        ("history", "differs_from_computed"),
        ("debt", "not_a_number"),
        ("extra", "unknown_band"),
        ("total", "differs_from_sum"),
    }


def test_booleans_are_not_scores_and_true_is_not_one() -> None:
    result = check({"income": True, "history": 1, "debt": 1}, total=2)
    assert [i.problem for i in result.issues] == ["not_a_number"]


def test_a_computed_value_the_backend_lacks_is_incomplete() -> None:
    result = check({"income": 1, "history": 2, "debt": 3}, computed={"history": "absent"})
    assert result.status is RubricStatus.INCOMPLETE


def test_as_a_post_run_guard_complete_passes_and_the_rest_reject() -> None:
    rule = rubric("credit", BANDS, computed={"history": "history_points"})
    rails = Guardrails([], [rule])
    turn = rails.turn(values={"history_points": 25})
    good = {"scores": {"income": 30, "history": 25, "debt": 10}, "total": 65}
    assert turn.post_run(structured=good).verdict is Verdict.PASS
    bad = rails.turn(values={"history_points": 20}).post_run(structured=good)
    assert bad.verdict is Verdict.REJECT
    assert bad.verdicts[0].reason == "rubric_invalid"
    partial = turn.post_run(structured={"scores": {"income": 30}, "total": 30})
    assert partial.verdicts[0].reason == "rubric_incomplete"


def test_output_that_is_not_json_or_not_an_object_is_invalid() -> None:
    rails = Guardrails([], [rubric("credit", BANDS)])
    for output in ("{oops", "[1]", '"text"'):
        report = rails.turn().post_run(structured=output)
        assert report.verdict is Verdict.REJECT
        assert report.verdicts[0].evidence.status is RubricStatus.INVALID
    report = rails.turn().post_run(structured={"scores": [1, 2]})
    assert report.verdicts[0].evidence.status is RubricStatus.INVALID


@given(
    st.dictionaries(
        st.sampled_from(["income", "history", "debt", "other"]),
        st.one_of(
            st.integers(-5, 50),
            st.floats(allow_nan=True),
            st.none(),
            st.text(max_size=3),
            st.booleans(),
        ),
    ),
    st.one_of(st.none(), st.integers(0, 100), st.text(max_size=2)),
)
def test_classification_follows_the_issues(scores: dict[str, Any], total: Any) -> None:
    result = check(scores, total=total)
    kinds = {i.status for i in result.issues}
    if RubricStatus.INVALID in kinds:
        assert result.status is RubricStatus.INVALID
    elif kinds:
        assert result.status is RubricStatus.INCOMPLETE
    else:
        assert result.status is RubricStatus.COMPLETE
        assert set(scores) == set(BANDS)
