"""The tool_call pipeline against a bare call of the same function.

Group ``pipeline``: the full pipeline (schema validation collecting every
error on failure, two trivial guards, a recorder) on valid and rejected calls,
each as a ratio to, and microseconds added over, a bare call measured in the
same rounds. A second reference row serialises the bare call's result with
``json.dumps``: the text the model needs from any tool call, guarded or not. With the in-memory recorder, with none, and with the Prometheus
and OpenTelemetry SDK recorders when ``guardrails.observe.metrics`` and
``guardrails.observe.telemetry`` provide them.

Group ``anatomy``: the pieces of the valid path timed alone, to show where the
time goes; their floor is an empty call, so ``added_us`` is each piece's own
cost. They reach into private helpers and are skipped if those move.

Run alone: ``python benchmarks/bench_pipeline.py [--quick]``; a cProfile of
the valid path: ``--profile`` (of a schema rejection: ``--profile --invalid``);
per-line times of the valid path with ``line_profiler`` installed: ``--lines``.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Callable
from typing import Any

from _harness import Row, compare
from _transfer import (
    INVALID,
    OVER_LIMIT,
    SCHEMA,
    VALID,
    account_open,
    transfer,
    within_limit,
)

from guardrails import Guardrails, Invocation, Tool, Verdict, guard, tool
from guardrails.testing import MemoryRecorder

GROUP = "pipeline"
_PASS = Verdict.PASS
_REJECT = Verdict.REJECT


def build(recorder: Any = None, guards: int = 2, bind: bool = False) -> Guardrails:
    """The transfer tool behind ``guards`` trivial guards (the two domain rules first).

    With ``bind``, ``account_id`` comes from the turn's context, never from the model.
    """
    rules: list[Any] = []

    @guard(name="under_daily_limit", outcome="limit")
    def under_daily_limit(call: Invocation) -> Verdict:
        return _PASS if within_limit(call.arguments) else _REJECT  # type: ignore[arg-type]

    @guard(name="account_not_frozen", outcome="unavailable")
    def account_not_frozen(call: Invocation) -> Verdict:
        return _PASS if account_open(call.arguments) else _REJECT  # type: ignore[arg-type]

    rules += [under_daily_limit, account_not_frozen][:guards]
    for i in range(len(rules), guards):
        rules.append(guard(name=f"trivial_{i}")(lambda call: _PASS))
    spec = tool(bind={"account_id": "account_id"})(transfer) if bind else tool(transfer)
    return Guardrails([spec], rules, recorder=recorder)


def _optional_recorders() -> tuple[dict[str, Callable[[], Any]], dict[str, str]]:
    """Factories for the Prometheus and OpenTelemetry recorders, where they exist."""
    found: dict[str, Callable[[], Any]] = {}
    missing: dict[str, str] = {}
    try:
        from prometheus_client import CollectorRegistry

        from guardrails.observe.metrics import PrometheusRecorder

        found["Prometheus recorder"] = lambda: PrometheusRecorder(CollectorRegistry())
    except ImportError as exc:
        missing["Prometheus recorder"] = f"not measured: {exc}"
    try:
        from guardrails.observe.telemetry import OpenTelemetryRecorder
    except ImportError as exc:
        missing["OTel recorder"] = f"not measured: {exc}"
        return found, missing
    # No SDK: the API's no-op tracer, what a user who never set up tracing pays.
    found["OTel recorder, API only"] = OpenTelemetryRecorder
    try:
        from opentelemetry.sdk.trace import TracerProvider
        from opentelemetry.sdk.trace.export import SimpleSpanProcessor

        def otel_sdk() -> Any:
            provider = TracerProvider()
            provider.add_span_processor(SimpleSpanProcessor(_Discard()))
            return OpenTelemetryRecorder(tracer_provider=provider)

        found["OTel SDK recorder"] = otel_sdk
    except ImportError as exc:
        missing["OTel SDK recorder"] = f"not measured: {exc}"
    return found, missing


class _Discard:
    """A span exporter that drops spans: the SDK's work is timed, not an exporter's I/O.

    Behind a ``SimpleSpanProcessor``, so every span is ended and handed over
    on the calling thread, inside the timed call.
    """

    def export(self, spans: Any) -> Any:
        from opentelemetry.sdk.trace.export import SpanExportResult

        return SpanExportResult.SUCCESS

    def shutdown(self) -> None:
        pass

    def force_flush(self, timeout_millis: int = 30_000) -> bool:
        return True


def run(quick: bool = False) -> list[Row]:
    return _pipeline_rows(quick) + anatomy(quick)


def _pipeline_rows(quick: bool) -> list[Row]:
    memory = MemoryRecorder()
    plain = build().turn(tenant="acme")
    recorded = build(memory).turn(tenant="acme")
    bound = build(memory, bind=True).turn(tenant="acme", values={"account_id": "acc-42"})
    turns = [plain, recorded, bound]
    valid, invalid, over = dict(VALID), dict(INVALID), dict(OVER_LIMIT)
    unbound = {k: v for k, v in VALID.items() if k != "account_id"}
    valid_json = '{"account_id": "acc-42", "amount": 25.0, "currency": "EUR"}'
    call = recorded.call
    cases: dict[str, Callable[[], Any]] = {
        "bare call": lambda: transfer(**valid),
        "bare call + json.dumps of the result": lambda: json.dumps(transfer(**valid)),
        "valid, no recorder": lambda: plain.call("transfer", valid),
        "valid, MemoryRecorder": lambda: call("transfer", valid),
        "valid, JSON text arguments": lambda: call("transfer", valid_json),
        "valid, account_id bound from the context": lambda: bound.call("transfer", unbound),
        "valid, async acall": _async_case(recorded, valid),
        "rejected: invalid_args (schema)": lambda: call("transfer", invalid),
        "rejected: limit (guard)": lambda: call("transfer", over),
        "rejected: unavailable (unknown tool)": lambda: call("wire_everything", valid),
    }
    found, missing = _optional_recorders()
    for label, factory in found.items():
        turn = build(factory()).turn(tenant="acme")
        turns.append(turn)
        cases[f"valid, {label}"] = (lambda t: lambda: t.call("transfer", valid))(turn)
        cases[f"rejected: invalid_args, {label}"] = (lambda t: lambda: t.call("transfer", invalid))(
            turn
        )

    def clear() -> None:
        memory.clear()
        for t in turns:
            t.results.clear()

    _check_outcomes(recorded)
    if bound.call("transfer", unbound).outcome != "ok":
        raise AssertionError("the bound call did not run")
    rows = compare(GROUP, cases, floor="bare call", quick=quick, between_rounds=clear)
    with_gc = {k: cases[k] for k in ("bare call", "valid, MemoryRecorder")}
    for r in compare(
        GROUP, with_gc, floor="bare call", quick=quick, between_rounds=clear, collect_garbage=True
    )[1:]:
        r["name"] += ", garbage collector on"
        rows.append(r)
    rows += [
        {"group": GROUP, "name": f"valid, {label}", "median_us": None, "note": why}
        for label, why in missing.items()
    ]
    return rows


def _async_case(turn: Any, arguments: dict[str, Any]) -> Callable[[], Any]:
    async def acall() -> Any:
        return await turn.acall("transfer", arguments)

    return acall


def _check_outcomes(turn: Any) -> None:
    # A benchmark of the wrong path is worse than none: check each case's outcome once.
    expected = {
        "ok": turn.call("transfer", VALID),
        "invalid_args": turn.call("transfer", INVALID),
        "limit": turn.call("transfer", OVER_LIMIT),
        "unavailable": turn.call("wire_everything", VALID),
    }
    for outcome, result in expected.items():
        if result.outcome != outcome:
            raise AssertionError(f"expected {outcome}, got {result.outcome} ({result.reason})")
    turn.results.clear()


def anatomy(quick: bool) -> list[Row]:
    """The valid path taken apart: the pipeline with steps removed, and pieces alone.

    The pieces reach into private helpers and are left out if those move.
    """
    from guardrails.middleware import _render as rendering
    from guardrails.middleware import admission as adm
    from guardrails.middleware import tool_call as tc
    from guardrails.verdicts import ChokePoint

    memory = MemoryRecorder()
    rails = build(memory)
    variants = {
        "pipeline: 2 guards, MemoryRecorder": rails.turn(tenant="acme"),
        "pipeline: 2 guards": build().turn(tenant="acme"),
        "pipeline: 1 guard": build(guards=1).turn(tenant="acme"),
        "pipeline: 0 guards": build(guards=0).turn(tenant="acme"),
        "pipeline: 0 guards, tool returns a str": Guardrails(
            [Tool("transfer", _transfer_text, SCHEMA)]
        ).turn(tenant="acme"),
    }
    valid = dict(VALID)
    pieces: dict[str, Callable[[], Any]] = {
        "empty call (timing loop)": lambda: None,
        "bare call": lambda: transfer(**valid),
    }
    for label, turn in variants.items():
        pieces[label] = (lambda t: lambda: t.call("transfer", valid))(turn)
    spec = rails.tools["transfer"]
    first = next(iter(rails.guards.values()))
    turn = variants["pipeline: 2 guards, MemoryRecorder"]
    inv = Invocation("transfer", valid, valid, turn.context, "c1", spec, turn)
    value = transfer(**valid)
    pieces["piece: schema is_valid (jsonschema_rs)"] = lambda: spec.compiled.is_valid(valid)
    pieces["piece: one guard's evaluate()"] = lambda: first.evaluate(inv, ChokePoint.TOOL_CALL)
    private = {
        "piece: canonical value, size/depth bound (admission)": (
            adm,
            "canonical",
            lambda f: lambda: f(valid, 1_000_000),
        ),
        "piece: render the dict result": (
            rendering,
            "render",
            lambda f: lambda: f(value, 16_000),
        ),
        "piece: call id": (tc, "new_call_id", lambda f: f),
    }
    for label, (module, attr, make) in private.items():
        found = getattr(module, attr, None)
        if found is not None:
            pieces[label] = make(found)

    def clear() -> None:
        memory.clear()
        for t in variants.values():
            t.results.clear()

    # The floor is an empty call, so that ``added_us`` is each row's own cost.
    return compare(
        "anatomy", pieces, floor="empty call (timing loop)", quick=quick, between_rounds=clear
    )


def _transfer_text(account_id: str, amount: float, currency: str, memo: str = "") -> str:
    return "sent"


def profile(calls: int = 200_000, arguments: dict[str, Any] | None = None) -> str:
    """cProfile of one path (default: valid) with the in-memory recorder, by own time."""
    import cProfile
    import gc
    import io
    import pstats

    memory = MemoryRecorder()
    turn = build(memory).turn(tenant="acme")
    valid = dict(VALID if arguments is None else arguments)
    call = turn.call

    def body() -> None:
        for i in range(calls):
            call("transfer", valid)
            if i % 10_000 == 0:
                turn.results.clear()
                memory.clear()

    profiler = cProfile.Profile()
    gc.disable()  # as in the timed rounds: collections would land in random frames
    try:
        profiler.runcall(body)
    finally:
        gc.enable()
    out = io.StringIO()
    pstats.Stats(profiler, stream=out).sort_stats("tottime").print_stats(14)
    return out.getvalue()


def line_profile(calls: int = 50_000) -> str:
    """Per-line times of the valid path's functions (needs ``line_profiler``)."""
    import gc
    import importlib
    import io

    from line_profiler import LineProfiler

    tc = importlib.import_module("guardrails.middleware.tool_call")
    admission = importlib.import_module("guardrails.middleware.admission")
    results = importlib.import_module("guardrails.middleware._results")
    guard_module = importlib.import_module("guardrails.guard")
    pipeline = tc.ToolCallPipeline
    profiler = LineProfiler(
        pipeline.run,
        admission.admit,
        results.complete,
        pipeline._finish,
        guard_module.evaluate_plain,
    )
    memory = MemoryRecorder()
    turn = build(memory).turn(tenant="acme")
    valid = dict(VALID)

    def body() -> None:
        for i in range(calls):
            turn.call("transfer", valid)
            if i % 10_000 == 0:
                turn.results.clear()
                memory.clear()

    gc.disable()
    try:
        profiler.runcall(body)
    finally:
        gc.enable()
    out = io.StringIO()
    profiler.print_stats(stream=out, output_unit=1e-6, stripzeros=True)
    return out.getvalue()


if __name__ == "__main__":
    if "--lines" in sys.argv:
        print(line_profile())
    elif "--profile" in sys.argv:
        print(profile(arguments=INVALID if "--invalid" in sys.argv else None))
    else:
        from run import print_rows

        print_rows(run(quick="--quick" in sys.argv))
