"""``guardrails coverage``: sources, formats, gates, and the round trip through an exposition."""

from __future__ import annotations

import json
import socket
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st
from prometheus_client import CollectorRegistry, generate_latest, start_http_server
from prometheus_client.openmetrics.exposition import generate_latest as openmetrics

from guardrails import (
    ChokePoint,
    Escape,
    EscapeReason,
    Guardrails,
    Verdict,
    VerdictRecord,
    guard,
    tool,
)
from guardrails.cli import main as cli
from guardrails.observe.coverage import CoverageError, from_exposition, read_source
from guardrails.observe.metrics import EXPORTED, FAULT_REASONS, PrometheusRecorder


@dataclass(frozen=True)
class Decision:
    verdicts: tuple[VerdictRecord, ...]
    escapes: tuple[Escape, ...] = ()


@tool
def lookup(key: str) -> str:
    """Look a key up."""
    return key


@pytest.fixture
def recorder(registry: CollectorRegistry) -> PrometheusRecorder:
    metrics = PrometheusRecorder(registry)
    metrics.on_event(
        "pre_turn",
        Decision(
            (
                VerdictRecord("topics", ChokePoint.PRE_TURN, Verdict.PASS),
                VerdictRecord("topics", ChokePoint.PRE_TURN, Verdict.NOT_EVALUATED),
            ),
            (Escape("topics", ChokePoint.PRE_TURN, EscapeReason.RAISED),),
        ),
    )
    return metrics


@pytest.fixture
def server(registry: CollectorRegistry, recorder: PrometheusRecorder) -> Iterator[str]:
    httpd, thread = start_http_server(0, addr="127.0.0.1", registry=registry)
    try:
        yield f"http://127.0.0.1:{httpd.server_port}/metrics"
    finally:
        httpd.shutdown()
        httpd.server_close()
        thread.join(5)


