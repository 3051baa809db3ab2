"""OpenTelemetry spans for the choke-points, after the GenAI semantic conventions.

Only the OpenTelemetry API is needed. The recorder sees a finished
``ToolResult`` and writes its span after the fact, with the call's real start
and end times, so nothing is done when no SDK is configured: the global
provider is looked up at first use, and again at most once a second until an
SDK provider appears. ``OpenTelemetryRecorder.hook()`` is the opt-in call hook
that opens the span before the tool runs instead, so that the tool's own spans
become its children (``_tool_spans.py``). Which outcomes set the span status
to ``ERROR``, and why, is in ``_span_fields.py``.
"""

from __future__ import annotations

from collections.abc import Iterable
from time import monotonic_ns, time_ns
from typing import Any

from opentelemetry import trace
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

from .._version import __version__
from ..context import Escape, Invocation, ToolResult, VerdictRecord
from ..verdicts import EscapeReason, Outcome, Verdict, combine
from ._approval_event import APPROVAL
from ._approval_spans import ATTR_APPROVAL_REQUEST, ATTR_APPROVAL_WAITED, EVENT_APPROVAL
from ._approval_spans import flush as _flush_approvals
from ._approval_spans import note as _note_approval
from ._evaluation_logs import EvaluationLog
from ._faults import fault_escapes
from ._metric_names import UNKNOWN_TOOL
from ._payload import backstop_rule as _backstop_rule
from ._payload import field as _field
from ._payload import performed as _performed
from ._span_fields import MAX_CALL_ID, call_id_value, error_type, fault_of
from ._tool_spans import ToolSpans, take_open_span
from .recorder import log_failure

