"""``guardrails policy check FILE`` and ``guardrails policy explain FILE``."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from guardrails.cli import main

ROOT = Path(__file__).resolve().parents[2]
MAIL = ROOT / "docs" / "policy" / "mail_payments.toml"
FILES = ROOT / "docs" / "policy" / "calendar_files.toml"


@pytest.fixture(autouse=True)
def _examples_importable(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.syspath_prepend(str(ROOT / "examples"))


def test_check_accepts_the_worked_examples(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["policy", "check", str(MAIL), "--tools", "policy_mail_payments:TOOLS"]) == 0
    assert "ok (5 parameter rules, 7 tools)" in capsys.readouterr().out
    assert main(["policy", "check", str(FILES), "--tools", "policy_calendar_files"]) == 0


def test_check_names_the_file_table_and_key_of_a_mistake(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    bad = tmp_path / "bad.toml"
    bad.write_text(
        MAIL.read_text().replace(
            'grounded_in = ["user", "list_payees"]', 'grounded_in = ["user", "payees"]'
        )
    )
    assert main(["policy", "check", str(bad), "--tools", "policy_mail_payments:TOOLS"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("guardrails policy check: ")
    assert f"{bad}: [tools.pay.params.iban] grounded_in:" in err


def test_check_needs_the_tools_and_reports_an_unimportable_module(
    capsys: pytest.CaptureFixture[str],
) -> None:
    with pytest.raises(SystemExit):
        main(["policy", "check", str(MAIL)])
    assert main(["policy", "check", str(MAIL), "--tools", "no_such_module_here"]) == 2
    assert "cannot import 'no_such_module_here'" in capsys.readouterr().err
    assert main(["policy", "check", str(MAIL), "--tools", "policy_mail_payments:MISSING"]) == 2


def test_explain_says_which_rule_decides_each_parameter(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["policy", "explain", str(MAIL), "--tools", "policy_mail_payments:TOOLS"]) == 0
    out = capsys.readouterr().out
    assert "  iban: policy:pay.iban -> invalid_args" in out
    assert "      grounded_in = ['list_payees', 'user']" in out
    assert "  subject: no rule (the schema alone decides)" in out
    assert "  at most 1 per turn and 5 per session (policy:pay.ceiling -> limit)" in out
    assert "tool read_inbox\n  results: untrusted" in out
    assert "tool list_payees\n  results: trusted" in out


def test_explain_works_from_the_file_alone(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["policy", "explain", str(FILES)]) == 0
    out = capsys.readouterr().out
    assert "  attendees.*: policy:create_event.attendees.* -> invalid_args" in out


def test_the_command_runs_as_a_program() -> None:
    done = subprocess.run(
        [sys.executable, "-m", "guardrails.cli", "policy", "explain", str(MAIL)],
        capture_output=True, text=True, timeout=60, check=False,
    )  # fmt: skip
    assert done.returncode == 0 and "policy:send_mail.to" in done.stdout
