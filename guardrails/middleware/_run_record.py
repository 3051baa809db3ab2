"""What a post_run guard sees: the run, as it happened."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from ..context import ToolResult, TurnContext
from ..verdicts import Outcome

__all__ = ["RunRecord"]


@dataclass(frozen=True, slots=True)
class RunRecord:
    """What a post_run guard sees: the run, as it happened.

    ``structured`` is the structured output as a dict, or ``None``; when it
    was given but could not be read, ``structured_error`` says why
    (``not_json``, ``not_an_object`` or ``too_deep``) and rules that read it do
    not evaluate.
    """

    results: tuple[ToolResult, ...]
    text: str | None
    structured: Mapping[str, Any] | None
    context: TurnContext
    structured_error: str | None = None
    turn: Any = None

    def calls(self, tool: str) -> tuple[ToolResult, ...]:
        return tuple(r for r in self.results if r.tool == tool)

    def called_ok(self, tool: str) -> bool:
        """Was ``tool`` called successfully in this run?"""
        return any(r.tool == tool and r.outcome is Outcome.OK for r in self.results)
