"""What a pre_turn guard sees: the user's text, the candidate tools, the turn."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ..context import TurnContext
from ..text import Text

__all__ = ["PreTurnRequest"]


@dataclass(frozen=True, slots=True)
class PreTurnRequest:
    """What a pre_turn guard sees.

    ``text`` is the user's text (``text.raw``; ``text.normalised`` and
    ``text.word_bytes`` are computed once, on first use, and shared by every rule);
    ``tools`` the names of the candidate tools, in order; ``input`` the turn as
    the caller passed it.
    """

    text: Text
    tools: tuple[str, ...]
    context: TurnContext
    input: Any = None
    turn: Any = None
