"""The OpenAI Agents SDK's tool output items (text, image, file) as a rich result.

A function tool may return ``ToolOutputText``/``ToolOutputImage``/
``ToolOutputFileContent`` (or their dict forms, or a list of them): the SDK
sends them to the model as input items. tool_call renders a stand-in for them
(``_rich``): the text as it is and one note per image or file, never its bytes.
"""

from __future__ import annotations

from typing import Any

from ._rich import Rich, address_note, base64_note

__all__ = ["output_items"]


def output_items(value: Any) -> Rich | None:
    """A stand-in for SDK output items (one, or a list); None for any other result."""
    from agents.tool import ValidToolOutputPydanticModelsTypeAdapter

    items = list(value) if isinstance(value, list | tuple) else [value]
    if not items or not all(isinstance(i, dict) or hasattr(i, "model_dump") for i in items):
        return None
    parsed = []
    for item in items:
        if isinstance(item, dict) and "type" not in item:
            return None  # a plain dict result, as the SDK reads it
        try:
            parsed.append(ValidToolOutputPydanticModelsTypeAdapter.validate_python(item))
        except ValueError:  # pydantic's ValidationError: not an output item
            return None
    return Rich("\n".join(_item_text(i) for i in parsed), value)


def _item_text(item: Any) -> str:
    if item.type == "text":
        return str(item.text)
    if item.type == "image":
        return address_note("image", item.image_url or item.file_id)
    if item.file_data is not None:
        return base64_note(None, item.file_data)
    return address_note(None, item.file_url or item.file_id)
