"""How deep JSON text nests, found before it is parsed.

``json``'s parser recurses on the C stack, one frame per level, and stops only
at the interpreter's recursion limit: an application that raised that limit
(``sys.setrecursionlimit``) lets a few hundred kilobytes of ``[`` overflow
the stack and kill the process. ``deeper_than`` answers first, in linear
time and without recursion: the text's strings are cut out, and the running
sum of its remaining brackets (``[``/``{`` one up, ``]``/``}`` one down) is
compared with the bound. Text that is not JSON may be counted loosely (an
unterminated string, brackets that do not match); the parser refuses it
anyway.
"""

from __future__ import annotations

import json
import re
from array import array
from itertools import accumulate

__all__ = ["deeper_than"]

_STRINGS = re.compile(r'"[^"\\]*(?:\\.[^"\\]*)*"', re.DOTALL)
_OTHER = re.compile(r"[^\[\]{}]+")
_STEPS = str.maketrans({"[": "\x01", "{": "\x01", "]": "\xff", "}": "\xff"})


def deeper_than(text: str | bytes | bytearray, levels: int) -> bool:
    """True when the arrays and objects of ``text`` nest more than ``levels`` deep."""
    if not isinstance(text, str):
        try:
            text = bytes(text).decode(json.detect_encoding(text), "surrogatepass")
        except (UnicodeDecodeError, LookupError):
            return False  # not text: the parser refuses it without recursing
    if text.count("[") + text.count("{") <= levels:
        return False  # nothing can nest deeper than the brackets that open
    brackets = _OTHER.sub("", _STRINGS.sub("", text))
    steps = array("b")
    steps.frombytes(brackets.translate(_STEPS).encode("latin-1"))  # 0xff reads as -1
    return max(accumulate(steps), default=0) > levels
