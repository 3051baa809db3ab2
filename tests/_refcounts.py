"""Reference counts before and after many calls into compiled code, read so that other
threads cannot fail the check.

A probe the test made itself is held only by the test: its count must not move at
all. A probe the whole process shares (a one-character or interned string, an enum
member, a class) is also held by whatever else runs, and a store thread of an earlier
test that drops a row holding it moves its count by one; a leak in the code under test
moves it by one per call. Such probes are checked against half the number of calls.
"""

from __future__ import annotations

import sys
from typing import Any

SHARED = 64
"""A probe with at least this many references before the calls is shared with the process."""


def counts(probes: list[Any]) -> list[int]:
    return [sys.getrefcount(probe) for probe in probes]


def assert_kept(
    probes: list[Any], before: list[int], calls: int, shared: tuple[Any, ...] = ()
) -> None:
    """Every probe's count is as ``before``: exactly for the test's own objects, within
    ``calls // 2`` for objects the process shares (``calls``: how often each was handed
    over): those in ``shared`` (the enum members and classes the code hands out) and
    any with ``SHARED`` references or more."""
    after = counts(probes)
    for probe, was, now in zip(probes, before, after, strict=True):
        if was < SHARED and not any(probe is other for other in shared):
            assert now == was, f"{probe!r:.60}: {was} references before, {now} after"
        else:
            assert abs(now - was) < calls // 2, f"{probe!r:.60}: {was} before, {now} after"
