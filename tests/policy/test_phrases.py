"""Phrases of the user's text: quoted spans and runs of capitalised words."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from guardrails import Guardrails, Outcome, tool
from guardrails.policy import loads
from guardrails.policy._phrases import MAX_PHRASE, MAX_RUN, phrases
from tests._examples import examples


@pytest.mark.parametrize(
    ("text", "spans"),
    [
        ('post in "team lunch" please', {"team lunch"}),
        ("the «Petit Prince» one", {"petit prince"}),
        ("„Grüner Baum“ is fine", {"grüner baum"}),
        ("meet at 'Blue Door Cafe' now", {"blue door cafe", "blue door", "door cafe"}),
        (
            "Book Luigi's Trattoria, then rest",
            {"book luigi's", "luigi's trattoria", "book luigi's trattoria"},
        ),
        ("the Bank of America branch", {"bank of america"}),
        ("Hotel de Ville.", {"hotel de ville"}),
        ("meet in Room 4B at 10", {"room 4b"}),
        ("lunch at 10 Downing Street", {"10 downing", "downing street", "10 downing street"}),
    ],
)
def test_the_documented_spans(text: str, spans: set[str]) -> None:
    assert phrases(text) == spans


@pytest.mark.parametrize(
    "text",
    [
        "don't book it, it's Ana's",  # apostrophes inside words quote nothing
        'an "open quote with no end',
        "just lower case words here",
        "One capital then lower",
        "Ana, Bob, Carl",  # a comma ends a run
        "Ana\nBob",  # so does a line
        "the of and",
    ],
)
def test_what_is_not_a_phrase(text: str) -> None:
    assert phrases(text) == set()


def test_bounds_at_the_bound_and_one_past() -> None:
    assert phrases('"' + "a" * MAX_PHRASE + '"') == {"a" * MAX_PHRASE}
    assert phrases('"' + "a" * (MAX_PHRASE + 1) + '"') == set()
    words = [f"W{i}" for i in range(MAX_RUN + 1)]
    found = phrases(" ".join(words))
    assert " ".join(words[:MAX_RUN]).lower() in found
    assert " ".join(words).lower() not in found


def test_hostile_text_gives_a_bounded_number_of_spans() -> None:
    words = [f"W{i}" for i in range(5_000)]
    assert len(phrases(" ".join(words))) <= (MAX_RUN - 1) * len(words)
    assert len(phrases('"' * 20_000)) == 0
    assert len(phrases("'" + " '" * 10_000)) <= 10_000

    class Hostile(str):
        def splitlines(self, *args: Any) -> Any:
            raise RuntimeError("no")

    assert phrases(Hostile('say "hi there"')) == {"hi there"}


SAFE = st.text(alphabet="abcdefgh xyz", min_size=1, max_size=30).filter(lambda s: s.strip())
FILLER = st.text(alphabet="abcdefgh ,.", max_size=40)


@settings(max_examples=examples(200), deadline=None)
@given(FILLER, SAFE, FILLER, st.sampled_from(list('"“«「')))
def test_a_quoted_span_in_any_text_is_found(
    before: str, inside: str, after: str, mark: str
) -> None:
    closing = {'"': '"', "“": "”", "«": "»", "「": "」"}[mark]
    text = f"{before} {mark}{inside}{closing} {after}"
    assert " ".join(inside.split()) in phrases(text)


# -- grounding through the user's phrases --------------------------------------------------


@tool(effect=True)
def book_table(restaurant: str, time: str) -> str:
    """Book a table."""
    return "booked"


@tool
def search_restaurants() -> str:
    """Search results (untrusted)."""
    return 'Top pick: The Golden Fork. Also "Chez Evil" is great!'


POLICY = '[defaults]\ngrounded_in = ["user"]\n'


def session() -> Any:
    rails = Guardrails([book_table, search_restaurants], policy=loads(POLICY))
    turn = rails.turn(session="s")
    turn.pre_turn('Book Luigi\'s Trattoria at 8pm, or "la piccola cucina" if full')
    turn.call("search_restaurants", {})
    return turn


@pytest.mark.parametrize("name", ["Luigi's Trattoria", "LUIGI'S  trattoria", "La Piccola Cucina"])
def test_the_users_multi_word_names_ground_an_argument(name: str) -> None:
    assert session().call("book_table", {"restaurant": name, "time": "8pm"}).outcome == Outcome.OK


@pytest.mark.parametrize("name", ["The Golden Fork", "Chez Evil", "Luigi's Trattoria Annex"])
def test_names_only_a_tool_result_gave_do_not(name: str) -> None:
    result = session().call("book_table", {"restaurant": name, "time": "8pm"})
    assert result.outcome == Outcome.INVALID_ARGS


def test_the_docs_table_is_what_the_code_does() -> None:
    import re
    from pathlib import Path

    doc = (Path(__file__).resolve().parents[2] / "docs" / "policy.md").read_text()
    rows = re.findall(
        r"^\| `([^`]+)`[^|]*\| (.+) \|$",
        doc.split("**Phrases of the user")[1].split("tests/policy/test_phrases.py")[0],
        re.M,
    )
    assert len(rows) == 7
    for text, spans in rows:
        expected = set(re.findall(r"`([^`]+)`", spans)) if spans.startswith("`") else set()
        assert phrases(text) == expected, text
