"""The daily key of ``PaidCall``: the calendar's UTC day, whatever the clock reads.

``PaidCall`` keeps the key of the last day it saw and gives it again while
the clock reads a plain number inside that day, away from its ends; the
property tests compare every key with the calendar's own reading of the same
time, over sequences that cross midnights, go back, land on the last
microseconds of a day and switch between ints and floats.
"""

from __future__ import annotations

import math
from datetime import UTC, datetime
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from guardrails.effects import PaidCall, Usage
from guardrails.store import MemoryStore
from tests._examples import examples
from tests._hostile import LoudFloat

DAY = 86_400


def calendar(now: Any, scope: str = "default") -> str:
    return f"spend:{scope}:day:{datetime.fromtimestamp(now, UTC).strftime('%Y-%m-%d')}"


class Readings:
    """A clock that reads ``now``, set by the test."""

    def __init__(self) -> None:
        self.now: Any = 0.0

    def __call__(self) -> Any:
        return self.now


def paid_call(clock: Readings) -> PaidCall:
    return PaidCall(MemoryStore(), usage=lambda _: Usage(), daily_cap=1.0, clock=clock)


# Days from 1900 to 2200, and times anywhere in them, at their ends to the
# microsecond and below, and within the millisecond the cache leaves to the calendar.
_days = st.integers(min_value=-25_567, max_value=84_000)
_offsets = st.one_of(
    st.floats(min_value=0, max_value=DAY, exclude_max=True),
    st.sampled_from([0.0, 1e-7, 5e-7, 0.0005, 0.001, 0.0010001, 43_200.0]),
    st.sampled_from([DAY - 1e-7, DAY - 4.9e-7, DAY - 5e-7, DAY - 1e-6, DAY - 0.001, DAY - 0.0011]),
)


@st.composite
def times(draw: st.DrawFn) -> int | float:
    day = draw(_days)
    if draw(st.booleans()):
        return day * DAY + draw(st.integers(min_value=0, max_value=DAY - 1))
    return day * DAY + draw(_offsets)


@settings(max_examples=examples(400), deadline=None)
@given(st.lists(times(), min_size=1, max_size=12), st.randoms(use_true_random=False))
def test_every_key_is_the_calendars_day_of_the_same_time(
    readings: list[int | float], random: Any
) -> None:
    # Runs of the same day too, so that the kept key is asked for again.
    sequence = [t for t in readings for _ in range(random.randint(1, 3))]
    clock = Readings()
    paid = paid_call(clock)
    for now in sequence:
        clock.now = now
        assert paid._daily_key() == calendar(now)


def test_the_generated_readings_reach_the_kept_key() -> None:
    """The property above reaches the branch it guards: a key given again from the cache."""
    asked = 0
    read = 0

    @settings(max_examples=examples(200), deadline=None)
    @given(st.lists(times(), min_size=2, max_size=12))
    def count(readings: list[int | float]) -> None:
        nonlocal asked, read
        clock = Readings()
        paid = paid_call(clock)
        from_calendar = paid._calendar_key

        def counted(now: Any) -> str:
            nonlocal read
            read += 1
            return from_calendar(now)

        paid._calendar_key = counted  # type: ignore[method-assign]
        for now in [t for t in readings for _ in range(2)]:
            clock.now = now
            paid._daily_key()
            asked += 1

    count()
    assert (asked - read) / asked > 0.2  # 0.33-0.41 over 25 seeds; a third of the readings


@pytest.mark.parametrize(
    "now",
    [
        10 * DAY - 1e-7,  # rounds to midnight: the next day, as the calendar says
        10 * DAY - 5e-7,
        10 * DAY,
        10 * DAY + 0.0009,
        11 * DAY - 0.0009,
        -1.5,  # before 1970
        -DAY,
    ],
)
@pytest.mark.parametrize("kept", [9, 10, 11])
def test_the_last_microseconds_of_a_day_read_as_the_calendar_does(now: float, kept: int) -> None:
    clock = Readings()
    paid = paid_call(clock)
    clock.now = kept * DAY + 3600.0  # a key kept for the day before, the same day, the next
    paid._daily_key()
    clock.now = now
    assert paid._daily_key() == calendar(now)


def test_a_clock_that_goes_back_a_day_gets_that_days_key() -> None:
    clock = Readings()
    paid = paid_call(clock)
    clock.now = 20 * DAY + 100.0
    assert paid._daily_key() == calendar(20 * DAY)
    clock.now = 19 * DAY + 100.0
    assert paid._daily_key() == calendar(19 * DAY)
    clock.now = 20 * DAY + 200
    assert paid._daily_key() == calendar(20 * DAY)


@pytest.mark.parametrize("now", [math.nan, math.inf, -math.inf, 1e300])
def test_a_time_no_calendar_holds_fails_as_the_calendar_does(now: float) -> None:
    clock = Readings()
    paid = paid_call(clock)
    clock.now = 10 * DAY + 5.0
    paid._daily_key()  # a key kept: it must not answer for these
    clock.now = now
    with pytest.raises((ValueError, OverflowError)):
        calendar(now)
    with pytest.raises((ValueError, OverflowError)):
        paid._daily_key()
    with pytest.raises((ValueError, OverflowError)):
        paid(lambda: None)


@pytest.mark.parametrize(
    "now",
    [True, LoudFloat(10 * DAY + 5.0), "864005.0", None],
    ids=["bool", "float-subclass", "str", "None"],
)
def test_anything_but_an_int_or_a_float_is_read_by_the_calendar(now: Any) -> None:
    """A ``bool``, a ``float`` subclass or no number at all never takes the kept key:
    the calendar reads it (or refuses it) exactly as it did before keys were kept."""
    clock = Readings()
    paid = paid_call(clock)
    clock.now = 10 * DAY + 5.0
    kept = paid._daily_key()
    clock.now = now
    try:
        expected: Any = calendar(now)
    except Exception as exc:  # whatever the calendar raises, the key raises too
        with pytest.raises(type(exc)):
            paid._daily_key()
        return
    assert paid._daily_key() == expected
    if isinstance(now, float):
        assert expected == kept  # the same day, read through the calendar
