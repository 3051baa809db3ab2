"""One scripted turn of ``guardrails demo``."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

__all__ = ["Scene"]


@dataclass(frozen=True)
class Scene:
    """One user turn: what the user wrote, the model's scripted calls, and its reply."""

    title: str
    user: str
    calls: tuple[tuple[str, dict[str, Any]], ...]
    reply: str
