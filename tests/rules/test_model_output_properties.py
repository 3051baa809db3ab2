"""The post_run rules read model output: on any JSON they decide, and never raise."""

from __future__ import annotations

import json
from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from guardrails import EscapeReason, Guardrails, Verdict, tool
from guardrails.rules import Capture, provenance, rewrite, rubric, thresholds

_scalar = st.none() | st.booleans() | st.integers(-5, 120) | st.floats() | st.text(max_size=6)
_json = st.recursive(
    _scalar,
    lambda inner: (
        st.lists(inner, max_size=4)
        | st.dictionaries(
            st.sampled_from(["scores", "total", "items", "results", "id", "status", "a", "0"]),
            inner,
            max_size=5,
        )
    ),
    max_leaves=25,
)
_claims = st.fixed_dictionaries(
    {
        "results": st.lists(
            st.fixed_dictionaries(
                {
                    "id": st.sampled_from(["A-1", "B-2", 7, None, True]),
                    "status": st.sampled_from(["found", "not_found", 3]),
                }
            ),
            max_size=5,
        )
    }
)


@tool
def find(key: str) -> dict[str, Any]:
    """Find."""
    return {"id": key}


capture = Capture({"find": "id"})
RAILS = Guardrails(
    [find],
    [
        provenance(capture, claims="results"),
        rubric("r", {"a": 50, "b": 50}),
        thresholds({"s": 0.5}),
        rewrite({"total": "total", "items.0.x": "x"}),
    ],
    hooks=[capture],
)


@given(st.one_of(_json, _json.map(json.dumps), st.text(max_size=30), _claims))
def test_every_rule_decides_on_any_output_and_none_raises(output: Any) -> None:
    turn = RAILS.turn(values={"total": 10, "x": 1})
    turn.call("find", {"key": "A-1"})
    report = turn.post_run(structured=output)
    assert {r.guard for r in report.verdicts} == {"provenance", "r", "thresholds", "rewrite"}
    assert all(isinstance(r.verdict, Verdict) for r in report.verdicts)
    assert not any(e.reason is EscapeReason.RAISED for e in report.escapes), report.escapes


@given(_claims)
def test_provenance_downgrades_exactly_the_found_claims_without_a_trace(output: Any) -> None:
    turn = RAILS.turn(values={"total": 10, "x": 1})
    turn.call("find", {"key": "A-1"})
    report = turn.post_run(structured=output)
    assert report.structured is not None
    for before, after in zip(output["results"], report.structured["results"], strict=True):
        traced = before["id"] == "A-1"
        if before["status"] == "found" and not traced:
            assert after["status"] == "not_found"
        else:
            assert after == before
