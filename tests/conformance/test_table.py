"""The table itself: the page agrees with it, its sentences are the documented ones, every
difference is written in its entry point's page, and a near miss fails the check."""

from __future__ import annotations

import dataclasses
import re
from pathlib import Path

import pytest

from tests.conformance import harness as hs
from tests.conformance import render
from tests.conformance import table as tb
from tests.conformance.test_turn_call import run

ROOT = Path(__file__).parents[2]


def _words(text: str) -> str:
    return re.sub(r"\s+", " ", text)


def test_the_page_is_the_table_rendered() -> None:
    page = render.PAGE.read_text()
    assert render.generated(page) == render.render(), (
        "docs/integrations/conformance.md disagrees with tests/conformance/table.py: "
        "run python -m tests.conformance.render"
    )


@pytest.mark.parametrize(
    "outcome, sentence",
    [("error", tb.ERROR), ("invalid_args", tb.INVALID), ("limit", tb.LIMIT),
     ("unavailable", tb.UNAVAILABLE)],
)  # fmt: skip
def test_the_sentences_are_the_documented_ones(outcome: str, sentence: str) -> None:
    concepts = (ROOT / "docs" / "concepts.md").read_text()
    assert f"| `{outcome}` | {sentence} " in concepts


def test_the_other_literals_are_the_documented_ones() -> None:
    tool_call = _words((ROOT / "docs" / "tool_call.md").read_text())
    assert f'"{tb.UNDECLARED}"' in tool_call
    assert f"the marker `{tb.TRUNCATION_MARKER.strip()}`" in tool_call
    concepts = (ROOT / "docs" / "concepts.md").read_text()
    assert "(+ `Check these parameters: a, b.`" in concepts
    assert tb.MISSING_TO.removeprefix(f"{tb.INVALID} ") == "Check these parameters: to."
    approvals = (ROOT / "docs" / "approvals.md").read_text()
    assert f"| `approval_pending` | {tb.APPROVAL_PENDING} |" in approvals


@pytest.mark.parametrize(
    "entry, row_id",
    [(e.id, r) for e in tb.ENTRY_POINTS.values() for r in e.differences],
)
def test_every_difference_is_written_in_its_entry_points_page(entry: str, row_id: str) -> None:
    point = tb.ENTRY_POINTS[entry]
    page = _words((ROOT / point.docs).read_text())
    assert _words(point.differences[row_id].reason) in page, (point.docs, row_id)
    assert "conformance.md" in page, f"{point.docs} links the conformance page"


@pytest.mark.parametrize(
    "entry", [e.id for e in tb.ENTRY_POINTS.values() if e.no_call_ids is not None]
)
def test_every_missing_call_id_is_written_in_its_entry_points_page(entry: str) -> None:
    point = tb.ENTRY_POINTS[entry]
    page = _words((ROOT / point.docs).read_text())
    assert _words(point.no_call_ids or "") in page, point.docs


def test_every_row_has_one_answer_per_call_and_unique_ids() -> None:
    assert len({row.id for row in tb.ROWS}) == len(tb.ROWS)
    for row in tb.ROWS:
        assert len(row.expected.answers) == len(row.calls), row.id
    for entry in tb.ENTRY_POINTS.values():
        assert set(entry.differences) <= set(tb.ROW), entry.id
        for row_id, difference in entry.differences.items():
            if difference.expected is not None:
                assert len(difference.expected.answers) == len(tb.ROW[row_id].calls)


# -- the check fails on near misses --------------------------------------------------------

ROWS = ["valid", "fail_open", "fail_closed", "parallel", "oversized", "structured"]


def _near_misses(observed: hs.Observed) -> list[tuple[str, hs.Observed]]:
    first = observed.answers[0]
    text = first.text or ""
    misses = [
        ("one character off", [dataclasses.replace(first, text=text[:-1] + "?")]),
        ("error flag flipped", [dataclasses.replace(first, is_error=not first.is_error)]),
        ("no error flag", [dataclasses.replace(first, is_error=None)]),
        ("an image too", [dataclasses.replace(first, images=(("image/png", "AA=="),))]),
        ("structured content that differs", [dataclasses.replace(first, structured={"x": 1})]),
    ]
    out = [
        (why, dataclasses.replace(observed, answers=(*answers, *observed.answers[1:])))
        for why, answers in misses
    ]
    span = observed.spans[0]
    out += [
        ("a body ran twice", dataclasses.replace(observed, ran=(*observed.ran, "balance"))),
        ("an audit row lost", dataclasses.replace(observed, audit=observed.audit[:-1])),
        ("a span lost", dataclasses.replace(observed, spans=observed.spans[1:])),
        ("an escape more", dataclasses.replace(
            observed, spans=(dataclasses.replace(span, escapes=span.escapes + 1),
                             *observed.spans[1:]))),
        ("status flipped", dataclasses.replace(
            observed, spans=(dataclasses.replace(span, error=not span.error),
                             *observed.spans[1:]))),
    ]  # fmt: skip
    return out


@pytest.mark.parametrize("row_id", ROWS)
def test_a_near_miss_fails_the_check(row_id: str) -> None:
    row = tb.ROW[row_id]
    observed = run(row)
    hs.check("turn.call", row, observed)
    for why, missed in _near_misses(observed):
        with pytest.raises(AssertionError):
            hs.check("turn.call", row, missed)
            pytest.fail(f"{row_id}: {why} passed the check")
