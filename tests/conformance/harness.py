"""What a driver reports, and how it is held to the table.

A driver runs one ``Row`` through its entry point (a scripted model asking
the row's steps, a fresh engine or gateway per row) and returns an
``Observed``: what the model received for each call, in the order the model
asked, which bodies ran, the audit rows and the tool spans. ``check`` compares
it with the table's answer for that entry point, the documented difference
included; it never skips.

``Instruments`` gives an in-process driver the audit log and the span
exporter to build its engine with (``scenario.rails(ran, **instruments.engine())``).
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from guardrails.approvals import ApprovalGate
from guardrails.audit import AuditLog
from guardrails.observe.telemetry import (
    ERROR_TYPE,
    EVENT_ESCAPE,
    EVENT_FAULT,
    EXECUTE_TOOL,
    GEN_AI_TOOL_CALL_ID,
    GEN_AI_TOOL_NAME,
    OpenTelemetryRecorder,
)
from guardrails.store import AuditRow, MemoryStore
from tests.conformance import scenario as sc
from tests.conformance import table as tb


@dataclass(frozen=True)
class Received:
    """What the model received for one call, read from the entry point's own format.

    ``text``: the text blocks joined (None: no text); ``images``: ``(mime, base64)``
    of each image block; ``structured``: the format's structured content (None:
    none); ``is_error``: the format's error flag (None where it has none).
    """

    text: str | None
    is_error: bool | None = None
    images: tuple[tuple[str, str], ...] = ()
    structured: Any = None


@dataclass(frozen=True)
class Span:
    """One ``execute_tool`` span: its tool, call id, status, ``error.type`` and event counts."""

    tool: str
    call_id: str | None
    error: bool
    error_type: str | None
    escapes: int
    faults: int


@dataclass(frozen=True)
class Observed:
    answers: tuple[Received, ...]
    ran: tuple[str, ...]
    audit: tuple[AuditRow, ...]
    spans: tuple[Span, ...]
    call_ids: tuple[str, ...] | None = None  # the model's own call ids, where it sends them


def _span(name: str, status: str, attributes: dict[str, Any], events: Iterable[str]) -> Span:
    counted = Counter(events)
    return Span(
        str(attributes.get(GEN_AI_TOOL_NAME)),
        None if GEN_AI_TOOL_CALL_ID not in attributes else str(attributes[GEN_AI_TOOL_CALL_ID]),
        status == "ERROR",
        None if ERROR_TYPE not in attributes else str(attributes[ERROR_TYPE]),
        counted[EVENT_ESCAPE],
        counted[EVENT_FAULT],
    )


def spans_of(finished: Iterable[ReadableSpan]) -> tuple[Span, ...]:
    """The ``execute_tool`` spans, oldest first."""
    return tuple(
        _span(
            span.name,
            span.status.status_code.name,
            dict(span.attributes or {}),
            (event.name for event in span.events),
        )
        for span in sorted(finished, key=lambda s: s.start_time or 0)
        if span.name.startswith(f"{EXECUTE_TOOL} ")
    )


def spans_of_lines(lines: Iterable[dict[str, Any]]) -> tuple[Span, ...]:
    """``spans_of`` for spans another process exported as JSON lines (``spans/sitecustomize.py``)."""
    return tuple(
        _span(line["name"], line["status"], line["attributes"], line["events"])
        for line in sorted(lines, key=lambda line: line["start"] or 0)
        if line["name"].startswith(f"{EXECUTE_TOOL} ")
    )


@dataclass
class Instruments:
    """An audit log over a memory store and an in-memory span exporter, for one row."""

    store: MemoryStore = field(default_factory=MemoryStore)
    exporter: InMemorySpanExporter = field(default_factory=InMemorySpanExporter)

    def __post_init__(self) -> None:
        self.audit = AuditLog(self.store)
        provider = TracerProvider()
        provider.add_span_processor(SimpleSpanProcessor(self.exporter))
        self.spans = OpenTelemetryRecorder(provider)
        self.approvals = ApprovalGate(self.store, rules=sc.APPROVALS)

    def engine(self) -> dict[str, Any]:
        """``hooks`` and ``recorder`` for ``scenario.rails`` (or ``Guardrails``)."""
        hooks = [self.audit, self.spans.hook(), self.approvals]
        return {"hooks": hooks, "recorder": [self.audit, self.spans]}

    def observed(self, answers: Iterable[Received], ran: Iterable[str], **more: Any) -> Observed:
        return Observed(
            tuple(answers),
            tuple(ran),
            tuple(self.audit.rows()),
            spans_of(self.exporter.get_finished_spans()),
            **more,
        )


Driver = Callable[[tb.Row], Observed]

# -- holding an observation to the table ---------------------------------------------------


def _content(entry: tb.EntryPoint, want: tb.Answer, got: Received) -> None:
    content = want.content
    if entry.error_flag:
        assert got.is_error is (want.outcome != "ok"), got
    else:
        assert got.is_error is None, f"{entry.id} declares no error flag, yet reported one"
    if isinstance(content, tb.Image):
        assert got.images == ((content.mime, content.data),), got
        if content.note is None:
            assert not got.text, got
        else:
            assert got.text is not None and got.text.startswith(content.note), got
        return
    assert not got.images, got
    if isinstance(content, tb.Json):
        assert _json(got.text) == content.value, got
        assert got.structured == (content.value if entry.structured else None), got
        return
    text = content.text if isinstance(content, tb.Text) else content.expected
    assert got.text == text, got
    assert got.structured is None, got


def _json(text: str | None) -> Any:
    """The JSON value of ``text``; a marker that equals nothing when it is not JSON."""
    try:
        return json.loads(text) if text is not None else _NOT_JSON
    except ValueError:
        return _NOT_JSON


_NOT_JSON = object()


def _fault_count(row: AuditRow) -> tuple[int, int]:
    """(escapes, faults) of one audit row: a fault is the escape of a guard that rejected."""
    escapes = json.loads(row.escapes) if row.escapes else []
    rejected = {
        v["guard"] for v in (json.loads(row.verdicts) if row.verdicts else [])
        if v.get("verdict") == "reject"
    }  # fmt: skip
    faults = sum(1 for e in escapes if e["guard"] in rejected)
    return len(escapes) - faults, faults


def check(entry_id: str, row: tb.Row, observed: Observed) -> None:
    """``observed`` is what the table says ``entry_id`` answers in ``row``."""
    entry = tb.ENTRY_POINTS[entry_id]
    want, _ = tb.expected(entry_id, row)
    assert want is not None, f"{entry_id}: the table says row {row.id} does not apply"
    calls = row.calls
    assert len(observed.answers) == len(calls) == len(want.answers), observed.answers
    for call, answer, got in zip(calls, want.answers, observed.answers, strict=True):
        try:
            _content(entry, answer, got)
        except AssertionError as exc:
            raise AssertionError(f"{entry_id} / {row.id} / {call.name}: {exc}") from None
    ran = Counter(c.name for c, a in zip(calls, want.answers, strict=True) if a.ran)
    assert Counter(observed.ran) == ran, (observed.ran, ran)
    audited = [
        (c, a)
        for c, a in zip(calls, want.answers, strict=True)
        if a.audited
        for _ in range(a.passes)
    ]
    rows = [r for r in observed.audit if r.kind == "tool_call"]
    wanted_rows = Counter((c.name, a.outcome, a.reason) for c, a in audited)
    assert Counter((r.tool, r.outcome, r.reason) for r in rows) == wanted_rows, rows
    totals = [_fault_count(r) for r in rows]
    assert (sum(e for e, _ in totals), sum(f for _, f in totals)) == (want.escapes, want.faults)
    _spans(audited, want, observed.spans)
    audited_at = [i for i, a in enumerate(want.answers) if a.audited for _ in range(a.passes)]
    _call_ids(entry, observed, audited_at)


def _call_ids(entry: tb.EntryPoint, observed: Observed, audited: list[int]) -> None:
    """The audit rows and spans carry the model's own call ids (where the entry point can)."""
    if entry.no_call_ids is not None:
        assert observed.call_ids is None, f"{entry.id}: the table says it has no call ids"
        return
    assert observed.call_ids is not None, f"{entry.id}: the driver reports no call ids"
    ids = Counter(observed.call_ids[i] for i in audited)
    assert Counter(r.call_id for r in observed.audit if r.kind == "tool_call") == ids
    assert Counter(s.call_id for s in observed.spans) == ids


