"""Find a secret in text however a library or a server commonly spelt it.

A tool that echoes a credential rarely echoes it verbatim: a URL carries it
percent-encoded (``%2F`` or ``%2f``, ``+`` for a space, twice encoded as
``%252F``), a JSON body escapes it (``\\/``, ``\\u002f``, a surrogate pair),
a log of that body escapes it again (``\\\\u002f``), an HTML page writes
``&#x2F;`` or ``&amp;``, and an ``Authorization: Basic`` header holds
``base64(user:secret)``. ``Spellings(secrets)`` knows each of those forms of
each secret:

- character by character (``_char``): every character of the secret may
  appear as itself or in any of the escapes above, independently of its
  neighbours, so a mix of escaped and plain characters matches too;
- as a whole (``_token_cores``): base64 and base64url of the secret's UTF-8
  bytes, at each of the three offsets a prefix can put it at (so inside
  ``base64(user:secret)``, ``base64(secret:)`` or any longer encoded blob,
  padded or not), and its hex, either case. The whole run of base64 (or hex)
  characters holding one is replaced, since the characters at its edges
  carry bits of the secret too. Only for secrets of ``MIN_ENCODED`` bytes or
  more: shorter ones would match ordinary words.

docs/policy.md ("Secrets never reach the model through results") lists what
is and is not covered; ``tests/policy/test_secret_spellings.py`` tests each.
"""

from __future__ import annotations

import base64
import re
from collections.abc import Iterable
from functools import lru_cache

__all__ = ["MIN_ENCODED", "Spellings", "spellings_of"]

MIN_ENCODED = 6  # bytes: the shortest secret whose base64 and hex forms are looked for

# An escape's introducers: a backslash, itself escaped again (more backslashes)
# or percent-encoded; ``%`` percent-encoded again (``%25``); ``&`` written
# ``&amp;``. Each repetition is bounded (four levels of escaping: the tool's
# text escaped up to three more times, and once more by the JSON of a dict or
# list result): with no unbounded repeat, a search is linear in the text,
# whatever the text (a long run of backslashes would otherwise be read again
# from every position in it).
_PERCENT = "%(?:25){0,3}"
_INTRODUCER = rf"(?:\\|{_PERCENT}5[cC])"
# Possessive (``+``): a run of introducers is never given back, so a long run
# of backslashes costs each position a few steps. What follows an escape of a
# character other than the backslash never starts with an introducer; the
# backslash itself is matched by a run of them (``_char``).
_BACKSLASH = _INTRODUCER + "{1,16}+"
_MORE_BACKSLASHES = _INTRODUCER + "{0,15}+"
_AMP = "&(?:amp;){0,3}"
_SHORT = {"\n": "n", "\r": "r", "\t": "t", "\b": "b", "\f": "f"}
_NAMED = {"&": "amp", "<": "lt", ">": "gt", '"': "quot", "'": "apos"}
_B64_RUN = re.compile(r"[A-Za-z0-9+/_-]")
_HEX_RUN = re.compile(r"[0-9A-Fa-f]")


def _hex(value: int, width: int) -> str:
    """``value`` in hex of ``width`` digits, each letter in either case."""
    digits = format(value, f"0{width}x")
    return "".join(f"[{d}{d.upper()}]" if d.isalpha() else d for d in digits)


def _char(c: str) -> str:
    """A pattern for one character of a secret: itself or an escape of it.

    Each alternative starts with one literal character (``c``, ``%``, ``\\``,
    ``&``, ``+``), so the regex engine skips to the positions where one of them
    stands instead of trying every alternative at every position.
    """
    code = ord(c)
    utf8 = c.encode("utf-8", "surrogatepass")
    escapes = _backslash_escapes(c, code, utf8)
    percent = _hex(utf8[0], 2) + "".join(_PERCENT + _hex(b, 2) for b in utf8[1:])
    forms = [
        re.escape(c),
        f"{_PERCENT}(?:{percent}|5[cC]{_MORE_BACKSLASHES}{escapes})",
        rf"\\{_MORE_BACKSLASHES}{escapes}",
        f"{_AMP}(?:#0{{0,8}}{code};|#[xX]0{{0,8}}{_hex(code, len(format(code, 'x')))};"
        + (f"|{_NAMED[c]};)" if c in _NAMED else ")"),
    ]
    if c == " ":
        forms.append(r"\+")
    elif c == "\\":  # a backslash, however many times escaped (up to 16 in a row)
        forms.append(_INTRODUCER + "{1,16}")
    return "(?:" + "|".join(forms) + ")"


def _backslash_escapes(c: str, code: int, utf8: bytes) -> str:
    """What may follow the backslash of an escape of ``c``, as one group."""
    if code < 0x10000:
        escapes = ["u" + _hex(code, 4)]
    else:  # a surrogate pair in JSON, \U in Python
        high, low = 0xD800 + ((code - 0x10000) >> 10), 0xDC00 + ((code - 0x10000) & 0x3FF)
        escapes = [f"u{_hex(high, 4)}{_BACKSLASH}u{_hex(low, 4)}", "U" + _hex(code, 8)]
    if code < 0x100:
        escapes.append("x" + _hex(code, 2))
    if len(utf8) > 1:  # \xe2\x82\xac: the bytes of a bytes repr
        escapes.append(
            "x" + _hex(utf8[0], 2) + "".join(_BACKSLASH + "x" + _hex(b, 2) for b in utf8[1:])
        )
    if c in _SHORT:
        escapes.append(_SHORT[c])
    elif code < 0x80 and not c.isalnum():  # \/ \" \' \\, the character maybe percent-encoded
        escapes.append(f"(?:{re.escape(c)}|{_PERCENT}{_hex(code, 2)})")
    return "(?:" + "|".join(escapes) + ")"


