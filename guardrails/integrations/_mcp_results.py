"""MCP results with their shape: what a server tool answered, and what the client is sent.

A server tool called through the engine (``tools_from_server``, the gateway's
upstreams) answers ``Forwarded``: its content blocks and structured content,
whose text (``model_dump_json``, what the engine renders, caps and audits) is
the text blocks as they are and every other block as its JSON, one per line.
Structured content is kept only when a text block holds it as JSON, unless
the caller redacts it itself (``forwarded(..., structured=True)``: the gateway,
which also leaves base64 data out of the text with ``binary=False``).
``answer`` sends an ``ok`` result back in the same shape: MCP content blocks
as they are, a JSON object also as ``structuredContent``, when the model would
read exactly that value's text (not cut to ``max_result_chars``, not
rewritten by a hook); anything else is its text.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from ..context import ToolResult
from ._common import reads_as_value

if TYPE_CHECKING:
    from mcp.types import CallToolResult

__all__ = ["Forwarded", "answer", "forwarded", "text_of"]


def text_of(blocks: Iterable[Any], *, binary: bool = True) -> str:
    """Text blocks as they are, every other block as its JSON, one per line
    (``binary=False``: without base64 ``data`` and ``blob`` values)."""
    return "\n".join(
        block.text
        if getattr(block, "type", None) == "text"
        else block.model_dump_json(by_alias=True, exclude_none=True)
        if binary
        else json.dumps(_unbinary(block.model_dump(by_alias=True, exclude_none=True)))
        for block in blocks
    )


def _unbinary(value: dict[str, Any]) -> dict[str, Any]:
    kept = {k: v for k, v in value.items() if k not in ("data", "blob")}
    inner = kept.get("resource")
    if type(inner) is dict:
        kept["resource"] = _unbinary(inner)
    return kept


@dataclass(frozen=True, slots=True)
class Forwarded:
    """A server tool's ``ok`` answer: its blocks, its structured content, and their text."""

    content: tuple[Any, ...]
    structured: dict[str, Any] | None
    text: str

    def model_dump_json(self) -> str:
        """What the engine renders: the text the model reads when the shape is not kept."""
        return self.text


def forwarded(result: Any, *, structured: bool = False, binary: bool = True) -> Forwarded:
    """A ``Forwarded`` of a server's ``CallToolResult`` (its content read once).

    Its structured content is kept only when one of its text blocks is that
    value's JSON (as the MCP specification asks of servers): then the text,
    which the engine caps, redacts and audits, holds all the model is sent.
    ``structured=True`` keeps any JSON object (a tool returning a string often
    answers ``{"result": "..."}`` beside it): the caller redacts it. ``answer``
    sends it only beside the whole text (not cut, not rewritten by a hook).
    ``binary=False`` leaves base64 data (images, audio, blobs) out of the text:
    it is not text a model reads, and the caller bounds it in bytes.
    """
    content = tuple(result.content)
    value = getattr(result, "structured_content", None)
    kept = value if type(value) is dict and (structured or _in_text(value, content)) else None
    return Forwarded(content, kept, text_of(content, binary=binary))


def _in_text(value: dict[str, Any], blocks: Iterable[Any]) -> bool:
    for block in blocks:
        text = getattr(block, "text", None) if getattr(block, "type", None) == "text" else None
        if type(text) is str and text.lstrip()[:1] == "{":
            try:
                if json.loads(text) == value:
                    return True
            except (ValueError, RecursionError):
                continue
    return False


def _blocks(value: Any) -> tuple[list[Any], dict[str, Any] | None] | None:
    """The blocks and structured content ``value`` is made of; None for any other value."""
    from mcp.types import AudioContent, EmbeddedResource, ImageContent, ResourceLink, TextContent

    if type(value) is Forwarded:
        return list(value.content), value.structured
    # One block (a list of them is not a result the engine can render).
    kinds = (AudioContent, EmbeddedResource, ImageContent, ResourceLink, TextContent)
    return ([value], None) if type(value) in kinds else None


def answer(result: ToolResult) -> CallToolResult:
    """The MCP answer for a guarded call: ``isError`` unless the outcome is ``ok``."""
    from mcp.types import CallToolResult, ContentBlock, TextContent

    text: list[ContentBlock] = [TextContent(type="text", text=result.content)]
    if result.is_error:
        return CallToolResult(content=text, is_error=True)
    value = result.value
    shaped = _blocks(value)
    if (shaped is None and type(value) is not dict) or not reads_as_value(result):
        return CallToolResult(content=text, is_error=False)
    if shaped is None:
        return CallToolResult(content=text, structured_content=value, is_error=False)
    blocks, structured = shaped
    return CallToolResult(content=blocks, structured_content=structured, is_error=False)