__all__ = [
    "ATTR_APPROVAL_REQUEST",
    "ATTR_APPROVAL_WAITED",
    "ATTR_CHOKE_POINT",
    "ATTR_ENFORCED",
    "ATTR_EXCEPTION_TYPE",
    "ATTR_GUARD",
    "ATTR_OUTCOME",
    "ATTR_REASON",
    "ATTR_REFUSED",
    "ATTR_REVISION",
    "ATTR_RULE",
    "ATTR_SECRET_REDACTED",
    "ATTR_TRUNCATED",
    "ATTR_VERDICT",
    "ERROR_TYPE",
    "EVENT_APPROVAL_DENIED",
    "EVENT_APPROVAL_EXPIRED",
    "EVENT_APPROVAL_GRANTED",
    "EVENT_APPROVAL_REQUESTED",
    "EVENT_ESCAPE",
    "EVENT_FAULT",
    "EVENT_VERDICT",
    "EXECUTE_TOOL",
    "GEN_AI_EVALUATION_NAME",
    "GEN_AI_EVALUATION_SCORE_LABEL",
    "GEN_AI_OPERATION_NAME",
    "GEN_AI_TOOL_CALL_ID",
    "GEN_AI_TOOL_DESCRIPTION",
    "GEN_AI_TOOL_NAME",
    "GEN_AI_TOOL_TYPE",
    "MAX_CALL_ID",
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
GEN_AI_TOOL_DESCRIPTION = "gen_ai.tool.description"
GEN_AI_EVALUATION_NAME = "gen_ai.evaluation.name"
GEN_AI_EVALUATION_SCORE_LABEL = "gen_ai.evaluation.score.label"
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
ATTR_REVISION = "guardrails.revision"
"""The engine's ``Guardrails.revision``: the rules that made the decision."""

EVENT_VERDICT = "gen_ai.evaluation.result"
"""One guard's verdict: the GenAI conventions' evaluation event."""
EVENT_ESCAPE = "guardrails.escape"
"""A fail-open escape: the action went on without an enforced decision."""
EVENT_FAULT = "guardrails.fail_closed_fault"
"""A fail-closed guard could not decide and the action was stopped."""
EVENT_APPROVAL_REQUESTED = EVENT_APPROVAL["requested"]
"""The call needed approval and a request was stored (on the call's span)."""
EVENT_APPROVAL_GRANTED = EVENT_APPROVAL["granted"]
"""The call consumed its approval and ran."""
EVENT_APPROVAL_DENIED = EVENT_APPROVAL["denied"]
"""A person's denial stopped the call."""
EVENT_APPROVAL_EXPIRED = EVENT_APPROVAL["expired"]
"""The call's request had lapsed unused; a new one is requested."""

_SPAN_NAMES = {"pre_turn": SPAN_PRE_TURN, "post_run": SPAN_POST_RUN}
# What hook() already set on the span it opened: not set (and cleaned by the SDK) twice.
_SET_AT_START = (GEN_AI_OPERATION_NAME, GEN_AI_TOOL_CALL_ID, GEN_AI_TOOL_DESCRIPTION)
_NO_SDK = (ProxyTracerProvider, NoOpTracerProvider)
_RECHECK_NS = 1_000_000_000
_OK = Outcome.OK
# Failures whose cause is not an exception still get an error.type.
_ERROR_REASONS = frozenset({EscapeReason.TIMEOUT, EscapeReason.INVALID_RETURN})


class OpenTelemetryRecorder:
    """A recorder that writes one span per tool call, pre_turn, post_run and backstop.

    ``tracer_provider`` defaults to the global one. Guard verdicts, fail-open
    escapes and fail-closed faults are span events; each verdict is also a
    ``gen_ai.evaluation.result`` log record through ``logger_provider`` (the
    global one by default), in the span's context. ``span_events=False``
    leaves the verdicts' span events out, ``log_events=False`` the records. Spans are children of
    whatever span is current when the call is recorded (the agent's turn, for
    example). ``bind(engine)`` (or ``engine=``) lets the spans carry each
    tool's description.
    """

    name = "opentelemetry"

    def __init__(
        self,
        tracer_provider: TracerProvider | None = None,
        *,
        engine: Any = None,
        logger_provider: Any = None,
        span_events: bool = True,
        log_events: bool = True,
    ) -> None:
        self.failures = 0
        self._provider = tracer_provider
        # Verdicts as span events (the default while OpenTelemetry retires
        # them) and as log-based events through the logs API.
        self._span_events = span_events
        self._log = EvaluationLog(logger_provider) if log_events else None
        self._tracer: Tracer | None = None
        self._next_check = 0
        self._engines: list[Any] = []
        if engine is not None:
            self.bind(engine)

    def bind(self, engine: Any) -> OpenTelemetryRecorder:
        """Read tool descriptions from ``engine`` (tools added later included)."""
        if not any(e is engine for e in self._engines):
            self._engines.append(engine)
        return self

    def hook(self) -> ToolSpans:
        """A call hook that opens each tool's span before the tool runs.

        Then the spans the tool itself makes (an HTTP client, a database
        driver) are children of its ``execute_tool`` span. Register both:
        ``Guardrails(..., hooks=[spans.hook()], recorder=[spans])``.
        """
        return ToolSpans(self)

    def _start_hook_span(self, tracer: Tracer, invocation: Invocation) -> Span:
        """The span ``hook()`` opens before the tool runs; the result completes it."""
        attributes: dict[str, Any] = {
            GEN_AI_OPERATION_NAME: EXECUTE_TOOL,
            GEN_AI_TOOL_NAME: invocation.name,
        }
        call_id = call_id_value(invocation.call_id)
        if call_id is not None:
            attributes[GEN_AI_TOOL_CALL_ID] = call_id
        description = getattr(invocation.tool, "description", None)
        if isinstance(description, str) and description:
            attributes[GEN_AI_TOOL_DESCRIPTION] = description
        return tracer.start_span(
            f"{EXECUTE_TOOL} {invocation.name}", kind=SpanKind.INTERNAL, attributes=attributes
        )

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

    def _revision_for(self, tool: str) -> str | None:
        """The revision of the bound engine that has ``tool`` (else of the first bound)."""
        engines = self._engines
        for engine in engines:
            if tool in getattr(engine, "tools", {}):
                return _revision(engine)
        return _revision(engines[0]) if engines else None

    def description(self, tool: str) -> str | None:
        for engine in self._engines:
            spec = getattr(engine, "tools", {}).get(tool)
            text = getattr(spec, "description", None)
            if isinstance(text, str) and text:
                return text
        return None

    # -- the Recorder protocol ------------------------------------------------

    def on_tool_result(self, result: ToolResult, /) -> None:
        tracer = self._tracer or self._resolve()
        if tracer is None:  # hook() opens spans only once a tracer is known
            return
        try:
            span = take_open_span(result.call_id)  # opened by hook(), if any
            end = time_ns()
            start = end - result.duration_ns
            tool = result.tool if result.known_tool else UNKNOWN_TOOL
            attributes, fault = self._attributes(result, tool)
            if span is None:
                span = tracer.start_span(
                    f"{EXECUTE_TOOL} {tool}",
                    kind=SpanKind.INTERNAL,
                    start_time=start,
                    attributes=attributes,
                )
            else:  # opened by hook() with the call's name, id and description
                for key in _SET_AT_START:
                    attributes.pop(key, None)
                span.set_attributes(attributes)
            _flush_approvals(span, result.call_id)  # the approval gate's, if any
            if span.is_recording():
                self._events(span, result.verdicts, result.escapes, start, end, result.reason)
                if fault is not None:
                    span.set_status(Status(StatusCode.ERROR, result.outcome.value))
            span.end(end_time=end)
        except Exception:  # telemetry never breaks a call
            self._failed()

    def _attributes(self, result: ToolResult, tool: str) -> tuple[dict[str, Any], str | None]:
        outcome = result.outcome
        attributes: dict[str, Any] = {
            GEN_AI_OPERATION_NAME: EXECUTE_TOOL,
            GEN_AI_TOOL_NAME: tool,
            GEN_AI_TOOL_TYPE: "function",
            ATTR_OUTCOME: outcome.value,
            ATTR_VERDICT: result.verdict.value,
        }
        call_id = call_id_value(result.call_id)
        if call_id is not None:
            attributes[GEN_AI_TOOL_CALL_ID] = call_id
        if self._engines and result.known_tool:
            text = self.description(tool)
            if text is not None:
                attributes[GEN_AI_TOOL_DESCRIPTION] = text
        revision = self._revision_for(tool)
        if revision is not None:
            attributes[ATTR_REVISION] = revision
        if result.reason is not None:
            attributes[ATTR_REASON] = str(result.reason)
        if result.truncated:
            attributes[ATTR_TRUNCATED] = True
        if "secret_redacted" in result.flags:
            attributes[ATTR_SECRET_REDACTED] = True
        fault = fault_of(result)
        if outcome is not _OK:
            attributes[ERROR_TYPE] = fault or outcome.value
        return attributes, fault

    def on_event(self, kind: str, payload: Any, /) -> None:
        tracer = self._tracer or self._resolve()
        if tracer is None:
            return
        try:
            if kind == APPROVAL:
                _note_approval(payload)  # on the call's span (_approval_spans.py)
                return
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
            revision = _revision(getattr(getattr(payload, "turn", None), "engine", None))
            if revision is None and self._engines:
                revision = _revision(self._engines[0])
            if revision is not None:
                attributes[ATTR_REVISION] = revision
            span = tracer.start_span(name, start_time=start, attributes=attributes)
            if span.is_recording():
                self._events(span, verdicts, escapes, start, end)
                if fault_escapes(verdicts, escapes):  # a fail-closed guard stopped it
                    span.set_status(Status(StatusCode.ERROR, kind))
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
            call_id = call_id_value(result.call_id)
            if call_id is not None:
                attributes[GEN_AI_TOOL_CALL_ID] = call_id
            attributes[ATTR_OUTCOME] = result.outcome.value
        tracer.start_span(SPAN_BACKSTOP, attributes=attributes).end()

    def _failed(self) -> None:
        self.failures += 1
        log_failure(self.name, self.failures)

    def _events(
        self,
        span: Span,
        verdicts: Iterable[VerdictRecord],
        escapes: Iterable[Escape],
        start: int,
        end: int,
        stopped_by: object = None,
    ) -> None:
        _add_events(span, verdicts, escapes, start, end, stopped_by, self._span_events, self._log)


def _revision(engine: Any) -> str | None:
    found = getattr(engine, "revision", None)
    return found if type(found) is str else None


def _add_events(
    span: Span,
    verdicts: Iterable[VerdictRecord],
    escapes: Iterable[Escape],
    start: int,
    end: int,
    stopped_by: object = None,
    span_events: bool = True,
    log: EvaluationLog | None = None,
) -> None:
    # Guards run one after the other, so a verdict's time is about the start
    # plus the durations of the guards before it and its own.
    verdicts, escapes = tuple(verdicts), tuple(escapes)
    faults = fault_escapes(verdicts, escapes, stopped_by)
    failed = {(e.guard, e.choke_point): e for e in escapes}
    at = start
    decided: dict[tuple[str, str], Verdict] = {}
    for record in verdicts:
        at = min(at + record.duration_ns, end)
        key = (record.guard, record.choke_point)
        attributes: dict[str, Any] = {
            GEN_AI_EVALUATION_NAME: record.guard,
            GEN_AI_EVALUATION_SCORE_LABEL: record.verdict.value,
            ATTR_CHOKE_POINT: record.choke_point.value,
            ATTR_ENFORCED: record.enforced,
        }
        if isinstance(record.reason, str):
            attributes[ATTR_REASON] = record.reason
        cause = failed.get(key)
        if cause is not None and cause.exception is not None:
            attributes[ERROR_TYPE] = error_type(cause.exception)  # the evaluation failed
        elif cause is not None and cause.reason in _ERROR_REASONS:
            attributes[ERROR_TYPE] = cause.reason.value
        if span_events:
            span.add_event(EVENT_VERDICT, attributes, timestamp=at)
        if log is not None:
            log.emit(span, attributes, at)
        decided[key] = record.verdict
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
            attributes[ATTR_EXCEPTION_TYPE] = error_type(escape.exception)
        is_fault = any(escape is f for f in faults)
        span.add_event(EVENT_FAULT if is_fault else EVENT_ESCAPE, attributes, timestamp=end)
