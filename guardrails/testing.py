"""Test doubles that ship with the package: use them in your own tests."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

from .context import Escape, ToolResult, VerdictRecord
from .verdicts import Outcome

__all__ = ["FakeClock", "MemoryRecorder"]


@dataclass
class MemoryRecorder:
    """Keeps every tool result and event in lists."""

    results: list[ToolResult] = field(default_factory=list)
    events: list[tuple[str, Any]] = field(default_factory=list)

    def on_tool_result(self, result: ToolResult, /) -> None:
        self.results.append(result)

    def on_event(self, kind: str, payload: Any, /) -> None:
        self.events.append((kind, payload))

    @property
    def verdicts(self) -> list[VerdictRecord]:
        return [v for r in self.results for v in r.verdicts]

    @property
    def escapes(self) -> list[Escape]:
        return [e for r in self.results for e in r.escapes]

    @property
    def outcomes(self) -> list[Outcome]:
        return [r.outcome for r in self.results]

    def clear(self) -> None:
        self.results.clear()
        self.events.clear()


class FakeClock:
    """A clock that moves only when told to. Call it for the time in seconds."""

    def __init__(self, start: float = 1_000_000.0) -> None:
        self.now = start

    def __call__(self) -> float:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += seconds

    def ticks(self, step: float) -> Iterator[float]:
        while True:
            self.now += step
            yield self.now
