"""``OpenTelemetryRecorder.hook()``: the ``execute_tool`` span opened before the tool runs.

``before`` opens the span and makes it current while the tool runs; ``after``
restores the context; the recorder's ``on_tool_result`` finds the span and
ends it. The open spans live in a context variable, a stack per thread or
task, and never in a table keyed by call id: two concurrent calls that reuse
one call id each find their own span, and a nested guarded call (a tool that
calls another) pushes and pops its own.
"""

from __future__ import annotations

from contextlib import suppress
from contextvars import ContextVar, Token
from typing import Protocol

from opentelemetry import context, trace
from opentelemetry.context import Context
from opentelemetry.trace import Span, Tracer

from .._call_state import state_for
from ..context import Invocation, ToolResult


class SpanRecorder(Protocol):
    """What the call hook uses of ``telemetry.OpenTelemetryRecorder``."""

    @property
    def _tracer(self) -> Tracer | None: ...
    def _resolve(self) -> Tracer | None: ...
    def _start_hook_span(self, tracer: Tracer, invocation: Invocation) -> Span: ...
    def _failed(self) -> None: ...


# (call id, span, context token or None once detached), innermost last.
_Entry = tuple[str, Span, "Token[Context] | None"]
_OPEN: ContextVar[tuple[_Entry, ...]] = ContextVar("guardrails_open_tool_spans", default=())
_MAX_DEPTH = 64  # results that never came: fall back to spans after the fact


def take_open_span(call_id: str) -> Span | None:
    """The innermost span ``hook()`` opened for ``call_id`` in this context, removed from it."""
    stack = _OPEN.get()
    if not stack:
        return None
    for i in range(len(stack) - 1, -1, -1):
        entry_id, span, token = stack[i]
        if entry_id == call_id:
            if token is not None:
                _detach(token)  # after() did not run (a later hook stopped the call)
            _OPEN.set(stack[:i] + stack[i + 1 :])
            return span
    return None


def open_span(call_id: str) -> Span | None:
    """The innermost span ``hook()`` opened for ``call_id`` in this context, left in place."""
    for entry_id, span, _ in reversed(_OPEN.get()):
        if entry_id == call_id:
            return span
    return None


def _note_ids(invocation: Invocation, span: Span) -> None:
    """Put the span's trace and span ids in the call's audit detail (W3C hex form)."""
    ids = span.get_span_context()
    if ids.is_valid:
        detail = state_for(invocation).detail
        detail["trace_id"] = format(ids.trace_id, "032x")
        detail["span_id"] = format(ids.span_id, "016x")


def _detach(token: Token[Context]) -> None:
    with suppress(Exception):  # a token from another context: nothing to restore here
        context.detach(token)


class ToolSpans:
    """The call hook of ``OpenTelemetryRecorder.hook()``.

    Calls refused before the hooks run (unknown tool, bad arguments, a
    guard's reject) get their span after the fact, as without the hook.
    """

    __slots__ = ("_recorder",)

    def __init__(self, recorder: SpanRecorder) -> None:
        self._recorder = recorder

    def before(self, invocation: Invocation, /) -> None:
        rec = self._recorder
        tracer = rec._tracer or rec._resolve()
        stack = _OPEN.get()
        if tracer is None or len(stack) >= _MAX_DEPTH:
            return None
        try:
            span = rec._start_hook_span(tracer, invocation)
            token = context.attach(trace.set_span_in_context(span))
            _OPEN.set((*stack, (invocation.call_id, span, token)))
            _note_ids(invocation, span)
        except Exception:  # telemetry never breaks a call
            rec._failed()
        return None

    def after(self, invocation: Invocation, result: ToolResult, /) -> ToolResult:
        stack = _OPEN.get()
        for i in range(len(stack) - 1, -1, -1):
            call_id, span, token = stack[i]
            if call_id == invocation.call_id and token is not None:
                _detach(token)
                _OPEN.set((*stack[:i], (call_id, span, None), *stack[i + 1 :]))
                break
        return result
