"""OpenTelemetry spans for the choke-points, after the GenAI semantic conventions.

Only the OpenTelemetry API is needed. The recorder sees a finished
``ToolResult`` and writes its span after the fact, with the call's real start
and end times, so nothing is done when no SDK is configured: the global
provider is looked up at first use, and again at most once a second until an
SDK provider appears. ``OpenTelemetryRecorder.hook()`` is the opt-in call hook
that opens the span before the tool runs instead, so that the tool's own spans
become its children.
"""

from __future__ import annotations

from collections.abc import Iterable
from contextvars import Token
from time import monotonic_ns, time_ns
from typing import Any

from opentelemetry import context, trace
from opentelemetry.context import Context
from opentelemetry.trace import (
    NoOpTracerProvider,
    ProxyTracerProvider,
    Span,
    SpanKind,
    Status,
    StatusCode,
    Tracer,
    TracerProvider,
)

from ._version import __version__
from .context import Escape, Invocation, ToolResult, VerdictRecord
from .metrics import UNKNOWN_TOOL, _backstop_rule, _field, _log_failure, _performed
from .verdicts import Outcome, Verdict, combine

__all__ = [
    "ATTR_CHOKE_POINT",
    "ATTR_ENFORCED",
    "ATTR_EXCEPTION_TYPE",
    "ATTR_GUARD",
    "ATTR_OUTCOME",
    "ATTR_REASON",
    "ATTR_REFUSED",
    "ATTR_RULE",
    "ATTR_SECRET_REDACTED",
    "ATTR_TRUNCATED",
    "ATTR_VERDICT",
    "ERROR_TYPE",
    "EVENT_ESCAPE",
    "EVENT_VERDICT",
    "EXECUTE_TOOL",
    "GEN_AI_OPERATION_NAME",
    "GEN_AI_TOOL_CALL_ID",
    "GEN_AI_TOOL_NAME",
    "GEN_AI_TOOL_TYPE",
    "SPAN_BACKSTOP",
    "SPAN_POST_RUN",
    "SPAN_PRE_TURN",
    "OpenTelemetryRecorder",
    "ToolSpans",
]

# -- span, event and attribute names (public API) ----------------------------

EXECUTE_TOOL = "execute_tool"
"""``gen_ai.operation.name`` of a tool call; its span is named ``execute_tool {tool}``."""
SPAN_PRE_TURN = "guardrails pre_turn"
SPAN_POST_RUN = "guardrails post_run"
SPAN_BACKSTOP = "guardrails backstop"

GEN_AI_OPERATION_NAME = "gen_ai.operation.name"
GEN_AI_TOOL_NAME = "gen_ai.tool.name"
GEN_AI_TOOL_CALL_ID = "gen_ai.tool.call.id"
GEN_AI_TOOL_TYPE = "gen_ai.tool.type"
ERROR_TYPE = "error.type"

ATTR_OUTCOME = "guardrails.outcome"
ATTR_VERDICT = "guardrails.verdict"
ATTR_REASON = "guardrails.reason"
ATTR_TRUNCATED = "guardrails.truncated"
ATTR_SECRET_REDACTED = "guardrails.secret_redacted"
ATTR_GUARD = "guardrails.guard"
ATTR_CHOKE_POINT = "guardrails.choke_point"
ATTR_ENFORCED = "guardrails.enforced"
ATTR_EXCEPTION_TYPE = "exception.type"
ATTR_RULE = "guardrails.rule"
ATTR_REFUSED = "guardrails.refused"

EVENT_VERDICT = "guardrails.guard_verdict"
EVENT_ESCAPE = "guardrails.escape"

_SPAN_NAMES = {"pre_turn": SPAN_PRE_TURN, "post_run": SPAN_POST_RUN}
_NO_SDK = (ProxyTracerProvider, NoOpTracerProvider)
_RECHECK_NS = 1_000_000_000
_MAX_OPEN = 10_000
_OK = Outcome.OK


