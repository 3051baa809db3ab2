"""Whether a string was seen whole, as text or as a value of any kind it parses as."""

from __future__ import annotations

from collections.abc import Callable

from ._extract import key
from ._seen import Seen
from .kinds import Kind, normalise_text, normaliser

__all__ = ["KINDS", "MAX_WHOLE", "Kinds", "grounded_anywhere"]

Kinds = tuple[tuple[str, Callable[[str], str | None]], ...]
# Each built-in kind's key prefix and normaliser (a text value is its own key).
KINDS: Kinds = tuple(
    (f"{kind.value}\x00", normaliser(kind)) for kind in Kind if kind is not Kind.TEXT
)
# A string longer than this is never one labelled value (lines and fields are
# labelled up to 512 characters); reading it as each kind would be wasted work.
MAX_WHOLE = 4_096


def grounded_anywhere(value: str, seen: Seen, need: int, kinds: Kinds = KINDS) -> bool:
    """Whether ``value``, as text or as any kind it parses as whole, was seen in ``need``
    (``kinds``: each kind's key prefix and normaliser, the user-defined ones included)."""
    lookup = seen.lookup
    if lookup(key("text", normalise_text(value))) & need:
        return True
    if len(value) > MAX_WHOLE:
        return False
    for prefix, normalise in kinds:
        norm = normalise(value)
        if norm is not None and lookup(prefix + norm) & need:
            return True
    return False