def _spans(
    audited: list[tuple[tb.Call, tb.Answer]], want: tb.Expected, spans: tuple[Span, ...]
) -> None:
    def expected_span(call: tb.Call, answer: tb.Answer) -> tuple[Any, ...]:
        tool = "_unknown" if answer.reason == "unknown_tool" else call.name
        error_type = answer.fault or (None if answer.outcome == "ok" else answer.outcome)
        return tool, answer.fault is not None, error_type

    def seen(span: Span) -> tuple[Any, ...]:
        # A fault's error.type is the exception's type, qualified by its module.
        short = span.error_type
        if span.error and short is not None:
            short = short.rsplit(".", 1)[-1]
        return span.tool, span.error, short

    wanted = Counter(expected_span(c, a) for c, a in audited)
    assert Counter(seen(s) for s in spans) == wanted, spans
    assert sum(s.escapes for s in spans) == want.escapes, spans
    assert sum(s.faults for s in spans) == want.faults, spans


def applies(entry_id: str, row: tb.Row) -> bool:
    """Whether ``entry_id`` answers ``row`` at all (a ``Difference`` without answers: not)."""
    return tb.expected(entry_id, row)[0] is not None


def check_not_applicable(entry_id: str, row: tb.Row) -> None:
    """A row ``entry_id`` does not run: a documented ``Difference`` without answers says why."""
    _, difference = tb.expected(entry_id, row)
    assert difference is not None and difference.expected is None, (entry_id, row.id)
    assert difference.reason, (entry_id, row.id)
