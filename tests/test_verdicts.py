from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

import guardrails
from guardrails import Outcome, Verdict, combine, model_sentence

verdicts = st.sampled_from(list(Verdict))
lists = st.lists(verdicts, max_size=12)


def reference_combine(vs: list[Verdict]) -> Verdict:
    """An independent statement of the SPEC rule, written as a table lookup."""
    present = {v.value for v in vs}
    if "reject" in present:
        return Verdict("reject")
    if "not_evaluated" in present or not present:
        return Verdict("not_evaluated")
    return Verdict("pass")


def test_public_strings_are_exactly_the_spec_vocabulary() -> None:
    assert [v.value for v in Verdict] == ["pass", "reject", "not_evaluated"]
    assert [o.value for o in Outcome] == ["ok", "error", "invalid_args", "limit", "unavailable"]
    assert Verdict.PASS == "pass" and isinstance(Verdict.PASS, str)


def test_no_verdicts_is_not_evaluated() -> None:
    assert combine([]) is Verdict.NOT_EVALUATED
    assert combine(iter(())) is Verdict.NOT_EVALUATED


@given(lists)
def test_matches_reference_implementation(vs: list[Verdict]) -> None:
    assert combine(vs) is reference_combine(vs)


@given(lists, st.randoms())
def test_commutative(vs: list[Verdict], rnd) -> None:  # type: ignore[no-untyped-def]
    shuffled = list(vs)
    rnd.shuffle(shuffled)
    assert combine(shuffled) is combine(vs)


@given(lists, lists, lists)
def test_associative(a: list[Verdict], b: list[Verdict], c: list[Verdict]) -> None:
    # Combining partial results equals combining everything, however grouped;
    # an empty group contributes nothing (not a not_evaluated of its own).
    def part(xs: list[Verdict]) -> list[Verdict]:
        return [combine(xs)] if xs else []

    left = combine(part(part(a) + part(b)) + part(c))
    right = combine(part(a) + part(part(b) + part(c)))
    assert left is right is combine(a + b + c)


@given(lists)
def test_duplicate_insensitive(vs: list[Verdict]) -> None:
    assert combine(vs + vs) is combine(vs)
    assert combine(sorted(set(vs))) is combine(vs)


@given(lists)
def test_reject_absorbs(vs: list[Verdict]) -> None:
    assert combine([*vs, Verdict.REJECT]) is Verdict.REJECT


@given(verdicts)
def test_idempotent(v: Verdict) -> None:
    assert combine([v, v]) is combine([v]) is v


def test_a_boolean_is_not_a_verdict() -> None:
    with pytest.raises(TypeError):
        combine([True])  # type: ignore[list-item]


@pytest.mark.parametrize("outcome", [o for o in Outcome if o is not Outcome.OK])
def test_each_non_ok_outcome_has_one_fixed_sentence(outcome: Outcome) -> None:
    sentence = model_sentence(outcome)
    assert sentence and sentence == model_sentence(outcome)
    assert len({model_sentence(o) for o in Outcome if o is not Outcome.OK}) == 4


def test_invalid_args_sentence_names_parameters_sorted_once() -> None:
    text = model_sentence(Outcome.INVALID_ARGS, ["b", "a", "b"])
    assert text.endswith("Check these parameters: a, b.")


def test_ok_has_no_sentence() -> None:
    with pytest.raises(ValueError):
        model_sentence(Outcome.OK)


def test_public_surface_is_sorted_and_importable() -> None:
    names = guardrails.__all__
    assert names == sorted(names)
    for name in names:
        assert hasattr(guardrails, name), name
    assert len(names) == len(set(names))
