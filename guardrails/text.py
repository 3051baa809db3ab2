"""The user's text of a turn, and its normalised form for matching.

``user_text`` takes plain text, one message, or a message list in the
Anthropic Messages or OpenAI (Chat Completions or Responses) shape, and
returns the text the user wrote: text content blocks are kept, anything else
(images, documents, tool results, tool calls) is skipped. ``Text`` holds a
text and computes, once and only when asked, its normalised form (NFKC, then
casefold) and its words, so every trigger of a turn shares one scan.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Iterable, Iterator, Mapping
from typing import Any

from .confusables import MARK, data, match_key
from .errors import UsageError

__all__ = ["Text", "content_text", "fold_text", "normalise", "user_text"]

# Block types whose ``text`` is text the user typed (Anthropic ``text``; OpenAI
# Chat ``text``; OpenAI Responses ``input_text``).
_TEXT_BLOCKS = frozenset({"text", "input_text"})
_WORDS = re.compile(r"\w+")

# ASCII fast path: one bytes.translate maps letters to lower case and every
# byte that is not [A-Za-z0-9_] to a space, so bytes.split() yields exactly the
# words that ``\w+`` finds in ASCII text.
_WORD_BYTES = frozenset(b"abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_")
_ASCII_TABLE = bytes(
    (c + 32 if 65 <= c <= 90 else c) if c in _WORD_BYTES else 32 for c in range(256)
)


# Unicode's Default_Ignorable_Code_Point set (zero-width characters, soft
# hyphen, joiners, bidi controls, variation selectors, tags): invisible, kept
# by NFKC, and not word characters, so one inside a term would split it.
_IGNORABLE = re.compile(
    "[\u00ad\u034f\u061c\u115f\u1160\u17b4\u17b5\u180b-\u180f\u200b-\u200f"
    "\u202a-\u202e\u2060-\u206f\u3164\ufe00-\ufe0f\ufeff\uffa0\ufff0-\ufff8"
    "\U0001bca0-\U0001bca3\U0001d173-\U0001d17a\U000e0000-\U000e0fff]"
)


def normalise(text: str) -> str:
    """Invisible characters removed, NFKC, then casefold.

    ``ＲＥＦＵＮＤ``, ``Refund``, and ``refund`` with a zero-width space inside,
    all become ``refund``.
    """
    return unicodedata.normalize("NFKC", _IGNORABLE.sub("", text)).casefold()


class Text:
    """A text with its normalised form and words, computed lazily and once.

    ``normalised`` is NFKC + casefold with invisible characters removed;
    ``words`` its ``\\w+`` runs. What matching reads is ``word_bytes`` (the
    words in order, UTF-8, separated by spaces) and, for text that is not all
    ASCII, ``word_set`` (the distinct words). In both, a mixed-script word that
    holds look-alike characters (``rеfund`` with a Cyrillic ``е``) stands as
    ``MARK`` + its fold (see ``guardrails.confusables``).

    Nothing normalises the whole text: ASCII is lower-cased and split by one
    ``bytes.translate``, and only the distinct words that hold a non-ASCII
    character go through ``unicodedata``, all of them in one call.
    """

    __slots__ = ("_folded", "_normalised", "_tokens", "_word_bytes", "_word_set", "is_ascii", "raw")

    def __init__(self, raw: str) -> None:
        if not isinstance(raw, str):
            raise UsageError(f"expected text, got {type(raw).__name__}")
        self.raw = raw
        self.is_ascii = raw.isascii()
        self._normalised: str | None = None
        self._folded: str | None = None
        self._word_bytes: bytes | None = None
        self._word_set: frozenset[bytes] | None = None
        self._tokens: _Tokens | None = None

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
        """``normalised`` with each mixed-script word replaced by its fold."""
        if self._folded is None:
            self._folded = self.normalised if self.is_ascii else fold_text(self.normalised)
        return self._folded

    @property
    def words(self) -> list[str]:
        return _WORDS.findall(self.normalised)

    @property
    def word_bytes(self) -> bytes:
        if self._word_bytes is None:
            if self.is_ascii:
                self._word_bytes = self.raw.encode("ascii").translate(_ASCII_TABLE)
            else:
                self._word_bytes = self._analysis().word_bytes()
        return self._word_bytes

    @property
    def word_set(self) -> frozenset[bytes]:
        """The distinct words of ``word_bytes``."""
        if self._word_set is None:
            if self.is_ascii:
                self._word_set = frozenset(self.word_bytes.split())
            else:
                self._word_set = self._analysis().words
        return self._word_set

    def _analysis(self) -> _Tokens:
        if self._tokens is None:
            self._tokens = _Tokens(self.raw)
        return self._tokens


# For text with non-ASCII characters: ASCII bytes as in _ASCII_TABLE, every
# byte of a multi-byte character kept (its token is looked at again).
_MIXED_TABLE = bytes(
    (c + 32 if 65 <= c <= 90 else c) if c in _WORD_BYTES or c >= 128 else 32 for c in range(256)
)
# Between tokens in the one string that all odd tokens are normalised as:
# NFKC, casefold and the removal of invisible characters neither make nor
# remove it, nor combine anything across it.
_JOIN = "\x00"
_NON_WORD = re.compile(r"[^\w\x00]+")


class _Tokens:
    """The tokens of a text that is not all ASCII, and their normalised words.

    A token is a run of bytes between ASCII non-word characters
    (``_MIXED_TABLE``). ASCII tokens are words already; an "odd" token (one
    with a non-ASCII character) is normalised, split into ``\\w+`` words, and
    each word keyed by ``match_key``.
    """

    __slots__ = ("buffer", "odd", "words")

    def __init__(self, raw: str) -> None:
        # "surrogatepass": a lone surrogate (invalid, but a str can hold one)
        # is encoded like any character instead of raising.
        self.buffer = raw.encode("utf-8", "surrogatepass").translate(_MIXED_TABLE)
        distinct: set[bytes] = set()
        for chunk in chunks(self.buffer):
            distinct.update(chunk.split())
        odd = [t for t in distinct if not t.isascii()]
        distinct.difference_update(odd)
        self.odd = _normalise_tokens(odd)
        for words in self.odd.values():
            distinct.update(words.split())
        self.words = frozenset(distinct)

    def word_bytes(self) -> bytes:
        get = self.odd.get
        return b" ".join(
            b" ".join(map(get, tokens, tokens))
            for tokens in (chunk.split() for chunk in chunks(self.buffer))
        )


def _normalise_tokens(odd: list[bytes]) -> dict[bytes, bytes]:
    """Each odd token -> its normalised words (keyed), UTF-8, separated by spaces."""
    if not odd:
        return {}
    # One call of each kind for all of them: joined by _JOIN, normalised,
    # every run of non-word characters made a space, split again.
    normal = normalise(b"\x00".join(odd).decode("utf-8", "surrogatepass"))
    spaced = _NON_WORD.sub(" ", normal)
    parts = spaced.encode("utf-8", "surrogatepass").split(b"\x00")
    if not data().foldable.search(normal):
        return dict(zip(odd, parts, strict=True))
    keys = {}
    for word in set(spaced.replace(_JOIN, " ").split()):
        key = match_key(word)
        if key != word:
            keys[word.encode("utf-8", "surrogatepass")] = key.encode("utf-8", "surrogatepass")
    if keys:
        parts = [
            b" ".join(keys.get(w, w) for w in part.split()) if not part.isascii() else part
            for part in parts
        ]
    return dict(zip(odd, parts, strict=True))


def fold_text(normalised: str) -> str:
    """A normalised text with each mixed-script word holding look-alikes replaced by its fold."""
    if normalised.isascii() or not data().foldable.search(normalised):
        return normalised
    return _ODD_WORD.sub(_fold_match, normalised)


# A word holding a non-ASCII word character; \b keeps the search linear.
_ODD_WORD = re.compile(r"\b\w*[^\W\x00-\x7f]\w*")


def _fold_match(match: re.Match[str]) -> str:
    word = match.group()
    key = match_key(word)
    return key[1:] if key.startswith(MARK) else word


def chunks(buffer: bytes) -> Iterator[bytes]:
    """``buffer`` (words separated by spaces) in slices of about ``CHUNK`` bytes, cut between words.

    Split and looked up a slice at a time, the word list stays small enough
    for the CPU cache, and memory stays flat on long inputs.
    """
    start, size = 0, len(buffer)
    while start < size:
        end = buffer.find(b" ", start + CHUNK)
        if end < 0:
            end = size
        yield buffer[start:end]
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


def user_text(turn_input: Any, *, last_only: bool = False) -> str:
    """The text the user wrote in ``turn_input``, user messages joined by newlines.

    Accepts a ``str``; one message; or a list of messages as dicts or SDK
    objects (anything with ``role`` and ``content``). Only ``user`` messages
    count; ``last_only`` keeps the last one. Raises ``UsageError`` for input of
    another shape.
    """
    if isinstance(turn_input, str):
        return turn_input
    if turn_input is None:
        return ""
    if _is_message(turn_input):
        messages: list[Any] = [turn_input]
    elif isinstance(turn_input, Iterable) and not isinstance(turn_input, bytes | bytearray):
        messages = list(turn_input)
    else:
        raise UsageError(
            f"turn input must be text or a list of messages, not {type(turn_input).__name__}"
        )
    texts: list[str] = []
    for message in messages:
        if isinstance(message, str):
            texts.append(message)
            continue
        if not _is_message(message):
            if _get(message, "type") is not None:
                continue  # an item that is not a message (OpenAI Responses function calls)
            raise UsageError(f"not a message: {type(message).__name__}")
        if _get(message, "role") != "user":
            continue
        texts.append(content_text(_get(message, "content")))
    if last_only:
        return texts[-1] if texts else ""
    return "\n".join(t for t in texts if t)


def _is_message(obj: Any) -> bool:
    return _get(obj, "role") is not None and _get(obj, "content", _MISSING) is not _MISSING


_MISSING = object()


def _get(obj: Any, key: str, default: Any = None) -> Any:
    if isinstance(obj, Mapping):
        return obj.get(key, default)
    return getattr(obj, key, default)


def content_text(content: Any) -> str:
    """The text blocks of one message's content, joined by newlines; other blocks skipped."""
    if isinstance(content, str):
        return content
    if content is None or not isinstance(content, Iterable):
        return ""
    parts = []
    for block in content:
        if isinstance(block, str):
            parts.append(block)
        elif _get(block, "type") in _TEXT_BLOCKS:
            text = _get(block, "text")
            if isinstance(text, str):
                parts.append(text)
    return "\n".join(parts)
