"""Values of each kind found inside longer text (an address inside a mail body).

``extract(text)`` returns the set of keys of the values found: ``key(kind,
normalised value)``, one string each (``"email\\x00bob@example.com"``).
Strings, not tuples: a 1 MB result holds thousands of values, and tuples
would wake the cyclic garbage collector. ``fingerprint`` turns a key into the
12-byte digest the store keeps. Everything found is normalised with its
kind's own function (``kinds.py``), so a value matches however it was spelled.

Every scan is linear in the text, whatever the text holds: addresses and
links (``_links``), IBANs and phone numbers (``_codes``), lines and words
holding a ``/`` (here). Each finds a cheap anchor in C and reads from it only
its own token, once (``_scan.Scan``); a value is a whole token. See
docs/policy.md, "What is found in text", for what each scan picks out.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from hashlib import blake2b
from typing import Any

from ._codes import SHAPE, ibans, phones
from ._links import emails, hosts, links
from ._punct import EDGES
from ._scan import Scan, run_end
from .kinds import fold, normalise_text

__all__ = [
    "MAX_TEXT_ITEM",
    "extract",
    "extract_tokens",
    "extract_value",
    "fingerprint",
    "key",
    "number_text",
]

# Lines, string fields and slashed words longer than this are not kept whole as ``text`` values.
MAX_TEXT_ITEM = 512


def key(kind: str, value: str) -> str:
    """The key of one normalised value of one kind (a text value is its own key)."""
    return value if kind == "text" else f"{kind}\x00{value}"


def fingerprint(item: str) -> bytes:
    """A 12-byte digest of a key: what the store keeps, never the value."""
    return blake2b(item.encode("utf-8", "surrogatepass"), digest_size=12).digest()


def extract(text: str, found: set[str] | None = None) -> set[str]:
    """The keys of every value of every kind found in ``text``, added to ``found``."""
    if found is None:
        found = set()
    text = _plain(text)
    scan = Scan(text, found)
    if "@" in text:
        emails(scan)
    if "://" in text:
        links(scan)
    if "." in text:
        hosts(scan)
    shape = text.translate(SHAPE)
    if "00" in shape:
        ibans(scan, shape)
        phones(scan, shape)
    _lines(text, found)
    if "/" in text:
        _slashed(scan)
    return found


def _plain(text: str) -> str:
    # A str subclass may override len(), find(), translate()...: only its
    # characters are read, copied by str's own code.
    return text if text.__class__ is str else str.__add__(text, "")


def extract_value(value: Any, found: set[str] | None = None) -> set[str]:
    """``extract`` over every string (and number, as text) inside a JSON-like value."""
    if found is None:
        found = set()
    stack: list[tuple[Any, int]] = [(value, 0)]
    while stack:
        node, depth = stack.pop()
        cls = node.__class__
        if cls is str:
            extract(node, found)
        elif cls is int or cls is float:
            spelled = number_text(node)
            if spelled is not None:
                found.add(spelled)
        elif depth < 64 and isinstance(node, dict):
            for k, item in node.items():
                stack.append((k, depth + 1))
                stack.append((item, depth + 1))
        elif depth < 64 and isinstance(node, list | tuple):
            stack.extend((item, depth + 1) for item in node)
    return found


def number_text(value: Any) -> str | None:
    """One spelling per number (``120``, ``120.0`` and ``1.2e2`` are ``120``); None if not one."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    if isinstance(value, float):
        if value != value or value in (float("inf"), float("-inf")):
            return None
        if value.is_integer() and abs(value) < 2**63:
            return str(int(value))
        return repr(value)
    return str(value)


_NUMBER_DROP = str.maketrans("", "", ",_")


_POSSESSIVE = ("'s", "’s")


def extract_tokens(text: str, found: set[str] | None = None) -> set[str]:
    """``extract``, plus each word of ``text`` as a ``text`` value (numbers in one spelling,
    a possessive's name without its ``'s`` too).

    Used for the user's input and the context (short, trusted texts), so a
    single-word value (a name, a code, an amount) the user typed grounds an argument.
    """
    text = _plain(text)
    found = extract(text, found)
    # Each distinct word once: a text of one word repeated costs one word.
    for token in set(fold(text).replace("\x00", "").split()):
        token = token.strip(EDGES)
        if not token:
            continue
        found.add(token)
        if token.endswith(_POSSESSIVE) and len(token) > 2:
            found.add(token[:-2])  # "Tom's" names Tom too
        head = token.lstrip("+-$€£").translate(_NUMBER_DROP)
        if head[:1].isdigit():
            try:
                number = float(head)
            except ValueError:
                continue
            spelled = number_text(-number if token.startswith("-") else number)
            if spelled is not None:
                found.add(spelled)
    return found


def _text_keys(candidate: str) -> tuple[str, ...]:
    # Folding may make spaces (NFKC of U+00B4 is a space and a combining
    # accent): the value is kept in the normal form an argument would have.
    normal = normalise_text(candidate)
    return (normal,) if normal else ()


# -- text values ----------------------------------------------------------------------


def _lines(text: str, found: set[str]) -> None:
    if len(text) <= MAX_TEXT_ITEM:
        found.add(normalise_text(text))
    if "\n" not in text:
        return
    folded = fold(text)
    if "\x00" in folded:
        folded = folded.replace("\x00", "")
    lines = folded.splitlines()
    if max(map(len, lines)) > MAX_TEXT_ITEM:
        lines = [line for line in lines if len(line) <= MAX_TEXT_ITEM]
    # In ASCII text without tabs or double spaces, collapsing whitespace is a
    # strip, done in C over every line.
    if folded.isascii() and "  " not in folded and "\t" not in folded and "\x1f" not in folded:
        found.update(map(str.strip, lines))
    else:
        found.update([" ".join(line.split()) for line in lines])
    found.discard("")


_WORD_REV = re.compile(rf"\S{{1,{MAX_TEXT_ITEM + 1}}}")
_WORD_END = re.compile(r"\S*")


def _slashed(scan: Scan) -> None:
    """Words holding a ``/`` (file paths, identifiers), whole, as ``text`` values."""
    text = scan.text
    at = text.find("/")
    while at != -1:
        start = at - scan.left(_WORD_REV, at)
        end = run_end(_WORD_END, text, at)
        if end - start <= MAX_TEXT_ITEM:
            word = text[start:end].strip(EDGES)
            if word and "://" not in word:
                scan.add(word, _text_keys)
        at = text.find("/", end)


def iter_keys(found: set[str]) -> Iterator[tuple[str, str]]:
    """``(kind, value)`` of each key (for tests and explanations)."""
    for item in found:
        kind, sep, value = item.partition("\x00")
        yield (kind, value) if sep else ("text", item)
