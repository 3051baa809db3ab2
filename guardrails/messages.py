"""The text the user wrote, out of a turn's input.

``user_text`` takes plain text, one message, or a message list in the
Anthropic Messages or OpenAI (Chat Completions or Responses) shape, and
returns the text the user wrote: text content blocks are kept, anything else
(images, documents, tool results, tool calls) is skipped. Both functions are
also importable from ``guardrails.text``.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from .errors import UsageError

__all__ = ["content_text", "user_text"]

# Block types whose ``text`` is text the user typed (Anthropic ``text``; OpenAI
# Chat ``text``; OpenAI Responses ``input_text``).
_TEXT_BLOCKS = frozenset({"text", "input_text"})


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