class OpenTelemetryRecorder:
    """A recorder that writes one span per tool call, pre_turn, post_run and backstop.

    ``tracer_provider`` defaults to the global one. Guard verdicts and
    fail-open escapes are span events. Spans are children of whatever span is
    current when the call is recorded (the agent's turn, for example).
    """

    name = "opentelemetry"

    def __init__(self, tracer_provider: TracerProvider | None = None) -> None:
        self.failures = 0
        self._provider = tracer_provider
        self._tracer: Tracer | None = None
        self._next_check = 0
        # Spans opened by ``hook()`` before their tool ran, by call id, until
        # the call's result arrives.
        self._open: dict[str, Span] = {}

    def hook(self) -> ToolSpans:
        """A call hook that opens each tool's span before the tool runs.

        Then the spans the tool itself makes (an HTTP client, a database
        driver) are children of its ``execute_tool`` span. Register both:
        ``Guardrails(..., hooks=[spans.hook()], recorder=[spans])``.
        """
        return ToolSpans(self)

    def _resolve(self) -> Tracer | None:
        # Called only while no SDK tracer is known; rate-limited because
        # looking up the global provider costs about a microsecond.
        now = monotonic_ns()
        if now < self._next_check:
            return None
        self._next_check = now + _RECHECK_NS
        provider = self._provider or trace.get_tracer_provider()
        if isinstance(provider, _NO_SDK):
            return None
        self._tracer = provider.get_tracer("guardrails", __version__)
        return self._tracer

    # -- the Recorder protocol ------------------------------------------------

    def on_tool_result(self, result: ToolResult, /) -> None:
        tracer = self._tracer or self._resolve()
        if tracer is None:
            return
        try:
            end = time_ns()
            start = end - result.duration_ns
            tool = result.tool if result.known_tool else UNKNOWN_TOOL
            outcome = result.outcome
            attributes: dict[str, Any] = {
                GEN_AI_OPERATION_NAME: EXECUTE_TOOL,
                GEN_AI_TOOL_NAME: tool,
                GEN_AI_TOOL_CALL_ID: result.call_id,
                GEN_AI_TOOL_TYPE: "function",
                ATTR_OUTCOME: outcome.value,
                ATTR_VERDICT: result.verdict.value,
            }
            if result.reason is not None:
                attributes[ATTR_REASON] = str(result.reason)
            if result.truncated:
                attributes[ATTR_TRUNCATED] = True
            if "secret_redacted" in result.flags:
                attributes[ATTR_SECRET_REDACTED] = True
            if outcome is not _OK:
                attributes[ERROR_TYPE] = outcome.value
            span = self._open.pop(result.call_id, None) if self._open else None
            if span is None:
                span = tracer.start_span(
                    f"{EXECUTE_TOOL} {tool}",
                    kind=SpanKind.INTERNAL,
                    start_time=start,
                    attributes=attributes,
                )
            else:
                span.set_attributes(attributes)
            if span.is_recording():
                _add_events(span, result.verdicts, result.escapes, start, end)
                if outcome is not _OK:
                    span.set_status(Status(StatusCode.ERROR, outcome.value))
            span.end(end_time=end)
        except Exception:  # telemetry never breaks a call
            self._failed()

    def on_event(self, kind: str, payload: Any, /) -> None:
        tracer = self._tracer or self._resolve()
        if tracer is None:
            return
        try:
            if kind == "backstop":
                self._backstop(tracer, payload)
                return
            name = _SPAN_NAMES.get(kind)
            if name is None:
                return
            verdicts = tuple(getattr(payload, "verdicts", ()))
            escapes = tuple(getattr(payload, "escapes", ()))
            verdict = getattr(payload, "verdict", None)
            if not isinstance(verdict, Verdict):
                verdict = combine(r.verdict for r in verdicts if r.enforced)
            end = time_ns()
            duration = getattr(payload, "duration_ns", None)
            if not isinstance(duration, int):
                duration = sum(r.duration_ns for r in verdicts)  # the guards, one after another
            start = end - duration
            attributes: dict[str, Any] = {ATTR_CHOKE_POINT: kind, ATTR_VERDICT: verdict.value}
            refused = getattr(payload, "refused", None)
            if isinstance(refused, bool):
                attributes[ATTR_REFUSED] = refused
            span = tracer.start_span(name, start_time=start, attributes=attributes)
            if span.is_recording():
                _add_events(span, verdicts, escapes, start, end)
            span.end(end_time=end)
        except Exception:  # telemetry never breaks a call
            self._failed()

    def _backstop(self, tracer: Tracer, action: Any) -> None:
        if not _performed(action):
            return
        tool = _field(action, "tool")
        tool = getattr(tool, "name", tool)
        attributes: dict[str, Any] = {
            ATTR_CHOKE_POINT: "post_run",
            ATTR_RULE: _backstop_rule(action),
            GEN_AI_TOOL_NAME: tool if isinstance(tool, str) and tool else UNKNOWN_TOOL,
        }
        result = _field(action, "result")
        if isinstance(result, ToolResult):
            # The call itself has its own execute_tool span; this links to it.
            attributes[GEN_AI_TOOL_CALL_ID] = result.call_id
            attributes[ATTR_OUTCOME] = result.outcome.value
        tracer.start_span(SPAN_BACKSTOP, attributes=attributes).end()

    def _failed(self) -> None:
        self.failures += 1
        _log_failure(self.name, self.failures)


