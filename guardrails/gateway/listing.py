"""What a client reads of a published tool beyond its name, description and schema.

The engine lists a tool's name, description and input schema. An upstream's
``title``, ``annotations`` (``readOnlyHint``, ``destructiveHint``, ...) and
``outputSchema`` are added here as the upstream listed them: exactly the
fields pinned beside those (``pins.PINNED_FIELDS``), so nothing reaches a
client that a pin does not cover. Icons and ``_meta`` are not passed on.

A tool with an output schema promises structured content in every ``ok``
answer (the ``mcp`` client checks it). When the text was cut to
``max_result_chars`` or rewritten by a hook (a workflow's instructions), the
upstream's structured content (secrets cut out) is still sent beside it when
its JSON is no longer than ``max_result_chars``; otherwise the answer is its
text with ``isError: true``, rather than an answer the client would refuse.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from typing import Any

from ..context import ToolResult
from ..integrations._mcp_results import Forwarded
from ..integrations.mcp import call_tool_result

__all__ = ["EXTRA_FIELDS", "Shown", "shown_fields"]

EXTRA_FIELDS = ("title", "annotations", "outputSchema")
"""The listed fields passed on beside name, description and input schema."""


def shown_fields(
    upstreams: Iterable[Any], published: Mapping[tuple[str, str], str]
) -> dict[str, dict[str, Any]]:
    """Published name -> the upstream's ``EXTRA_FIELDS`` of that tool (those it listed)."""
    fields: dict[str, dict[str, Any]] = {}
    for upstream in upstreams:
        for tool in upstream.tools:
            name = published.get((upstream.name, tool.name))
            if name is None:
                continue
            listed = tool.model_dump(by_alias=True, exclude_none=True, include=_MODEL_FIELDS)
            found = {key: listed[key] for key in EXTRA_FIELDS if key in listed}
            if found:
                fields[name] = found
    return fields


_MODEL_FIELDS = {"title", "annotations", "output_schema"}


class Shown:
    """The extra fields of the tools served now (replaced with each engine)."""

    __slots__ = ("fields", "max_chars")

    def __init__(self, max_chars: int) -> None:
        self.fields: Mapping[str, Mapping[str, Any]] = {}
        self.max_chars = max_chars

    def listing(self, result: Any) -> Any:
        """A ``ListToolsResult`` with each tool's extra fields added."""
        fields = self.fields
        if not fields or not result.tools:
            return result
        tools = [_with(tool, fields.get(tool.name)) for tool in result.tools]
        return result.model_copy(update={"tools": tools})

    def answer(self, name: str, result: ToolResult) -> Any:
        """The MCP answer for ``result``, with the structured content the tool promised."""
        answered = call_tool_result(result)
        extra = self.fields.get(name)
        if (
            extra is None
            or "outputSchema" not in extra
            or answered.is_error
            or answered.structured_content is not None
        ):
            return answered
        # The text was cut or rewritten: the upstream's structured content goes
        # beside it when it is no longer than the text may be.
        value = result.value
        structured = value.structured if type(value) is Forwarded else None
        if structured is not None and _chars(structured) <= self.max_chars:
            return answered.model_copy(update={"structured_content": structured})
        return answered.model_copy(update={"is_error": True})


def _chars(value: Any) -> int:
    return len(json.dumps(value, ensure_ascii=False, separators=(",", ":")))


def _with(tool: Any, extra: Mapping[str, Any] | None) -> Any:
    if not extra:
        return tool
    from mcp.types import Tool

    return Tool.model_validate({**tool.model_dump(by_alias=True, exclude_none=True), **extra})
