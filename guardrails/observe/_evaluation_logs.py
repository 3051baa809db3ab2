"""Guard verdicts as log-based ``gen_ai.evaluation.result`` events (OpenTelemetry logs API).

The GenAI semantic conventions define the evaluation result as an event, and
OpenTelemetry is moving events from span events to log records. This module
emits one log record per verdict through the logs API, in the context of the
call's span (so the record carries its trace and span ids). Without an SDK
logger provider it does nothing, and looks for one at most once a second.
"""

from __future__ import annotations

import inspect
from collections.abc import Mapping
from time import monotonic_ns
from typing import Any

from opentelemetry import trace
from opentelemetry._logs import (
    Logger,
    LoggerProvider,
    LogRecord,
    NoOpLoggerProvider,
    get_logger_provider,
)
from opentelemetry.trace import Span

from .._version import __version__

EVENT_NAME = "gen_ai.evaluation.result"
_RECHECK_NS = 1_000_000_000
# Whether this API's Logger.emit takes the record's fields (and event_name).
_NAMED = "event_name" in inspect.signature(Logger.emit).parameters


def _no_sdk(provider: object) -> bool:
    # The API's own placeholders: the no-op provider, and the proxy that
    # stands in until an SDK provider is set.
    kind = type(provider).__name__
    return isinstance(provider, NoOpLoggerProvider) or kind == "ProxyLoggerProvider"


class EvaluationLog:
    """Emits evaluation events through a logger provider (the global one by default)."""

    def __init__(self, logger_provider: LoggerProvider | None = None) -> None:
        self._provider = logger_provider
        self._logger: Logger | None = None
        self._next_check = 0

    def logger(self) -> Logger | None:
        """The SDK logger, or None while there is none (checked at most once a second)."""
        if self._logger is not None:
            return self._logger
        now = monotonic_ns()
        if now < self._next_check:
            return None
        self._next_check = now + _RECHECK_NS
        provider = self._provider or get_logger_provider()
        if _no_sdk(provider):
            return None
        self._logger = provider.get_logger("guardrails", __version__)
        return self._logger

    def emit(self, span: Span, attributes: Mapping[str, Any], timestamp: int) -> None:
        """One ``gen_ai.evaluation.result`` record in the context of ``span``."""
        logger = self.logger()
        if logger is None:
            return
        if _NAMED:
            logger.emit(
                timestamp=timestamp,
                context=trace.set_span_in_context(span),
                event_name=EVENT_NAME,
                attributes=dict(attributes),
            )
            return
        # An API before records had an event name: the name as an attribute.
        ctx = span.get_span_context()
        logger.emit(
            LogRecord(
                timestamp=timestamp,
                trace_id=ctx.trace_id,
                span_id=ctx.span_id,
                trace_flags=ctx.trace_flags,
                attributes={**attributes, "event.name": EVENT_NAME},
            )
        )
