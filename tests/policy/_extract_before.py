"""The extraction of values from text as it was before every scan was made linear.

Kept as the reference the linear scans are compared with on ordinary text
(``test_extract.py``): they must find exactly what this found there, apart
from the mistakes the linear scans correct, which the tests name one by one.
Its ``://`` scan is quadratic: never give it long hostile text.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from hashlib import blake2b
from typing import Any

from guardrails.policy.kinds import (
    IBAN_LENGTHS,
    Kind,
    domain_of,
    fold,
    iban_checksum_ok,
    normalise_email,
    normalise_phone,
    normalise_text,
    split_url,
)

__all__ = [
    "MAX_TEXT_ITEM",
    "extract",
    "extract_tokens",
    "extract_value",
    "fingerprint",
    "key",
    "number_text",
]

# Lines (and string fields) longer than this are not kept whole as ``text`` values.
MAX_TEXT_ITEM = 512

_EMAIL, _URL, _HOST, _IBAN, _PHONE = (f"{k.value}\x00" for k in Kind if k is not Kind.TEXT)


def key(kind: str, value: str) -> str:
    """The key of one normalised value of one kind (a text value is its own key)."""
    return value if kind == "text" else f"{kind}\x00{value}"


def fingerprint(item: str) -> bytes:
    """A 12-byte digest of a key: what the store keeps, never the value."""
    return blake2b(item.encode("utf-8", "surrogatepass"), digest_size=12).digest()


# -- the scans ------------------------------------------------------------------------

# Left of an anchor, text is read reversed with ``match`` (a ``search`` for a
# pattern ending in ``\Z`` would try every start position).
_LOCAL_REV = re.compile(r"[\w.!#$%&'*+/=?^`{|}~-]{1,64}")
_DOMAIN = re.compile(r"[\w-]{1,63}(?:\.[\w-]{1,63})+")
_URL_TAIL = re.compile(r"[^\s<>\"'`{}|\\^\[\]]+")
_SCHEME_REV = re.compile(r"[A-Za-z0-9+.-]{0,15}[A-Za-z]")
# A bare host (``example.org/news``) is anchored on a dot followed by a letter,
# which prose rarely has (a sentence's dot is followed by a space).
_DOT_LETTER = re.compile(r"\.[A-Za-z]")
_HOST_REV = re.compile(r"[A-Za-z0-9.-]{1,253}")
_HOST_REST = re.compile(r"[A-Za-z0-9-]{0,63}(?:\.[A-Za-z0-9-]{1,63})*(?:/[^\s<>\"'`]*)?")
_TRAILING = ".,;:!?)]}'\""
_EDGES = "\"'`.,;:!?()[]{}<>"
_WORD_REV = re.compile(r"\S{1,256}")
_WORD = re.compile(r"\S{0,256}")

# The shape of a text: ASCII letters as ``a``, digits as ``0``, the separators
# IBANs and phone numbers allow kept, every other ASCII character ``_``.
_SHAPE = str.maketrans(
    {
        **{chr(c): "_" for c in range(128)},
        **{chr(c): "a" for c in range(65, 91)},
        **{chr(c): "a" for c in range(97, 123)},
        **{chr(c): "0" for c in range(48, 58)},
        **{c: c for c in " ().-/+"},
    }
)
_IBAN_BODY = re.compile(r"(?:[ -]?[a0]){11,30}")
_PHONE_SHAPE = re.compile(r"0[0 ().\/-]{5,22}0")
_WORDISH = frozenset("a0")


def extract(text: str, found: set[str] | None = None) -> set[str]:
    """The keys of every value of every kind found in ``text``, added to ``found``."""
    if found is None:
        found = set()
    if "@" in text:
        _emails(text, found)
    if "." in text or "://" in text:
        _urls(text, found)
    shape = text.translate(_SHAPE)
    if "00" in shape:
        _ibans(text, shape, found)
        _phones(text, shape, found)
    _lines(text, found)
    if "/" in text:
        _slashed(text, found)
    return found


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


def extract_tokens(text: str, found: set[str] | None = None) -> set[str]:
    """``extract``, plus each word of ``text`` as a ``text`` value (numbers in one spelling).

    Used for the user's input and the context (short, trusted texts), so a
    single-word value (a name, a code, an amount) the user typed grounds an argument.
    """
    found = extract(text, found)
    for token in fold(text).replace("\x00", "").split():
        token = token.strip(_EDGES)
        if not token:
            continue
        found.add(token)
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


def _left(reversed_pattern: re.Pattern[str], text: str, at: int, width: int) -> str:
    """The longest run just left of ``at`` that ``reversed_pattern`` matches, reversed."""
    window = text[max(0, at - width) : at][::-1]
    match = reversed_pattern.match(window)
    return match.group()[::-1] if match is not None else ""


def _emails(text: str, found: set[str]) -> None:
    at = text.find("@")
    while at != -1:
        local = _left(_LOCAL_REV, text, at, 64)
        domain = _DOMAIN.match(text, at + 1)
        if local and domain is not None:
            address = normalise_email(f"{local.lstrip('.')}@{domain.group()}")
            if address is not None:
                found.add(_EMAIL + address)
                found.add(_HOST + domain_of(address))
        at = text.find("@", at + 1)


def _urls(text: str, found: set[str]) -> None:
    at = text.find("://")
    while at != -1:
        scheme = _left(_SCHEME_REV, text, at, 16)
        tail = _URL_TAIL.match(text, at + 3)
        if scheme and tail is not None:
            _url(f"{scheme}://{tail.group().rstrip(_TRAILING)}", found)
        at = text.find("://", at + 3)
    end = 0
    for dot in _DOT_LETTER.finditer(text):
        at = dot.start()
        if at < end:
            continue  # inside a host already read
        head = _left(_HOST_REV, text, at, 253)
        if not head or head[0] in ".-":
            continue
        start = at - len(head)
        before = text[start - 1] if start else " "
        if before.isalnum() or before in "@/:._-":
            continue  # part of an address or a URL, read above
        rest = _HOST_REST.match(text, at + 1)
        end = rest.end() if rest is not None else at + 1
        _url(text[start:end].rstrip(_TRAILING), found)


def _url(candidate: str, found: set[str]) -> None:
    parts = split_url(candidate)
    if parts is not None:
        found.add(_URL + parts[2])
        found.add(_HOST + parts[1])


def _ibans(text: str, shape: str, found: set[str]) -> None:
    at = shape.find("aa00")
    while at != -1:
        length = IBAN_LENGTHS.get(text[at : at + 2].upper())
        if length is not None and not (at and shape[at - 1] in _WORDISH):
            body = _IBAN_BODY.match(shape, at + 4)
            if body is not None:
                compact = text[at : body.end()].replace(" ", "").replace("-", "").upper()
                candidate = compact[:length]
                if len(candidate) == length and iban_checksum_ok(candidate):
                    found.add(_IBAN + candidate)
        at = shape.find("aa00", at + 1)


def _phones(text: str, shape: str, found: set[str]) -> None:
    for match in _PHONE_SHAPE.finditer(shape):
        start, end = match.span()
        if start and shape[start - 1] in "+(":
            start -= 1
        if (start and shape[start - 1] in _WORDISH) or (
            end < len(shape) and shape[end] in _WORDISH
        ):
            continue
        number = normalise_phone(text[start:end])
        if number is not None:
            found.add(_PHONE + number)


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


def _slashed(text: str, found: set[str]) -> None:
    """Words holding a ``/`` (file paths, identifiers), whole, as ``text`` values."""
    at = text.find("/")
    while at != -1:
        head = _left(_WORD_REV, text, at, 256)
        tail = _WORD.match(text, at)
        end = tail.end() if tail is not None else at + 1
        word = (head + text[at:end]).strip(_EDGES)
        if word and "://" not in word:
            # Folding may make spaces (NFKC of U+00B4 is a space and a combining
            # accent): the value is kept in the normal form an argument would have.
            normal = normalise_text(word)
            if normal:
                found.add(normal)
        at = text.find("/", end)


def iter_keys(found: set[str]) -> Iterator[tuple[str, str]]:
    """``(kind, value)`` of each key (for tests and explanations)."""
    for item in found:
        kind, sep, value = item.partition("\x00")
        yield (kind, value) if sep else ("text", item)
