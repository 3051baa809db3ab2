"""Started with ``PYTHONPATH`` holding this folder, a process exports its spans to ``$CONFORMANCE_SPANS``.

One JSON line per ended span (name, status, attributes, event names), written
as each span ends: the gateway's spans, read by the conformance tests.
"""

from __future__ import annotations

import json
import os
import threading
from collections.abc import Sequence
from typing import Any

_PATH = os.environ.get("CONFORMANCE_SPANS")

if _PATH:
    from opentelemetry import trace
    from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor, SpanExporter, SpanExportResult

    class _Lines(SpanExporter):
        def __init__(self, path: str) -> None:
            self._path = path
            self._lock = threading.Lock()

        def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
            lines = [json.dumps(_line(span)) + "\n" for span in spans]
            with self._lock, open(self._path, "a", encoding="utf-8") as out:
                out.writelines(lines)
            return SpanExportResult.SUCCESS

    def _line(span: ReadableSpan) -> dict[str, Any]:
        return {
            "name": span.name,
            "start": span.start_time,
            "status": span.status.status_code.name,
            "attributes": {k: v for k, v in (span.attributes or {}).items()},
            "events": [event.name for event in span.events],
        }

    _provider = TracerProvider()
    _provider.add_span_processor(SimpleSpanProcessor(_Lines(_PATH)))
    trace.set_tracer_provider(_provider)
