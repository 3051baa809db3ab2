"""Hostile objects for code that must read values without running anything of theirs.

``CALLS`` counts every method of these classes that was called, by name: a
test clears it, hands the objects over, and checks it stayed empty.
"""

from __future__ import annotations

from collections import Counter
from typing import Any

CALLS: Counter[str] = Counter()


def loud(name: str) -> Any:
    """A method that counts its call in ``CALLS[name]`` and raises ``RuntimeError(name)``."""

    def method(self: object, *args: Any, **kwargs: Any) -> Any:
        CALLS[name] += 1
        raise RuntimeError(name)

    return method


class LoudStr(str):
    """A ``str`` whose methods a reader could call count and raise: only built-in
    ``str`` code may read it."""

    __len__ = loud("len")
    __hash__ = loud("hash")
    __eq__ = loud("eq")
    __bool__ = loud("bool")
    __str__ = loud("str")
    encode = loud("encode")


class LoudInt(int):
    """An ``int`` whose conversions count and raise."""

    __index__ = loud("index")
    __int__ = loud("int")


class LoudFloat(float):
    """A ``float`` whose conversions count and raise."""

    __float__ = loud("float")
    hex = loud("hex")


class Masked:
    """Lies about its class: ``isinstance`` reads this property (``type()`` does not)."""

    __class__ = property(loud("__class__"))  # type: ignore[assignment]


class Unprintable:
    """Not text: ``str()`` of it counts and raises."""

    __str__ = loud("str")


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
