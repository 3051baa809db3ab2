from __future__ import annotations

import subprocess
import sys

import pytest

from guardrails import __version__
from guardrails.cli import main


def test_version_and_help(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exit_info:
        main(["--version"])
    assert exit_info.value.code == 0
    assert __version__ in capsys.readouterr().out
    with pytest.raises(SystemExit):
        main(["--help"])
    assert "usage: guardrails" in capsys.readouterr().out


def test_example_runs_and_never_shows_the_guard_exception() -> None:
    out = subprocess.run(
        [sys.executable, "-m", "guardrails.cli", "example"],
        capture_output=True,
        text=True,
        check=True,
        timeout=60,
    ).stdout
    assert (
        "outcome=limit" in out and "fail-open escape: guard=flaky_fraud_check reason=raised" in out
    )
    assert "sk-live" not in out and "10.0.0.7" not in out
