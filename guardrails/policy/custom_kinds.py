"""User-defined value kinds: ``[kinds.NAME]``, a pattern and a normal form.

::

    [kinds.account]
    pattern = "[0-9]{2}-?[0-9]{4}-?[0-9]{7}-?[0-9]{2,3}"
    separators = "-"      # dropped from the normal form
    case = "keep"         # or "lower" (Unicode case folding) or "upper"
    width = true          # invisible characters removed, NFKC (the default)

A string is a value of the kind when, width and case folded and stripped, all
of it matches the pattern (RE2, anchored at both ends) and it is at most
``MAX_VALUE`` characters; its normal form is that string without the
separators. So the pattern describes the value as written (after folding):
it allows the separators itself.

Inside a text (``embedded``, and every text labelled for grounding) a value
is a leftmost-longest match of the pattern in the folded text that is a whole
token (no letter, digit, ``_`` or joining hyphen right before or after it),
put through the same normaliser. Each search reads at most ``SPAN`` bytes of
the text and the next starts where a match ended, so a scan reads each byte
a bounded number of times whatever the text holds.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from ..errors import ConfigurationError
from ..text._normal import fold_width
from ._scan import continues
from .patterns import UNANCHORED, Pattern

__all__ = ["CASES", "MAX_SEPARATORS", "MAX_VALUE", "SPAN", "CustomKind", "find_in_value"]

CASES = ("keep", "lower", "upper")
MAX_VALUE = 128  # characters of one value, folded
MAX_SEPARATORS = 16
_MAX_BYTES = 4 * MAX_VALUE  # a character is at most 4 bytes of UTF-8
SPAN = 2 * _MAX_BYTES  # the bytes one search may read
_BUILT_IN = frozenset({"email", "url", "host", "iban", "phone", "text"})
_NAME = re.compile(r"[a-z][a-z0-9_]{0,31}")  # the policy's own text, never a value
_NO_MATCH = (-1, -1)


@dataclass(frozen=True, slots=True)
class CustomKind:
    """A value kind declared by a policy. Raises ``ConfigurationError`` naming the
    option at fault (``pattern``, ``case``, ``separators``, ``width``)."""

    name: str
    pattern: str
    separators: str = ""
    case: str = "keep"
    width: bool = True
    _compiled: Any = field(default=None, repr=False, compare=False, hash=False)
    _drop: Any = field(default=None, repr=False, compare=False, hash=False)

    def __post_init__(self) -> None:
        if self.name.__class__ is not str or not _NAME.fullmatch(self.name):
            raise ConfigurationError(
                f"kind name {self.name!r} must be a lower-case letter, then up to 31 "
                "lower-case letters, digits or _"
            )
        if self.name in _BUILT_IN:
            raise ConfigurationError(f"{self.name!r} is a built-in kind; give yours another name")
        compiled = Pattern(self.pattern, longest=True)
        if compiled.fullmatch(""):
            raise ConfigurationError("pattern matches the empty string; a value is not empty")
        if self.case not in CASES:
            raise ConfigurationError(f"case must be one of {list(CASES)}, not {self.case!r}")
        seps = self.separators
        if seps.__class__ is not str or len(seps) > MAX_SEPARATORS or any(map(continues, seps)):
            raise ConfigurationError(
                f"separators must be a string of at most {MAX_SEPARATORS} characters, "
                "none a letter, a digit or _"
            )
        if self.width is not True and self.width is not False:
            raise ConfigurationError("width must be true or false")
        object.__setattr__(self, "_compiled", compiled)
        object.__setattr__(self, "_drop", str.maketrans("", "", seps))

    @property
    def value(self) -> str:
        """The kind's name, as ``Kind.value`` is a built-in kind's."""
        return self.name

    def __str__(self) -> str:
        return self.name

    def fold(self, text: str) -> str:
        """Width and case folded, as the kind says (the pattern reads this)."""
        if self.width and not text.isascii():
            text = fold_width(text)
        if self.case == "lower":
            return text.lower() if text.isascii() else text.casefold()
        return text.upper() if self.case == "upper" else text

    def normalise(self, value: str) -> str | None:
        """The normal form of ``value``, or None when it is not a value of this kind."""
        if value.__class__ is not str:
            value = str.__add__(value, "")  # a str subclass: only its characters
        folded = self.fold(value).strip()
        if not folded or len(folded) > MAX_VALUE or not self._compiled.fullmatch(folded):
            return None
        return folded.translate(self._drop) or None

    def find(self, text: str, found: set[str]) -> None:
        """Add the key of every value of this kind that is a whole token of ``text``."""
        if text.__class__ is not str:
            text = str.__add__(text, "")  # a str subclass: only its characters are read
        data = self.fold(text).encode("utf-8", "surrogatepass")
        match, size, prefix = self._compiled.compiled._regexp.Match, len(data), f"{self.name}\x00"
        pos = 0
        while pos < size:
            end = min(size, pos + SPAN)
            start, stop = match(UNANCHORED, data, pos, end)[0]
            if (start, stop) == _NO_MATCH:
                if end >= size:
                    return
                pos = max(pos + 1, end - _MAX_BYTES)  # a value may start in the last part
                continue
            if stop == end and end < size and start > pos:
                pos = start  # cut by the window: read again from its start, whole
                continue
            if start < stop <= start + _MAX_BYTES and not _joined(data, start, stop):
                norm = self.normalise(data[start:stop].decode("utf-8", "surrogatepass"))
                if norm is not None:
                    found.add(prefix + norm)
            pos = max(stop, start + 1)


def _char_before(data: bytes, at: int) -> str:
    if at <= 0:
        return ""
    start = at - 1
    while start > 0 and at - start < 4 and data[start] & 0xC0 == 0x80:
        start -= 1
    return data[start:at].decode("utf-8", "replace")[-1:]


def _char_after(data: bytes, at: int) -> str:
    return data[at : at + 4].decode("utf-8", "replace")[:1] if at < len(data) else ""


def _joined(data: bytes, start: int, stop: int) -> bool:
    """Whether the match ``data[start:stop]`` is part of a longer token."""
    before = _char_before(data, start)
    if continues(before) or (before == "-" and continues(_char_before(data, start - 1))):
        return True
    after = _char_after(data, stop)
    return continues(after) or (after == "-" and continues(_char_after(data, stop + 1)))


def find_in_value(kinds: Iterable[CustomKind], value: Any, found: set[str]) -> set[str]:
    """``find`` over every string (and integer, as written) inside a JSON-like value."""
    kinds = tuple(kinds)
    if not kinds:
        return found
    stack: list[tuple[Any, int]] = [(value, 0)]
    while stack:
        node, depth = stack.pop()
        cls = node.__class__
        if cls is int and node.bit_length() <= 400:  # at most 121 digits
            node, cls = str(node), str
        if cls is str:
            for kind in kinds:
                kind.find(node, found)
        elif depth < 64 and isinstance(node, dict):
            stack.extend((item, depth + 1) for item in node.values())
        elif depth < 64 and isinstance(node, list | tuple):
            stack.extend((item, depth + 1) for item in node)
    return found
