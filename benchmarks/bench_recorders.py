"""What the observability recorders add to a guarded call.

Group ``recorders``: one guarded call (a tool behind two trivial guards) with
no recorder, with the Prometheus recorder, with the OpenTelemetry recorder and
no SDK (the API's no-op, what a user who never set up tracing pays), with the
OpenTelemetry SDK and an in-memory exporter (each also with the call hook
that opens the span before the tool runs), and with both. Each row's
``ratio`` and ``added_us`` are to the no-recorder call measured in the same
rounds.

Group ``recorder-alone``: the recorders' ``on_tool_result`` on one finished
result (two verdicts), against an empty method call: the cost of counting
itself, without the noise of the call around it.

Run alone: ``python benchmarks/bench_recorders.py [--quick]``.
"""

from __future__ import annotations

import sys
from typing import Any

from _harness import Row, compare
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import ProxyTracerProvider
from prometheus_client import CollectorRegistry

from guardrails import Guardrails, Verdict, guard, tool
from guardrails.observe.metrics import PrometheusRecorder
from guardrails.observe.telemetry import OpenTelemetryRecorder

_PASS = Verdict.PASS


@tool
def lookup(key: str) -> str:
    """Look a key up."""
    return key


@guard
def short_key(call: Any) -> Verdict:
    return _PASS


@guard
def allowed_key(call: Any) -> Verdict:
    return _PASS


def _engine(recorder: Any, hooks: Any = ()) -> Guardrails:
    return Guardrails([lookup], [short_key, allowed_key], hooks=hooks, recorder=recorder)


class _Empty:
    def on_tool_result(self, result: Any, /) -> None:
        pass


def run(quick: bool = False) -> list[Row]:
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    prometheus = PrometheusRecorder(CollectorRegistry())
    both_prometheus = PrometheusRecorder(CollectorRegistry())
    # A fresh proxy provider is what the global one is when no SDK was set up.
    api_only = OpenTelemetryRecorder(ProxyTracerProvider())
    sdk = OpenTelemetryRecorder(provider)
    engines = {
        "no recorder": _engine(None),
        "Prometheus": _engine(prometheus),
        "OpenTelemetry, API only (no SDK)": _engine(api_only),
        "OpenTelemetry, API only, with hook()": _engine(api_only, hooks=[api_only.hook()]),
        "OpenTelemetry SDK, in-memory exporter": _engine(sdk),
        "OpenTelemetry SDK, with hook()": _engine(sdk, hooks=[sdk.hook()]),
        "Prometheus + OpenTelemetry SDK": _engine([both_prometheus, sdk]),
    }
    prometheus.bind(engines["Prometheus"])
    both_prometheus.bind(engines["Prometheus + OpenTelemetry SDK"])
    turns = {name: rails.turn() for name, rails in engines.items()}
    arguments = {"key": "a"}

    def case(name: str) -> Any:
        call = turns[name].call
        return lambda: call("lookup", arguments)

    def clear() -> None:
        exporter.clear()
        for turn in turns.values():
            turn.results.clear()

    rows = compare(
        "recorders",
        {name: case(name) for name in engines},
        floor="no recorder",
        quick=quick,
        between_rounds=clear,
    )

    result = _engine(None).turn().call("lookup", arguments)
    alone_prometheus = PrometheusRecorder(CollectorRegistry())
    empty = _Empty()
    rows += compare(
        "recorder-alone",
        {
            "empty method": lambda: empty.on_tool_result(result),
            "Prometheus": lambda: alone_prometheus.on_tool_result(result),
            "OpenTelemetry, API only (no SDK)": lambda: api_only.on_tool_result(result),
            "OpenTelemetry SDK, in-memory exporter": lambda: sdk.on_tool_result(result),
        },
        floor="empty method",
        quick=quick,
        between_rounds=exporter.clear,
    )
    provider.shutdown()
    return rows


if __name__ == "__main__":
    for r in run(quick="--quick" in sys.argv):
        print(
            f"{r['group']:15} {r['name']:40} {r['median_us']:9.3f} us"
            f"  x{r['ratio']:<6} +{r['added_us']} us"
        )