def test_reads_a_metrics_endpoint_on_the_loopback_address(
    server: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert cli(["coverage", server, "--format", "json"]) == 0
    (row,) = json.loads(capsys.readouterr().out)["guards"]
    assert (row["guard"], row["pass"], row["not_evaluated"]) == ("topics", 1, 1)
    assert row["not_evaluated_share"] == 0.5
    assert row["escapes"] == {"raised": 1}


def test_a_url_off_this_machine_is_refused_with_exit_2(
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert cli(["coverage", "http://10.0.0.8:9464/metrics"]) == 2
    assert "only a loopback address" in capsys.readouterr().err
    with pytest.raises(CoverageError):
        read_source("http://metrics.example.com/metrics")


def test_an_unreadable_or_unparsable_source_exits_2(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert cli(["coverage", str(tmp_path / "missing.txt")]) == 2
    assert "missing.txt" in capsys.readouterr().err
    garbage = tmp_path / "garbage.txt"
    garbage.write_text('guardrails_guard_evaluations_total{guard="g"} 1\n')  # labels missing
    assert cli(["coverage", str(garbage)]) == 2
    garbage.write_text("this is { not an exposition\n")
    assert cli(["coverage", str(garbage)]) == 2
    assert "not a Prometheus exposition" in capsys.readouterr().err


def test_a_closed_port_exits_2(capsys: pytest.CaptureFixture[str]) -> None:

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    assert cli(["coverage", f"http://127.0.0.1:{port}/metrics", "--timeout", "2"]) == 2
    assert "guardrails coverage:" in capsys.readouterr().err


def test_series_that_differ_only_in_other_labels_are_summed() -> None:
    text = "\n".join(
        [
            "# TYPE guardrails_guard_evaluations_total counter",
            'guardrails_guard_evaluations_total{instance="a",guard="g",choke_point="tool_call",verdict="pass"} 3',
            'guardrails_guard_evaluations_total{instance="b",guard="g",choke_point="tool_call",verdict="pass"} 4',
            'guardrails_guard_evaluations_total{instance="b",guard="g",choke_point="tool_call",verdict="reject"} 1',
            "",
        ]
    )
    (row,) = from_exposition(text).guards
    assert (row.passed, row.rejected, row.evaluations, row.registered) == (7, 1, 8, False)


def test_an_openmetrics_exposition_is_read_too(
    registry: CollectorRegistry, recorder: PrometheusRecorder
) -> None:
    (row,) = from_exposition(openmetrics(registry).decode()).guards
    assert (row.guard, row.passed, row.not_evaluated, dict(row.escapes)) == (
        "topics",
        1,
        1,
        {"raised": 1},
    )


def test_the_table_shows_each_guard_and_flags_one_that_never_ran(
    registry: CollectorRegistry,
    tmp_path: Path,
    scrape: Callable[[], str],
    capsys: pytest.CaptureFixture[str],
) -> None:
    @guard
    def idle(call: Any) -> Verdict:
        return Verdict.PASS

    metrics = PrometheusRecorder(registry)
    rails = Guardrails([lookup], [idle], recorder=metrics)
    metrics.bind(rails)
    path = tmp_path / "m.txt"
    path.write_text(scrape())
    assert cli(["coverage", str(path)]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[0].split() == [
        "GUARD",
        "CHOKE_POINT",
        "EVALS",
        "PASS",
        "REJECT",
        "NOT_EVAL",
        "NOT_EVAL%",
        "OBSERVED",
        "ESCAPES",
        "FAULTS",
    ]
    assert out[1].split() == [
        "idle",
        "tool_call",
        "0",
        "0",
        "0",
        "0",
        "-",
        "0",
        "-",
        "-",
        "registered,",
        "never",
        "ran",
    ]
    assert cli(["coverage", str(path), "--fail-never-ran"]) == 1


def test_a_share_outside_zero_to_one_is_a_usage_error(tmp_path: Path) -> None:
    with pytest.raises(SystemExit) as exit_info:
        cli(["coverage", str(tmp_path), "--max-not-evaluated", "150%"])
    assert exit_info.value.code == 2


GUARDS = st.sampled_from(["a", "b", "c"])
POINTS = st.sampled_from(list(ChokePoint))
RECORDS = st.lists(
    st.tuples(
        GUARDS,
        POINTS,
        st.sampled_from(list(Verdict)),
        st.none() | st.sampled_from(list(EscapeReason)),
    ),
    max_size=60,
)


@given(RECORDS)
def test_coverage_counts_equal_what_was_recorded(
    records: list[tuple[str, ChokePoint, Verdict, EscapeReason | None]],
) -> None:
    registry = CollectorRegistry()
    metrics = PrometheusRecorder(registry)
    for guard_name, point, verdict, reason in records:
        escapes = () if reason is None else (Escape(guard_name, point, reason),)
        metrics.on_event(
            "post_run", Decision((VerdictRecord(guard_name, point, verdict),), escapes)
        )
    text = generate_latest(registry).decode()
    if not records:
        with pytest.raises(CoverageError, match="no guardrails metrics"):
            from_exposition(text)
        return
    report = from_exposition(text)
    got_verdicts: Counter[tuple[str, str, str]] = Counter()
    got_escapes: Counter[tuple[str, str, str]] = Counter()
    for row in report.guards:
        for verdict, n in (
            ("pass", row.passed),
            ("reject", row.rejected),
            ("not_evaluated", row.not_evaluated),
        ):
            if n:
                got_verdicts[(row.guard, row.choke_point, verdict)] = n
        for reason, n in row.escapes.items():
            got_escapes[(row.guard, row.choke_point, reason)] = n

    # A reject with an escape that a fail-closed guard gives when it could not
    # decide is a fault: not evaluated, and not an escape (the action stopped).
    def fault(v: Verdict, r: EscapeReason | None) -> bool:
        return v is Verdict.REJECT and r in FAULT_REASONS

    want = Counter(
        (g, p.value, "not_evaluated" if fault(v, r) else v.value) for g, p, v, r in records
    )
    assert got_verdicts == want
    assert got_escapes == Counter(
        (g, p.value, r.value) for g, p, v, r in records if r is not None and not fault(v, r)
    )
    assert sum(sum(row.faults.values()) for row in report.guards) == sum(
        fault(v, r) for _, _, v, r in records
    )
    for row in report.guards:
        share = row.not_evaluated_share
        assert share is None or 0 <= share <= 1
    assert metrics.failures == 0


@st.composite
def exposition_lines(draw: st.DrawFn) -> str:
    """A sample line of one of our families: mostly well formed, sometimes not."""
    name = draw(st.sampled_from(sorted(EXPORTED)))
    values = st.sampled_from(["a", "b", "pass", "tool_call", 'q"x', "n\\l"])
    labels = {k: draw(values) for k in EXPORTED[name]}
    if draw(st.booleans()) and labels:
        labels.pop(draw(st.sampled_from(sorted(labels))))  # a label missing
    value = draw(st.sampled_from(["0", "1", "7", "2.5", "-1", "NaN", "+Inf", "1e400", "x"]))
    body = ",".join(f'{k}="{v}"' for k, v in labels.items())
    return f"{name}{{{body}}} {value}"


@given(st.lists(exposition_lines() | st.text(max_size=40), max_size=8))
def test_any_text_gives_a_report_or_a_coverage_error(lines: list[str]) -> None:
    try:
        report = from_exposition("\n".join(lines) + "\n")
    except CoverageError:
        return
    for row in report.guards:
        assert min(row.passed, row.rejected, row.not_evaluated) >= 0
        assert all(n >= 0 for n in row.escapes.values())
