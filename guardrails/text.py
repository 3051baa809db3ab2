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

from .errors import UsageError

__all__ = ["Text", "content_text", "normalise", "user_text"]

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
    ``words`` its ``\\w+`` runs. ``word_bytes`` is what matching reads: the
    same words, UTF-8 encoded, separated by one or more spaces. It is built
    without normalising the whole text: ASCII runs are lower-cased and split
    by one ``bytes.translate``, and only the words that hold a non-ASCII
    character go through ``unicodedata`` (so an English text with curly quotes
    stays on the fast path).
    """

    __slots__ = ("_normalised", "_word_bytes", "is_ascii", "raw")

    def __init__(self, raw: str) -> None:
        if not isinstance(raw, str):
            raise UsageError(f"expected text, got {type(raw).__name__}")
        self.raw = raw
        self.is_ascii = raw.isascii()
        self._normalised: str | None = None
        self._word_bytes: bytes | None = None

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
    def words(self) -> list[str]:
        return self.word_bytes.decode("utf-8", "surrogatepass").split()

    @property
    def word_bytes(self) -> bytes:
        if self._word_bytes is None:
            if self.is_ascii:
                self._word_bytes = self.raw.encode("ascii").translate(_ASCII_TABLE)
            else:
                self._word_bytes = b" ".join(_piece_words(p) for p in pieces(self.raw))
        return self._word_bytes


# For text with non-ASCII characters: ASCII bytes as in _ASCII_TABLE, every
# byte of a multi-byte character kept (it is looked at again, below).
_MIXED_TABLE = bytes(
    (c + 32 if 65 <= c <= 90 else c) if c in _WORD_BYTES or c >= 128 else 32 for c in range(256)
)
_NON_ASCII = re.compile(rb"[\x80-\xff]+")


def _piece_words(piece: str) -> bytes:
    """The words of one piece, as in ``Text.word_bytes``."""
    if piece.isascii():
        return piece.encode("ascii").translate(_ASCII_TABLE)
    # "surrogatepass": a lone surrogate (invalid, but a str can hold one) is
    # encoded like any character instead of raising.
    raw = piece.encode("utf-8", "surrogatepass")
    buffer = raw.translate(_MIXED_TABLE)
    out: list[bytes] = []
    done = 0
    for run in _non_ascii_runs(buffer):
        if run.start() < done:
            if done == len(buffer):
                break  # the last token reached the end: nothing left to look at
            continue  # another run inside the token just rewritten
        # The token around the run, between two ASCII separators (which are
        # never part of a character, so the slice decodes).
        start = buffer.rfind(b" ", 0, run.start()) + 1
        end = buffer.find(b" ", run.end())
        if end < 0:
            end = len(buffer)
        token = normalise(raw[start:end].decode("utf-8", "surrogatepass"))
        out.append(buffer[done:start])
        out.append(" ".join(_WORDS.findall(token)).encode("utf-8", "surrogatepass"))
        done = end
    out.append(buffer[done:])
    return b"".join(out)


def _non_ascii_runs(buffer: bytes) -> Iterator[re.Match[bytes]]:
    # bytes.isascii() skips ASCII stretches at memory speed; the regular
    # expression, 30x slower per byte, only looks inside the others.
    for start in range(0, len(buffer), _STRETCH):
        if not buffer[start : start + _STRETCH].isascii():
            yield from _NON_ASCII.finditer(buffer, start, start + _STRETCH)


_STRETCH = 1_024
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
