"""The stand-in text tool_call renders for a framework's media results (see ``_rich``).

One function per framework's result shape: pydantic-ai's multimodal parts and
``ToolReturn``, Agent Framework ``Content`` lists, and the content blocks of a
Claude Agent SDK tool. Each gives the result's text parts as they are and one
note per file (``binary_note``, ``url_note``), or None for a result that holds
no media (it is rendered as any other). Frameworks are imported on first use.
"""

from __future__ import annotations

import base64
import json
from typing import Any

from ..middleware._render import render
from ._rich import binary_note, url_note

__all__ = ["agent_framework_text", "claude_text", "pydantic_ai_text"]

_UNCAPPED = 1 << 62  # a stand-in is cut by tool_call, as a whole


def pydantic_ai_text(value: Any) -> str | None:
    """A pydantic-ai multimodal part, a list holding one, or a ``ToolReturn``."""
    from pydantic_ai import ToolReturn
    from pydantic_ai.messages import MULTI_MODAL_CONTENT_TYPES as MEDIA

    if isinstance(value, ToolReturn):
        content = value.content
        extra = [] if content is None else [content] if isinstance(content, str) else list(content)
        parts = [value.return_value, *extra]
    elif isinstance(value, MEDIA):
        parts = [value]
    elif isinstance(value, list | tuple) and any(isinstance(v, MEDIA) for v in value):
        parts = list(value)
    else:
        return None
    return "\n".join(_pydantic_ai_part(part, MEDIA) for part in parts)


def _pydantic_ai_part(part: Any, media: tuple[type, ...]) -> str:
    from pydantic_ai import BinaryContent

    if isinstance(part, BinaryContent):
        return binary_note(part.media_type, len(part.data))
    if isinstance(part, media):  # a file given by URL, or one uploaded to the provider
        address = getattr(part, "url", None) or getattr(part, "file_id", None)
        return url_note(_media_type(part), address)
    # Text and JSON as tool_call renders any result (a value it cannot render fails the call).
    return render(part, _UNCAPPED)[0]


def _media_type(part: Any) -> Any:
    try:  # a URL with no extension and no media type given: pydantic-ai raises
        return part.media_type
    except Exception:
        return None


def agent_framework_text(result: Any) -> str | None:
    """A list of Agent Framework contents holding media (data, URIs, hosted files ...)."""
    if not isinstance(result, list) or not all(hasattr(c, "type") for c in result):
        return None
    if all(c.type == "text" for c in result):
        return None
    return "\n".join(_agent_framework_content(c) for c in result)


def _agent_framework_content(content: Any) -> str:
    if content.type == "text":
        return str(content.text)
    if content.type == "data":
        return binary_note(content.media_type, len(_data_bytes(content.uri)))
    if content.type == "uri":
        return url_note(content.media_type, content.uri)
    # Any other content (a hosted file, an error ...): as the framework would serialise it.
    return json.dumps(content.to_dict(), default=str)


def _data_bytes(uri: str) -> bytes:
    """The bytes of a ``data:`` URI (the framework keeps data contents as base64 URIs)."""
    header, _, payload = uri.partition(",")
    if header.endswith(";base64"):
        return base64.b64decode(payload, validate=True)
    return payload.encode()


def claude_text(blocks: list[dict[str, Any]]) -> str | None:
    """Content blocks as the SDK's own server serves them (text and image blocks)."""
    if all(block.get("type") == "text" for block in blocks):
        return None
    return "\n".join(_claude_block(block) for block in blocks)


def _claude_block(block: dict[str, Any]) -> str:
    if block.get("type") == "text":
        return str(block["text"])
    # An image whose data is not base64 raises here: the call's outcome is ``error``.
    return binary_note(block.get("mimeType"), len(base64.b64decode(block["data"], validate=True)))
