"""Reading what a recorder is handed besides a ``ToolResult``: backstop actions, decisions.

Payloads may be objects or mappings; a missing field reads as None.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ._metric_names import UNKNOWN


def backstop_rule(action: Any) -> str:
    """The rule (or guard) that asked for a backstop action; ``UNKNOWN`` if none is named."""
    rule = field(action, "rule") or field(action, "guard")
    rule = getattr(rule, "name", rule)
    return rule if isinstance(rule, str) and rule else UNKNOWN


def performed(action: Any) -> bool:
    """False for a backstop action that declined to call its tool again (``result`` None)."""
    missing = object()
    result = (
        action.get("result", missing)
        if isinstance(action, Mapping)
        else getattr(action, "result", missing)
    )
    return result is not None


def field(payload: Any, name: str) -> Any:
    if isinstance(payload, Mapping):
        return payload.get(name)
    return getattr(payload, name, None)
