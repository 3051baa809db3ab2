"""Hostile objects for code that must read values without running anything of theirs.

``CALLS`` counts every method of these classes that was called, by name: a
test clears it, hands the objects over, and checks it stayed empty.
"""

from __future__ import annotations

from collections import Counter
from typing import Any

CALLS: Counter[str] = Counter()


class LoudStr(str):
    """A ``str`` whose methods a reader could call count and raise: only built-in
    ``str`` code may read it."""

    def __len__(self) -> int:
        CALLS["len"] += 1
        raise RuntimeError("len")

    def __hash__(self) -> int:
        CALLS["hash"] += 1
        raise RuntimeError("hash")

    def __eq__(self, other: object) -> bool:
        CALLS["eq"] += 1
        raise RuntimeError("eq")

    def __bool__(self) -> bool:
        CALLS["bool"] += 1
        raise RuntimeError("bool")

    def __str__(self) -> str:
        CALLS["str"] += 1
        raise RuntimeError("str")

    def encode(self, *args: Any, **kwargs: Any) -> bytes:
        CALLS["encode"] += 1
        raise RuntimeError("encode")


class Shifty:
    """Not text: its hash changes each time it is asked, and its equality lies."""

    def __init__(self) -> None:
        self.asked = 0

    def __hash__(self) -> int:
        self.asked += 1
        CALLS["hash"] += 1
        return self.asked

    def __eq__(self, other: object) -> bool:
        CALLS["eq"] += 1
        return True