def _token_cores(secret: bytes) -> list[str]:
    """The base64 and base64url characters made of the secret's bits only, at
    each of the three offsets a prefix can put it at: found as they are, then
    widened to the run of base64 characters around them."""
    cores = []
    for offset in range(3):
        encoded = base64.b64encode(bytes(offset) + secret).decode("ascii")
        start = -(-8 * offset // 6)  # the first character made of the secret's bits only
        end = (8 * offset + 8 * len(secret)) // 6
        core = encoded[start:end]
        cores += [core, core.replace("+", "-").replace("/", "_")]
    return sorted(set(cores), key=len, reverse=True)


class Spellings:
    """Every common spelling of some secrets: ``found(text)`` and ``replace(text, by)``.

    Both look first with ``in`` (a fast substring search) and use the
    patterns only where one could match: text without ``%``, ``\\``, ``&``
    (nor ``+``, for a secret with a space) holds a secret only verbatim, and
    a base64 or hex run only around one of its cores.
    """

    __slots__ = ("_cores", "_hexes", "_runs", "_texts")

    def __init__(self, secrets: Iterable[str]) -> None:
        unique = sorted({s for s in secrets if s}, key=len, reverse=True)
        # One pattern per secret: a pattern that starts with one group of
        # alternatives, each opening with a literal, is searched by its first
        # characters only (an alternation of several secrets would not be).
        self._texts = tuple((s, " " in s, re.compile("".join(map(_char, s)))) for s in unique)
        encoded = [s.encode("utf-8", "surrogatepass") for s in unique]
        long_enough = [b for b in encoded if len(b) >= MIN_ENCODED]
        self._cores = tuple(c for b in long_enough for c in _token_cores(b))
        self._hexes = tuple(b.hex() for b in long_enough)
        runs = []
        if self._cores:
            runs.append((re.compile("|".join(map(re.escape, self._cores))), _B64_RUN, "="))
        if self._hexes:
            hexes = "|".join("".join(_hex(x, 2) for x in b) for b in long_enough)
            runs.append((re.compile(hexes), _HEX_RUN, ""))
        self._runs = tuple(runs)

    def found(self, text: str) -> bool:
        """True when ``text`` holds a secret in any of the known spellings."""
        for secret, space, pattern in self._texts:
            if pattern.search(text) if _may_escape(text, space) else secret in text:
                return True
        return self._has_core(text) or self._has_hex(text)

    def replace(self, text: str, by: str) -> str:
        """``text`` with every spelling of every secret replaced by ``by``: the
        character-wise spellings first, then the runs of base64 and hex that
        hold a secret."""
        for secret, space, pattern in self._texts:
            if _may_escape(text, space):
                text = pattern.sub(by, text)
            elif secret in text:
                text = text.replace(secret, by)
        if self._runs and self._has_core(text):
            pattern, run, pad = self._runs[0]
            text = _replace_runs(text, pattern, run, by, pad)
        if self._runs and self._has_hex(text):
            pattern, run, pad = self._runs[-1]
            text = _replace_runs(text, pattern, run, by, pad)
        return text

    def _has_core(self, text: str) -> bool:
        return any(core in text for core in self._cores)

    def _has_hex(self, text: str) -> bool:
        if not self._hexes:
            return False
        lowered = text.lower()
        return any(h in lowered for h in self._hexes)


def _may_escape(text: str, space: bool) -> bool:
    """Whether ``text`` could hold an escaped spelling (else only the secret itself)."""
    return "%" in text or "\\" in text or "&" in text or (space and "+" in text)


def _replace_runs(
    text: str, cores: re.Pattern[str], run: re.Pattern[str], by: str, pad: str
) -> str:
    """``text`` with each run of ``run`` characters that holds a core replaced
    (and the ``pad`` characters that end it). Linear: each run is read once."""
    pieces: list[str] = []
    done = 0
    found = cores.search(text)
    while found is not None:
        start, end = found.start(), found.end()
        while start > done and run.match(text, start - 1):
            start -= 1
        while end < len(text) and run.match(text, end):
            end += 1
        while pad and end < len(text) and text[end] == pad:
            end += 1
        pieces += [text[done:start], by]
        done = end
        found = cores.search(text, end)
    return "".join(pieces) + text[done:] if pieces else text


@lru_cache(maxsize=64)
def spellings_of(secrets: frozenset[str]) -> Spellings:
    """``Spellings`` of a set of secrets, compiled once for the process's few
    sets (a provider's secrets change rarely; the patterns hold them as the
    provider does)."""
    return Spellings(secrets)