class ToolSpans:
    """The call hook of ``OpenTelemetryRecorder.hook()``.

    ``before`` opens the ``execute_tool`` span and makes it current while the
    tool runs; ``after`` restores the context; the recorder's
    ``on_tool_result`` adds the verdicts and escapes and ends the span. Calls
    refused before the hooks run (unknown tool, bad arguments, a guard's
    reject) get their span after the fact, as without the hook.
    """

    __slots__ = ("_recorder", "_tokens")

    def __init__(self, recorder: OpenTelemetryRecorder) -> None:
        self._recorder = recorder
        self._tokens: dict[str, Token[Context]] = {}

    def before(self, invocation: Invocation, /) -> None:
        rec = self._recorder
        tracer = rec._tracer or rec._resolve()
        if tracer is None or len(rec._open) >= _MAX_OPEN:
            return None  # no SDK; or results that never came: fall back to after the fact
        try:
            call_id = invocation.call_id
            span = tracer.start_span(
                f"{EXECUTE_TOOL} {invocation.name}",
                kind=SpanKind.INTERNAL,
                attributes={
                    GEN_AI_OPERATION_NAME: EXECUTE_TOOL,
                    GEN_AI_TOOL_NAME: invocation.name,
                    GEN_AI_TOOL_CALL_ID: call_id,
                },
            )
            self._tokens[call_id] = context.attach(trace.set_span_in_context(span))
            rec._open[call_id] = span
        except Exception:  # telemetry never breaks a call
            rec._failed()
        return None

    def after(self, invocation: Invocation, result: ToolResult, /) -> ToolResult:
        token = self._tokens.pop(invocation.call_id, None) if self._tokens else None
        if token is not None:
            try:
                context.detach(token)
            except Exception:  # telemetry never breaks a call
                self._recorder._failed()
        return result


def _add_events(
    span: trace.Span,
    verdicts: Iterable[VerdictRecord],
    escapes: Iterable[Escape],
    start: int,
    end: int,
) -> None:
    # Guards run one after the other, so a verdict's time is about the start
    # plus the durations of the guards before it and its own.
    at = start
    decided: dict[tuple[str, str], Verdict] = {}
    for record in verdicts:
        at = min(at + record.duration_ns, end)
        attributes: dict[str, Any] = {
            ATTR_GUARD: record.guard,
            ATTR_CHOKE_POINT: record.choke_point.value,
            ATTR_VERDICT: record.verdict.value,
            ATTR_ENFORCED: record.enforced,
        }
        if isinstance(record.reason, str):
            attributes[ATTR_REASON] = record.reason
        span.add_event(EVENT_VERDICT, attributes, timestamp=at)
        decided[(record.guard, record.choke_point)] = record.verdict
    for escape in escapes:
        attributes = {
            ATTR_GUARD: escape.guard,
            ATTR_CHOKE_POINT: escape.choke_point.value,
            ATTR_REASON: escape.reason.value,
        }
        verdict = decided.get((escape.guard, escape.choke_point))
        if verdict is not None:
            attributes[ATTR_VERDICT] = verdict.value
        if escape.exception is not None:
            # The type only: an exception's text may hold data that must not leave.
            attributes[ATTR_EXCEPTION_TYPE] = type(escape.exception).__qualname__
        span.add_event(EVENT_ESCAPE, attributes, timestamp=end)
