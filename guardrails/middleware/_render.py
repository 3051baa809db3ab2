"""Step 8: turn a tool's return value into the text the model sees, capped in size."""

from __future__ import annotations

import json
from typing import Any

__all__ = ["TRUNCATION_MARKER", "render"]

TRUNCATION_MARKER = "\n[guardrails: result truncated]"


def render(value: Any, max_chars: int) -> tuple[str, bool]:
    """``(content, truncated)``. Raises when the value cannot be serialised."""
    if type(value) is str:
        text = value
    elif value is None:
        text = ""
    elif hasattr(value, "model_dump_json"):
        text = value.model_dump_json()
    else:
        text = json.dumps(value, ensure_ascii=False, allow_nan=False, separators=(",", ":"))
    if len(text) <= max_chars:
        return text, False
    keep = max(0, max_chars - len(TRUNCATION_MARKER))
    return text[:keep] + TRUNCATION_MARKER, True
