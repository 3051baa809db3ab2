"""The recorder interface: where every verdict, escape and outcome is counted.

A recorder is any object with the methods of ``Recorder``; the engine calls
the one it was given, and telemetry failures are logged, never raised into a
call. OpenTelemetry, Prometheus and the audit log are recorders; ``Recorders``
fans out to several. ``guardrails.testing.MemoryRecorder`` keeps everything in
lists for tests.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable
from typing import Any, Protocol, runtime_checkable

from ..context import ToolResult

__all__ = ["Recorder", "Recorders", "safe_record"]

log = logging.getLogger("guardrails")


@runtime_checkable
class Recorder(Protocol):
    """Receives what the choke-points decided. Every method must be cheap."""

    def on_tool_result(self, result: ToolResult, /) -> None: ...

    def on_event(self, kind: str, payload: Any, /) -> None:
        """Anything other than a tool result: ``pre_turn``, ``post_run``, ``backstop``."""
        ...


class Recorders:
    """Several recorders as one. One failing does not stop the others."""

    __slots__ = (
        "_async",
        "_counts",
        "_turn_pairs",
        "_with_turn",
        "awaits",
        "failures",
        "recorders",
    )

    def __init__(self, recorders: Iterable[Recorder]) -> None:
        self.recorders = tuple(recorders)
        self.failures = 0
        self._counts: dict[int, int] = {}  # failures by recorder (its id), for the log
        # Looked up once: which recorders also want the turn with each result.
        self._with_turn = tuple(getattr(r, "on_turn_result", None) for r in self.recorders)
        # A recorder that writes to a store may offer ``aon_turn_result`` and
        # ``aon_event``: the async entry points await them (off the event loop).
        self._async = tuple(
            (getattr(r, "aon_turn_result", None), getattr(r, "aon_event", None))
            for r in self.recorders
        )
        self.awaits = any(a is not None or e is not None for a, e in self._async)
        # Each recorder with its ``on_turn_result``, paired once, not per call.
        self._turn_pairs = tuple(zip(self.recorders, self._with_turn, strict=True))

    def on_tool_result(self, result: ToolResult, /) -> None:
        for recorder in self.recorders:
            try:
                recorder.on_tool_result(result)
            except Exception:
                self._failed(recorder)

    def on_turn_result(self, turn: Any, result: ToolResult, /) -> None:
        """``on_tool_result``, except that a recorder defining ``on_turn_result(turn,
        result)`` gets the turn too (the audit log reads its tenant and session)."""
        for recorder, with_turn in self._turn_pairs:
            try:
                if with_turn is None:
                    recorder.on_tool_result(result)
                else:
                    with_turn(turn, result)
            except Exception:
                self._failed(recorder)

    def on_event(self, kind: str, payload: Any, /) -> None:
        for recorder in self.recorders:
            try:
                recorder.on_event(kind, payload)
            except Exception:
                self._failed(recorder)

    async def aon_turn_result(self, turn: Any, result: ToolResult, /) -> None:
        """``on_turn_result`` for the async entry points."""
        for recorder, with_turn, (awaited, _) in zip(
            self.recorders, self._with_turn, self._async, strict=True
        ):
            try:
                if awaited is not None:
                    await awaited(turn, result)
                elif with_turn is None:
                    recorder.on_tool_result(result)
                else:
                    with_turn(turn, result)
            except Exception:
                self._failed(recorder)

    async def aon_event(self, kind: str, payload: Any, /) -> None:
        """``on_event`` for the async entry points."""
        for recorder, (_, awaited) in zip(self.recorders, self._async, strict=True):
            try:
                if awaited is not None:
                    await awaited(kind, payload)
                else:
                    recorder.on_event(kind, payload)
            except Exception:
                self._failed(recorder)

    def _failed(self, recorder: object) -> None:
        # Called in an ``except`` block: log_failure logs the traceback at the
        # recorder's 1st, 10th, 100th, ... failure, not at every call.
        self.failures += 1
        count = self._counts[id(recorder)] = self._counts.get(id(recorder), 0) + 1
        log_failure(_name_of(recorder), count)


def _name_of(recorder: object) -> str:
    """The recorder's ``name`` if it is a str, else its class's name (never its repr)."""
    try:
        name = getattr(recorder, "name", None)
    except Exception:  # a hostile recorder's __getattr__
        name = None
    if type(name) is str:
        return name
    return str(type.__dict__["__name__"].__get__(type(recorder)))


def combine_recorders(recorder: Recorder | Iterable[Recorder] | None) -> Recorders | None:
    if recorder is None:
        return None
    if isinstance(recorder, Recorder):
        return Recorders((recorder,))
    items = tuple(recorder)
    return Recorders(items) if items else None


def log_failure(recorder: str, failures: int) -> None:
    """Log a recorder's failure: with its traceback at the 1st, 10th, 100th, ... one.

    A broken exporter must not flood the log at the rate of tool calls.
    """
    if str(failures).rstrip("0") == "1":
        log.warning("%s recorder failed (%d failures so far)", recorder, failures, exc_info=True)
    else:
        log.debug("%s recorder failed", recorder, exc_info=True)


def safe_record(recorders: Recorders | None, kind: str, payload: Any) -> None:
    if recorders is not None:
        recorders.on_event(kind, payload)


async def asafe_record(recorders: Recorders | None, kind: str, payload: Any) -> None:
    if recorders is not None:
        if recorders.awaits:
            await recorders.aon_event(kind, payload)
        else:
            recorders.on_event(kind, payload)
