"""What a parameter rule asks about provenance: where a value was seen."""

from __future__ import annotations

from typing import Protocol

__all__ = ["Seen"]


class Seen(Protocol):
    """What a rule asks about provenance (``provenance.SessionView`` implements it).

    ``lookup`` gives the bitmask of the sources a key was seen in (0: never
    seen); ``partial`` the mask of the sources whose labels the record may be
    missing (a bound was reached; 0: complete); ``trusted`` is the mask of
    trusted sources; ``mask_of`` the mask of some source names.
    """

    trusted: int

    @property
    def partial(self) -> int: ...

    def find(self, kind: str, value: str, /) -> int: ...

    def lookup(self, item: str, /) -> int: ...

    def mask_of(self, names: frozenset[str], /) -> int: ...
