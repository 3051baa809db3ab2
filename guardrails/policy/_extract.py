"""Values of each kind found inside longer text (an address inside a mail body).

``extract(text)`` returns the set of keys of the values found: ``key(kind,
normalised value)``, one string each (``"email\\x00bob@example.com"``).
Strings, not tuples: a 1 MB result holds thousands of values, and tuples
would wake the cyclic garbage collector. ``fingerprint`` turns a key into the
12-byte digest the store keeps. Everything found is normalised with its
kind's own function (``kinds.py``), so a value matches however it was spelled.

Every scan is linear in the text, whatever the text holds. Each looks for a
cheap anchor in C (a pattern that starts with a literal: ``@``, ``://``, a
dot before a letter; ``aa00`` and digits in a "shape" of the text where
letters are ``a`` and digits ``0``), and from each anchor reads only its
own token: the text left of an anchor is read in a reversed copy of the text
made once (``_Scan.left``), at most as far as a token may reach, and a
token's characters are read by the anchors inside it once (a run already
read is skipped). A value is a whole token: one that a letter, a digit, an
underscore or a joining hyphen continues is not read out of it. The links
of one run of link characters are read so that their characters add up to
at most twice the run (``_links``). See docs/policy.md, "What is found in
text", for what each scan picks out.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator
from hashlib import blake2b
from typing import Any

from ._punct import EDGES, TRAILING, URL_STOPS, strip_trailing
from .kinds import (
    IBAN_LENGTHS,
    Kind,
    domain_of,
    fold,
    normalise_email,
    normalise_iban,
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

# Lines, string fields and slashed words longer than this are not kept whole as ``text`` values.
MAX_TEXT_ITEM = 512

_EMAIL, _URL, _HOST, _IBAN, _PHONE = (f"{k.value}\x00" for k in Kind if k is not Kind.TEXT)


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
    scan = _Scan(text, found)
    if "@" in text:
        _emails(scan)
    if "://" in text:
        _links(scan)
    if "." in text:
        _hosts(scan)
    shape = text.translate(_SHAPE)
    if "00" in shape:
        _ibans(scan, shape)
        _phones(scan, shape)
    _lines(text, found)
    if "/" in text:
        _slashed(scan)
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
    # Each distinct word once: a text of one word repeated costs one word.
    for token in set(fold(text).replace("\x00", "").split()):
        token = token.strip(EDGES)
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


# -- one scan of one text -----------------------------------------------------------


_Reader = Callable[[str], tuple[str, ...]]


class _Scan:
    """One text being scanned: what was found, its reversed copy, the candidates tried."""

    __slots__ = ("_rev", "found", "size", "text", "tried")

    def __init__(self, text: str, found: set[str]) -> None:
        self.text = text
        self.size = len(text)
        self.found = found
        self.tried: dict[_Reader, dict[str, tuple[str, ...]]] = {}
        self._rev: str | None = None

    def left(self, pattern: re.Pattern[str], at: int) -> int:
        """How many characters just left of ``at`` the reversed ``pattern`` matches."""
        if self._rev is None:
            self._rev = self.text[::-1]
        match = pattern.match(self._rev, self.size - at)
        return 0 if match is None else match.end() - (self.size - at)

    def add(self, candidate: str, read: _Reader) -> None:
        """The keys ``read`` makes of ``candidate`` (each candidate read once per text)."""
        tried = self.tried.get(read)
        if tried is None:
            tried = self.tried[read] = {}
        keys = tried.get(candidate)
        if keys is None:
            keys = tried[candidate] = read(candidate)
        self.found.update(keys)

    def joined_before(self, at: int) -> bool:
        """Whether the token at ``at`` continues to its left (a word character, a joining hyphen)."""
        text = self.text
        if at == 0:
            return False
        before = text[at - 1]
        return _continues(before) or (before == "-" and at > 1 and _continues(text[at - 2]))

    def joined_after(self, end: int) -> bool:
        """Whether the token ending at ``end`` continues to its right."""
        text = self.text
        if end >= self.size:
            return False
        after = text[end]
        return _continues(after) or (
            after == "-" and end + 1 < self.size and _continues(text[end + 1])
        )


def _end(pattern: re.Pattern[str], text: str, at: int) -> int:
    """Where a run that ``pattern`` (which may match nothing) reads from ``at`` ends."""
    match = pattern.match(text, at)
    return at if match is None else match.end()


def _continues(char: str) -> bool:
    return char.isalnum() or char == "_"


def _email_keys(candidate: str) -> tuple[str, ...]:
    address = normalise_email(candidate)
    return () if address is None else (_EMAIL + address, _HOST + domain_of(address))


def _url_keys(candidate: str) -> tuple[str, ...]:
    parts = split_url(candidate)
    return () if parts is None else (_URL + parts[2], _HOST + parts[1])


def _iban_keys(candidate: str) -> tuple[str, ...]:
    iban = normalise_iban(candidate)
    return () if iban is None else (_IBAN + iban,)


def _phone_keys(candidate: str) -> tuple[str, ...]:
    number = normalise_phone(candidate)
    return () if number is None else (_PHONE + number,)


def _text_keys(candidate: str) -> tuple[str, ...]:
    # Folding may make spaces (NFKC of U+00B4 is a space and a combining
    # accent): the value is kept in the normal form an argument would have.
    normal = normalise_text(candidate)
    return (normal,) if normal else ()


def _sentence_cut(host: str) -> str | None:
    """``host`` without a capitalised word run into it after a lower-case top label.

    ``www.example.com.They`` is ``www.example.com`` followed by a sentence
    that lacks its space; both spellings are kept.
    """
    rest, dot, last = host.rpartition(".")
    if not dot or not last.isascii() or not last.isalpha() or not last[0].isupper():
        return None
    if not last[1:].islower() and last[1:]:
        return None
    top = rest.rpartition(".")
    if not top[1] or not top[2].isascii() or not top[2].isalpha() or not top[2].islower():
        return None
    return rest


# -- addresses and links ---------------------------------------------------------------

# The characters RFC 5322 allows in a local part, less "/", "=", "?" and "&",
# which in text separate a path, a key or a query from an address.
_LOCAL_CHARS = r"\w.!#$%'*+^`{|}~-"
# Read back from the "@": one past the limit, to know a longer run.
_LOCAL_REV = re.compile(f"[{_LOCAL_CHARS}]{{1,65}}")
# Quotes, brackets and dots that open an address in prose: not part of it.
_LOCAL_OPENERS = "'`{|}."
_AT = re.compile(f"@(?<=[{_LOCAL_CHARS}]@)(?=[\\w-]{{1,63}}\\.[\\w-])")
_DOMAIN = re.compile(r"[\w-]{1,63}(?:\.[\w-]{1,63})+")


def _emails(scan: _Scan) -> None:
    text = scan.text
    for anchor in _AT.finditer(text):
        at = anchor.start()
        run = scan.left(_LOCAL_REV, at)
        local = text[at - run : at].lstrip(_LOCAL_OPENERS)
        domain = _DOMAIN.match(text, at + 1)
        if run > 64 or not local or domain is None:
            continue
        end = domain.end()
        if scan.joined_after(end) or text[end : end + 1] == "@":
            continue  # a label longer than 63, or more of one token
        host = domain.group()
        scan.add(f"{local}@{host}", _email_keys)
        cut = _sentence_cut(host)
        if cut is not None:
            scan.add(f"{local}@{cut}", _email_keys)


_URL_TAIL = re.compile(f"[^\\s{re.escape(URL_STOPS)}]+")
# "://" after a scheme character and before a letter or digit.
_SCHEME_AT = re.compile(r"://(?<=[A-Za-z0-9+.-]://)(?=\w)")
_SCHEME_REV = re.compile(r"[A-Za-z0-9+.-]{1,33}")
_SCHEME_LEAD = "0123456789+.-"


def _links(scan: _Scan) -> None:
    """Links with a scheme, each read once from its scheme to where it ends.

    A run of link characters may hold several links (``https://a.example/?u=
    https://b.example/x``): the first spans the run, and each later one ends
    where the next one's scheme begins, or at the run's end.
    """
    text = scan.text
    anchors = [m.start() for m in _SCHEME_AT.finditer(text)]
    runs = [at - scan.left(_SCHEME_REV, at) for at in anchors]
    run_end = -1
    for i, at in enumerate(anchors):
        if at >= run_end:
            tail = _URL_TAIL.match(text, at + 3)
            run_end = at + 3 if tail is None else tail.end()
            end = run_end
        else:
            end = runs[i + 1] if i + 1 < len(anchors) and anchors[i + 1] < run_end else run_end
        start = runs[i]
        scheme_start = at - len(text[start:at].lstrip(_SCHEME_LEAD))
        if at - start > 32 or scheme_start == at or scan.joined_before(start):
            continue
        _found_link(scan, text[scheme_start:end], at - scheme_start + 3)


def _found_link(scan: _Scan, link: str, host_at: int) -> None:
    """A link found (its host starts at ``host_at``), and the link without a sentence run into it."""
    if link[-1] in _TRAILING:
        link = strip_trailing(link)
    scan.add(link, _url_keys)
    dot = link.rfind(".")
    if dot <= host_at or not link[dot + 1 : dot + 2].isupper():
        return
    authority = link[host_at:]
    if any(c in authority for c in "/?#:@"):
        return  # a path, a port or user information: no sentence ran into the host
    cut = _sentence_cut(authority)
    if cut is not None:
        scan.add(link[:host_at] + cut, _url_keys)


# A bare host (``example.org/news``) is anchored on a dot between a host
# character and a letter, which prose rarely has (a sentence's dot is
# followed by a space).
_DOT_LETTER = re.compile(r"\.(?<=[A-Za-z0-9-]\.)[A-Za-z]")
_HOST_REV = re.compile(r"[A-Za-z0-9.-]{1,254}")
_HOST_RUN = re.compile(r"[A-Za-z0-9.-]*")
_NOT_BEFORE_HOST = "@/:._-"
_TRAILING = frozenset(TRAILING)


def _hosts(scan: _Scan) -> None:
    """Hosts written without a scheme, with their path: each run of host characters once."""
    text = scan.text
    size = scan.size
    pos = 0
    while (anchor := _DOT_LETTER.search(text, pos)) is not None:
        dot = anchor.start()
        start = dot - scan.left(_HOST_REV, dot)
        end = pos = _end(_HOST_RUN, text, dot)
        if dot - start > 253 or text[start] in ".-":
            continue
        before = text[start - 1] if start else " "
        if before.isalnum() or before in _NOT_BEFORE_HOST:
            continue  # part of a word, an address or a link
        after = text[end] if end < size else " "
        if after.isalnum() or after in "_@":
            continue  # the local part of an address, or part of a word
        if after == "/" and text[end - 1] != ".":
            tail = _URL_TAIL.match(text, end)
            end = pos = end if tail is None else tail.end()
        _found_link(scan, text[start:end], 0)


# -- IBANs and phone numbers, in the text's shape ------------------------------------

# ASCII letters as ``a``, digits as ``0``, the separators IBANs and phone
# numbers allow kept, every other ASCII character ``_``; the rest as it is.
_SHAPE = str.maketrans(
    {
        **{chr(c): "_" for c in range(128)},
        **{chr(c): "a" for c in range(65, 91)},
        **{chr(c): "a" for c in range(97, 123)},
        **{chr(c): "0" for c in range(48, 58)},
        **{c: c for c in " ().-/+"},
    }
)
_IBAN_BODY = {n: re.compile(f"(?:[ -]?[a0]){{{n - 4}}}") for n in set(IBAN_LENGTHS.values())}
# Outside the registry (15 to 34 characters): unbroken, or in groups of four.
_IBAN_RUN = re.compile(r"[a0]{11,30}")
_IBAN_GROUPS = re.compile(r"(?:[ -][a0]{4}){0,6}([ -][a0]{4})(?:([ -][a0]{1,3}))?")
_PHONE_SHAPE = re.compile(r"0[0 ().\/-]{5,22}0")
_WORDISH = frozenset("a0")


def _ibans(scan: _Scan, shape: str) -> None:
    """IBANs, spaced or not: two letters and two digits no letter or digit precedes."""
    text = scan.text
    # str.find, not a pattern: re's search for a literal prefix is slow when
    # its characters ("a") are everywhere.
    at = shape.find("aa00")
    while at != -1:
        if not (at and shape[at - 1] in _WORDISH) and not scan.joined_before(at):
            length = IBAN_LENGTHS.get(text[at : at + 2].upper())
            for end in _iban_ends(shape, at, length):
                # The token ends there: an IBAN is not the start of a longer code.
                if not scan.joined_after(end):
                    scan.add(text[at:end], _iban_keys)
        at = shape.find("aa00", at + 1)


def _iban_ends(shape: str, at: int, length: int | None) -> list[int]:
    """Where an IBAN starting at ``at`` may end (each one whose checksum holds is found).

    A registered country's IBAN has its length, spaced in any grouping. Any
    other is unbroken, or printed in groups of four with a shorter last
    group, which may be a word after it (then the IBAN ends one group before).
    """
    if length is not None:
        body = _IBAN_BODY[length].match(shape, at + 4)
        return [] if body is None else [body.end()]
    ends = []
    run = _IBAN_RUN.match(shape, at + 4)
    if run is not None:
        ends.append(run.end())
    groups = _IBAN_GROUPS.match(shape, at + 4)
    if groups is not None:
        ends.append(groups.end())
        last = max(groups.start(1), groups.start(2))
        if last - at >= 15:
            ends.append(last)
    return ends


def _phones(scan: _Scan, shape: str) -> None:
    for match in _PHONE_SHAPE.finditer(shape):
        start, end = match.span()
        if start and shape[start - 1] in "+(":
            start -= 1
        if not scan.joined_before(start) and not scan.joined_after(end):
            scan.add(scan.text[start:end], _phone_keys)


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


def _slashed(scan: _Scan) -> None:
    """Words holding a ``/`` (file paths, identifiers), whole, as ``text`` values."""
    text = scan.text
    at = text.find("/")
    while at != -1:
        start = at - scan.left(_WORD_REV, at)
        end = _end(_WORD_END, text, at)
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
