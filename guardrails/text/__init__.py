"""The user's text of a turn, and its normalised form for matching.

``Text`` holds a text and computes, once and only when asked, its normalised
form (invisible characters removed, NFKC, casefold), its words and the
lookups matching needs, so every trigger of a turn shares one scan. Disguised
words (``rеfund`` with a Cyrillic ``е``) are folded to what they imitate
(``guardrails.confusables``). ``user_text`` and ``content_text`` (from
``guardrails.messages``) take the user's text out of a turn's input.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator
from functools import lru_cache
from itertools import compress, filterfalse
from operator import not_

from ..errors import UsageError
from ..messages import content_text, user_text
from ._normal import normalise, normalise_tokens
from ._wordscan import STARTS, WordTable, scan
from .confusables import fold_words

__all__ = ["Text", "content_text", "fold_text", "normalise", "user_text"]

_WORDS = re.compile(r"\w+")

# ASCII fast path: one bytes.translate maps letters to lower case and every
# byte that is not [A-Za-z0-9_] to a space, so bytes.split() yields exactly the
# words that ``\w+`` finds in ASCII text.
_WORD_BYTES = frozenset(b"abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_")
_ASCII_TABLE = bytes(
    (c + 32 if 65 <= c <= 90 else c) if c in _WORD_BYTES else 32 for c in range(256)
)


class Text:
    """A text with its normalised form and words, computed lazily and once.

    ``normalised`` is NFKC + casefold with invisible characters removed;
    ``words`` its ``\\w+`` runs. Matching asks ``present(keys)``: which of
    ``keys`` (words as UTF-8 bytes) occur as words of the text; and reads
    ``word_bytes`` (the words in order, separated by spaces) only to confirm a
    sequence of words. A disguised word (``rеfund`` with a Cyrillic ``е``)
    stands there as ``MARK`` + its fold (see ``guardrails.confusables``).

    Nothing normalises the whole text: one ``bytes.translate`` lower-cases
    ASCII letters and turns every other ASCII byte but ``_`` into a space, and
    only the distinct tokens holding a non-ASCII character go through
    ``unicodedata``, all of them in one call. With a ``WordTable`` compiled
    by the C core, ``present`` walks those tokens once in C (``_wordscan``).
    """

    __slots__ = (
        "_firsts",
        "_folded",
        "_hits",
        "_normalised",
        "_odd_words",
        "_pairs",
        "_starts",
        "_tokens",
        "_word_bytes",
        "_wordless",
        "is_ascii",
        "raw",
    )

    def __init__(self, raw: str) -> None:
        if not isinstance(raw, str):
            raise UsageError(f"expected text, got {type(raw).__name__}")
        if type(raw) is not str:
            # A str subclass may override encode(), lower(), isascii()...: work
            # on a plain copy of its characters.
            raw = str.__add__(raw, "")
        self.raw = raw
        self.is_ascii = raw.isascii()
        self._normalised: str | None = None
        self._folded: str | None = None
        self._word_bytes: bytes | None = None
        self._tokens: bytes | None = None
        # Tokens holding a non-ASCII character ("odd"), when first needed: the
        # tokens and their words as in word_bytes; all those words; the tokens
        # with no word (when a sequence is looked for).
        self._pairs: tuple[list[bytes], list[bytes]] | None = None
        self._odd_words: frozenset[bytes] = frozenset()
        self._wordless: tuple[bytes, ...] | None = None
        # The last present() call's probe and, per chunk of ``tokens`` where
        # it found something, (start, end, what it found there).
        self._hits: tuple[frozenset[bytes] | set[bytes], list[_Hits]] = (frozenset(), [])
        # Where the C scans found words first, and the first STARTS places of
        # the words they tracked (facts of the text, whatever the probe).
        self._firsts: dict[bytes, int] = {}
        self._starts: dict[bytes, list[int]] = {}

    def __repr__(self) -> str:
        return f"<Text {len(self.raw)} chars>"

    @property
    def normalised(self) -> str:
        if self._normalised is None:
            if self.is_ascii:
                self._normalised = self.raw.lower()
            else:
                # Piece by piece: NFKC, casefold and the removal of invisible
                # characters never reach across a space, and ASCII pieces
                # only need lower().
                self._normalised = "".join(
                    p.lower() if p.isascii() else normalise(p) for p in pieces(self.raw)
                )
        return self._normalised

    @property
    def folded(self) -> str:
        """``normalised`` with each disguised word replaced by its fold (no ``MARK``)."""
        if self._folded is None:
            self._folded = self.normalised if self.is_ascii else fold_text(self.normalised)
        return self._folded

    @property
    def words(self) -> list[str]:
        return _WORDS.findall(self.normalised)

    @property
    def tokens(self) -> bytes:
        """The text, ASCII letters lower-cased and other ASCII bytes but ``_`` made spaces.

        Its ASCII tokens are the text's ASCII words; the others are raw UTF-8.
        """
        if self._tokens is None:
            # "surrogatepass": a lone surrogate (invalid, but a str can hold
            # one) is encoded like any character instead of raising.
            encoded = self.raw.encode("utf-8", "surrogatepass")
            self._tokens = encoded.translate(_ASCII_TABLE if self.is_ascii else _MIXED_TABLE)
        return self._tokens

    @property
    def word_bytes(self) -> bytes:
        """The words in order, UTF-8, separated by one or more spaces."""
        if self._word_bytes is None:
            if self.is_ascii:
                self._word_bytes = self.tokens
            else:
                get = dict(zip(*self._odd_pairs(), strict=True)).get
                self._word_bytes = b" ".join(
                    b" ".join(map(get, words, words))
                    for words in (chunk.split() for chunk in chunks(self.tokens))
                )
        return self._word_bytes

    def present(
        self,
        keys: frozenset[bytes] | set[bytes],
        ascii_keys: frozenset[bytes] | WordTable | None = None,
    ) -> set[bytes]:
        """The members of ``keys`` that are words of the text (as in ``word_bytes``).

        ``ascii_keys``, the ASCII members of ``keys``, may be given by a caller
        that asks often: the text's ASCII words are probed against it, and a
        smaller set is faster to probe. As a ``WordTable`` compiled by the C
        core, the text is walked once in C (``_wordscan.scan``).
        """
        if isinstance(ascii_keys, WordTable):
            if ascii_keys.compiled is not None:
                return self._present_scanned(keys, ascii_keys)
            ascii_keys = ascii_keys.keys
        probe = keys if ascii_keys is None else ascii_keys
        buffer = self.tokens
        odd: set[bytes] | None = None if self.is_ascii or self._pairs is not None else set()
        if len(buffer) <= _SMALL:
            words = buffer.split()
            found = set(probe.intersection(words))
            if odd is not None:
                odd.update(filterfalse(bytes.isascii, words))
        else:
            # One C loop of hash lookups a chunk at a time; a chunk holding a
            # non-ASCII byte also gives up its odd tokens (the first time).
            found = set()
            hits = []
            for start, end in spans(buffer):
                chunk = buffer[start:end]
                words = chunk.split()
                if here := probe.intersection(words):
                    found.update(here)
                    hits.append((start, end, here))
                if odd is not None and not chunk.isascii():
                    odd.update(_odd_in(chunk, words))
            self._hits = (probe, hits)
        if self.is_ascii:
            return found
        if odd is not None:
            self._set_odd(odd)
        # An odd token is raw: only the words it normalises to count.
        found = {w for w in found if w.isascii()}
        found.update(keys.intersection(self._odd_words))
        return found

    def _present_scanned(self, keys: frozenset[bytes] | set[bytes], table: WordTable) -> set[bytes]:
        # The C walk: ASCII words looked up in place, the distinct odd tokens
        # handed back (the first time), and where the first words of
        # multi-word terms stand, for has_sequence.
        want_odd = not self.is_ascii and self._pairs is None
        firsts, odd, starts = scan(table, self.tokens, want_odd)
        self._firsts.update(firsts)
        self._starts.update(starts)
        found = set(firsts)
        if self.is_ascii:
            return found
        if odd is not None:
            self._set_odd(odd)
        found.update(keys.intersection(self._odd_words))
        return found

    def has_sequence(self, form: tuple[tuple[bytes, ...], ...]) -> bool:
        """Whether words occur one after another, each in one of its forms."""
        if self.is_ascii:
            return self._search_tokens(_sequence(tuple(f[:1] for f in form), ()), form[0][0])
        tokens, words = self._odd_pairs()
        if self._wordless is None:
            # Blank (no word): nothing left once stripped. In C, not a call a token.
            blank = map(not_, map(bytes.strip, words))
            self._wordless = tuple(sorted(compress(tokens, blank)))
        plain = tuple(f[:1] for f in form)
        if (
            len(self._wordless) <= _MAX_WORDLESS
            and all(p[0].isascii() for p in plain)
            and all(self._odd_words.isdisjoint(f) for f in form)
        ):
            # No odd token holds one of the words: they are ASCII tokens, next
            # to each other or apart only by odd tokens that hold no word.
            return self._search_tokens(_sequence(plain, self._wordless), plain[0][0])
        return _search(_sequence(form, ()), self.word_bytes)

    def _search_tokens(self, pattern: re.Pattern[bytes], first: bytes) -> bool:
        """Whether ``pattern``, which starts with the word ``first``, matches in ``tokens``."""
        starts = self._starts.get(first)
        if starts is not None:
            # A C scan saw where the word stands: a match starts at one of
            # these, or (when they are not all) after the last of them.
            if any(pattern.match(self.tokens, at) for at in starts):
                return True
            return len(starts) == STARTS and _search(pattern, self.tokens, starts[-1] + 1)
        at = self._firsts.get(first)
        if at is not None:
            # A C scan saw where the word first stands: no match starts before.
            return _search(pattern, self.tokens, at)
        probe, hits = self._hits
        if first not in probe:
            return _search(pattern, self.tokens)
        # present() knows the chunks where the word stands: look only there.
        tokens = self.tokens
        for start, end, here in hits:
            if first in here:
                at = tokens.find(first, start, end)
                while at >= 0:
                    if (at == 0 or tokens[at - 1] == _SPACE) and pattern.match(tokens, at):
                        return True
                    at = tokens.find(first, at + 1, end)
        return False

    def _odd_pairs(self) -> tuple[list[bytes], list[bytes]]:
        if self._pairs is None:
            odd: set[bytes] = set()
            for chunk in chunks(self.tokens):
                if not chunk.isascii():
                    odd.update(filterfalse(bytes.isascii, chunk.split()))
            self._set_odd(odd)
        assert self._pairs is not None
        return self._pairs

    def _set_odd(self, odd: Iterable[bytes]) -> None:
        tokens = list(odd)
        words = normalise_tokens(tokens)
        self._pairs = (tokens, words)
        self._odd_words = frozenset(b" ".join(words).split())


def _odd_in(chunk: bytes, words: list[bytes]) -> Iterable[bytes]:
    """The tokens of ``chunk`` (split into ``words``) that hold a non-ASCII byte."""
    # A look at the first 4 KB first: in text full of non-ASCII words, that
    # is enough to tell, and the whole chunk is not copied for nothing.
    if len(chunk[:4_096].translate(None, _ASCII)) > _SPARSE:
        return filterfalse(bytes.isascii, words)
    high = chunk.translate(None, _ASCII)
    if len(high) > _SPARSE:
        return filterfalse(bytes.isascii, words)
    # A few non-ASCII characters (curly quotes, a dash in English text): go to
    # each, rather than test every token of the chunk.
    found: list[bytes] = []
    positions = sorted(
        at
        for lead in set(high)
        if lead >= 0xC0  # the first byte of a character
        for at in _occurrences(chunk, lead)
    )
    end = -1
    for at in positions:
        if at < end:
            continue  # in the token just taken
        start = chunk.rfind(b" ", 0, at) + 1
        end = chunk.find(b" ", at)
        if end < 0:
            end = len(chunk)
        found.append(chunk[start:end])
    return found


def _occurrences(chunk: bytes, byte: int) -> Iterator[int]:
    at = chunk.find(byte)
    while at >= 0:
        yield at
        at = chunk.find(byte, at + 1)


# Where a present() call found words: a chunk's start and end in ``tokens``, and those words.
_Hits = tuple[int, int, frozenset[bytes] | set[bytes]]
_ASCII = bytes(range(128))
# Up to this many non-ASCII bytes in a chunk, its odd tokens are found from
# their positions; past it, by testing every token.
_SPARSE = 256
_SMALL = 4_096
# Past this many distinct odd tokens without a word, sequences are confirmed
# in word_bytes rather than by a pattern that skips them.
_MAX_WORDLESS = 32
_SPACE = ord(" ")


@lru_cache(maxsize=4_096)
def _sequence(form: tuple[tuple[bytes, ...], ...], skip: tuple[bytes, ...]) -> re.Pattern[bytes]:
    """Words in sequence, separated by spaces and, between them, any of ``skip``."""
    words = [
        re.escape(f[0]) if len(f) == 1 else b"(?:" + b"|".join(map(re.escape, f)) + b")"
        for f in form
    ]
    separator = rb" +"
    if skip:
        separator = rb"(?: +(?:" + b"|".join(map(re.escape, skip)) + rb"))* +"
    return re.compile(separator.join(words) + rb"(?![^ ])")


def _search(pattern: re.Pattern[bytes], haystack: bytes, at: int = 0) -> bool:
    # The pattern starts with a literal word (or a few), so re scans for it at
    # C speed; the word boundary before it is checked here, only on a hit.
    while (match := pattern.search(haystack, at)) is not None:
        start = match.start()
        if start == 0 or haystack[start - 1] == _SPACE:
            return True
        at = start + 1
    return False


# For text with non-ASCII characters: ASCII bytes as in _ASCII_TABLE, every
# byte of a multi-byte character kept (its token is looked at again).
_MIXED_TABLE = bytes(
    (c + 32 if 65 <= c <= 90 else c) if c in _WORD_BYTES or c >= 128 else 32 for c in range(256)
)


def fold_text(normalised: str) -> str:
    """A normalised text with each disguised word replaced by its fold.

    ``rеfund`` (Cyrillic ``е``) becomes ``refund``; words in one script, of
    letters in use, are kept (see ``guardrails.confusables``).
    """
    return fold_words(normalised)


def chunks(buffer: bytes) -> Iterator[bytes]:
    """``buffer`` (words separated by spaces) in slices of about ``CHUNK`` bytes, cut between words.

    Split and looked up a slice at a time, the word list stays small enough
    for the CPU cache, and memory stays flat on long inputs.
    """
    for start, end in spans(buffer):
        yield buffer[start:end]


def spans(buffer: bytes) -> Iterator[tuple[int, int]]:
    """Where the slices of ``chunks(buffer)`` start and end."""
    start, size = 0, len(buffer)
    while start < size:
        end = buffer.find(b" ", start + CHUNK)
        if end < 0:
            end = size
        yield start, end
        start = end


CHUNK = 32_768
PIECE = 32_768


def pieces(text: str) -> list[str]:
    """``text`` cut into pieces of about ``PIECE`` characters, each cut just before a space."""
    out = []
    start, size = 0, len(text)
    while start < size:
        end = text.find(" ", start + PIECE)
        if end < 0:
            end = size
        out.append(text[start:end])
        start = end
    return out
