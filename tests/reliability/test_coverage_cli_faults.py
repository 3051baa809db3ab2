"""``guardrails coverage`` reading sources that fail.

A gate in CI must not mistake a broken metrics source for a failed gate: every
source that cannot be read exits with status 2 and one line on stderr, never a
traceback (status 1 is reserved for a gate that failed).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from guardrails.cli import main

SOURCES: dict[str, Any] = {
    "garbage": b"garbage {{{ \n",
    "binary": b"\xff\xfe\x00\x01",
    "nan_count": (
        b"# TYPE guardrails_guard_evaluations_total counter\n"
        b'guardrails_guard_evaluations_total{guard="g",choke_point="tool_call",verdict="pass"} NaN\n'
    ),
    "negative_count": (
        b"# TYPE guardrails_guard_evaluations_total counter\n"
        b'guardrails_guard_evaluations_total{guard="g",choke_point="tool_call",verdict="pass"} -1\n'
    ),
    "missing_file": None,
    "directory": "dir",
    "refused_url": "http://127.0.0.1:9/metrics",
    "remote_url": "http://169.254.1.1/metrics",
}


@pytest.mark.parametrize("kind", sorted(SOURCES))
def test_unreadable_source_exits_2_without_a_traceback(
    kind: str, tmp_path: Path, capsys: pytest.CaptureFixture[str], ledger: Any
) -> None:
    spec = SOURCES[kind]
    if isinstance(spec, bytes):
        path = tmp_path / f"{kind}.prom"
        path.write_bytes(spec)
        source = str(path)
    elif spec is None:
        source = str(tmp_path / "nowhere.prom")
    elif spec == "dir":
        source = str(tmp_path)
    else:
        source = spec

    status = main(["coverage", source, "--timeout", "0.5"])

    err = capsys.readouterr().err
    ledger.add("coverage_cli", inputs=1, faults_injected=1, faults_counted=int(status == 2))
    assert status == 2
    assert "Traceback" not in err and err.count("\n") == 1


def test_unreadable_audit_store_exits_2(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], ledger: Any
) -> None:
    for url in (f"sqlite:///{tmp_path}/no-such-dir/audit.db", "bogus://x"):
        status = main(["coverage", "--audit", url])
        err = capsys.readouterr().err
        ledger.add("coverage_cli", inputs=1, faults_injected=1, faults_counted=int(status == 2))
        assert status == 2 and "Traceback" not in err
