"""Results that are not only text: what tool_call renders for them, and what the model is sent.

A framework's tool may return images, binary data or the framework's own
result object (pydantic-ai's ``ToolReturn``, Agent Framework ``Content``, MCP
content blocks). tool_call renders text, so an adapter hands it a stand-in:
the result's text parts as they are and one note per binary part
(``[image/png, 1234 bytes]``, ``binary_note``). The stand-in is what is capped,
audited, read by output guards and labelled for provenance. The model is sent
the native value only when tool_call passed the stand-in on unchanged (the
outcome is ok, nothing was cut and nothing redacted); otherwise it reads
``ToolResult.content``, as for any result.
"""

from __future__ import annotations

import base64
import binascii
from typing import Any

from ..context import ToolResult

__all__ = ["Rich", "address_note", "base64_note", "binary_note", "sent", "url_note"]


class Rich:
    """One call's rich result: the stand-in text tool_call renders, and the native value."""

    __slots__ = ("native", "text")

    def __init__(self, text: str, native: Any) -> None:
        self.text = text
        self.native = native


def _kind(media_type: Any) -> str:
    return media_type if isinstance(media_type, str) and media_type else "application/octet-stream"


def binary_note(media_type: Any, size: int) -> str:
    """The stand-in of a binary part: its media type and size, never its bytes."""
    return f"[{_kind(media_type)}, {size} bytes]"


def url_note(media_type: Any, url: Any) -> str:
    """The stand-in of a part the model is given by address (an image URL)."""
    return f"[{_kind(media_type)}: {url}]"


def base64_note(media_type: Any, data: str) -> str:
    """The stand-in of a base64 payload: its media type and decoded size (its length when
    it is not base64)."""
    try:
        size = len(base64.b64decode(data))
    except (binascii.Error, ValueError):
        size = len(data)
    return binary_note(media_type, size)


def address_note(media_type: Any, address: Any) -> str:
    """The stand-in of a part given by address: a ``data:`` URL's payload as ``base64_note``
    (with the URL's own media type), anything else as ``url_note``."""
    if isinstance(address, str) and address.startswith("data:"):
        head, _, payload = address.partition(",")
        return base64_note(head[5:].split(";")[0] or media_type, payload)
    return url_note(media_type, address)


def sent(result: ToolResult, rich: Rich | None) -> Any:
    """What the model is sent for ``result``: the native value when tool_call kept its stand-in
    as it was, else ``result.content`` (a refusal, a cut or redacted result, plain text)."""
    if rich is not None and result.ok and result.content == rich.text:
        return rich.native
    return result.content
