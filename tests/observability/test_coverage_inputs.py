"""``guardrails coverage`` on bad input: one clear line on stderr, exit 2, no traceback."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from prometheus_client import CollectorRegistry, generate_latest

from guardrails import Guardrails, guard, tool
from guardrails.audit import AuditLog
from guardrails.cli import main as cli
from guardrails.observe.coverage import CoverageError, load_audit
from guardrails.observe.metrics import PrometheusRecorder
from guardrails.store import open_store


def one_line_error(capsys: pytest.CaptureFixture[str], argv: list[str]) -> str:
    with pytest.raises(SystemExit) as info:
        status = cli(argv)
        raise SystemExit(status)
    err = capsys.readouterr().err
    assert info.value.code == 2, err
    assert err.count("\n") == 1 and "Traceback" not in err, err
    return err


@pytest.mark.parametrize(
    "content",
    [
        b"",
        b"# HELP process_cpu_seconds_total CPU.\n# TYPE process_cpu_seconds_total counter\nprocess_cpu_seconds_total 1.5\n",
        b'# HELP guardrails_telemetry_failures_total x\n# TYPE guardrails_telemetry_failures_total counter\nguardrails_telemetry_failures_total{recorder="prometheus"} 0\n',
    ],
    ids=["empty", "other_metrics", "only_failures"],
)
def test_a_source_without_guardrails_metrics_fails_every_gate(
    content: bytes, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "metrics.prom"
    path.write_bytes(content)
    err = one_line_error(
        capsys, ["coverage", str(path), "--fail-never-ran", "--max-not-evaluated", "0"]
    )
    assert "no guardrails metrics" in err


def test_a_binary_file_gives_a_short_line_without_its_bytes(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "junk.bin"
    path.write_bytes(bytes(range(256)) * 12)
    err = one_line_error(capsys, ["coverage", str(path)])
    assert len(err) < 200 and "\\x" not in err


def test_text_that_is_not_an_exposition_does_not_echo_it(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "junk.txt"
    path.write_text("SECRET-" * 500 + " {{{\n")
    err = one_line_error(capsys, ["coverage", str(path)])
    assert "SECRET" not in err and len(err) < 200


@pytest.mark.parametrize("share", ["abc", "150%", "-1", "nan"])
def test_a_bad_share_says_what_a_share_is(share: str, capsys: pytest.CaptureFixture[str]) -> None:
    err = one_line_error(capsys, ["coverage", "x.prom", "--max-not-evaluated", share])
    assert "not a share" in err and "_share" not in err


@pytest.fixture
def audit_db(tmp_path: Path) -> Path:
    @tool
    def lookup(key: str) -> str:
        """Look a key up."""
        return key

    @guard
    def short(call: object) -> bool:  # not a verdict: an escape, recorded
        return True

    path = tmp_path / "audit.db"
    store = open_store(str(path))
    audit = AuditLog(store)
    rails = Guardrails([lookup], [short], hooks=[audit], recorder=[audit])
    rails.turn().call("lookup", {"key": "k"})
    store.close()
    return path


def test_sqlite_urls_follow_the_usual_convention(
    audit_db: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    absolute = load_audit(f"sqlite:///{audit_db}")  # four slashes: an absolute path
    assert str(audit_db).startswith("/")
    monkeypatch.chdir(audit_db.parent)
    relative = load_audit("sqlite:///audit.db")  # three slashes: relative to the cwd
    assert absolute == relative
    with pytest.raises(CoverageError, match="no such file"):
        load_audit("sqlite:///var/lib/agent/audit.db")  # relative: not /var/lib/...
    with pytest.raises(CoverageError, match="sqlite:///relative"):
        load_audit("sqlite:/audit.db")


def test_the_audit_report_has_the_same_columns_as_the_metrics_report(
    audit_db: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert cli(["coverage", "--audit", f"sqlite:///{audit_db}"]) == 0
    audit_out = capsys.readouterr().out.splitlines()
    registry = CollectorRegistry()
    PrometheusRecorder(registry).on_tool_result(
        Guardrails([]).turn().call("missing", {})  # one _unknown call
    )
    path = audit_db.parent / "m.prom"
    path.write_bytes(generate_latest(registry))
    assert cli(["coverage", str(path)]) == 0
    metrics_out = capsys.readouterr().out.splitlines()

    def header(lines: list[str], first: str) -> list[str]:
        return next(line.split() for line in lines if line.startswith(first))

    assert header(audit_out, "GUARD") == header(metrics_out, "GUARD")
    assert header(audit_out, "TOOL") == header(metrics_out, "TOOL")
    assert header(audit_out, "TOOL") == [
        "TOOL",
        "CALLS",
        "ERROR",
        "INVALID_ARGS",
        "LIMIT",
        "OK",
        "UNAVAILABLE",
    ]


def test_an_unreachable_postgresql_is_one_line(capsys: pytest.CaptureFixture[str]) -> None:
    err = one_line_error(
        capsys, ["coverage", "--audit", "postgresql://guardrails:hunter2@127.0.0.1:1/nowhere"]
    )
    assert "cannot read the audit log" in err and "hunter2" not in err


def test_without_psycopg_the_audit_of_postgresql_says_what_to_install(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setitem(sys.modules, "psycopg", None)  # import psycopg raises ImportError
    monkeypatch.setitem(sys.modules, "psycopg_pool", None)
    err = one_line_error(capsys, ["coverage", "--audit", "postgresql://127.0.0.1:1/x"])
    assert "pip install 'guardrails-kit[postgres]'" in err


@pytest.mark.slow
def test_a_closed_pipe_ends_quietly(tmp_path: Path) -> None:
    registry = CollectorRegistry()
    metrics = PrometheusRecorder(registry)
    tools = []
    for i in range(3000):
        tools.append(tool(name=f"t{i}")(lambda key: key))
    metrics.bind(Guardrails(tools))
    path = tmp_path / "big.prom"
    path.write_bytes(generate_latest(registry))
    done = subprocess.run(
        f"{sys.executable} -m guardrails.cli coverage {path} | head -n 1",
        shell=True,
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, "PYTHONWARNINGS": "ignore"},
    )
    assert done.stdout.startswith("GUARD")
    assert "Traceback" not in done.stderr and "BrokenPipe" not in done.stderr, done.stderr
