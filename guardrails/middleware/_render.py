"""Step 8: turn a tool's return value into the text the model sees, capped in size."""

from __future__ import annotations

import json
from typing import Any

try:  # the C encoder, without the per-call encoder set-up of json.dumps
    from json.encoder import c_make_encoder as _c_make_encoder  # type: ignore[attr-defined]
except ImportError:  # pragma: no cover - CPython always has it
    _c_make_encoder = None

__all__ = ["TRUNCATION_MARKER", "render"]

TRUNCATION_MARKER = "\n[guardrails: result truncated]"


def _unserialisable(value: Any) -> Any:
    raise TypeError(f"{type(value).__name__} is not JSON serialisable")


if _c_make_encoder is not None:
    # No markers dict: a shared one is not thread-safe, and a circular value
    # still fails (RecursionError), which the pipeline reports as an error.
    _encode_c = _c_make_encoder(
        None, _unserialisable, json.encoder.encode_basestring, None, ":", ",", False, False, False
    )

    def _encode(value: Any) -> str:
        return "".join(_encode_c(value, 0))

else:  # pragma: no cover
    _encode = json.JSONEncoder(  # type: ignore[assignment]
        ensure_ascii=False, allow_nan=False, separators=(",", ":"), default=_unserialisable
    ).encode


def render(value: Any, max_chars: int) -> tuple[str, bool]:
    """``(content, truncated)``. Raises when the value cannot be serialised."""
    if type(value) is str:
        text = value
    elif value is None:
        text = ""
    elif hasattr(value, "model_dump_json"):
        text = value.model_dump_json()
    else:
        text = _encode(value)
    if len(text) <= max_chars:
        return text, False
    keep = max(0, max_chars - len(TRUNCATION_MARKER))
    return text[:keep] + TRUNCATION_MARKER, True
