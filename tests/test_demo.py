"""`guardrails demo` shows every behaviour it promises, with only the run-time dependencies."""

from __future__ import annotations

import io
import sqlite3
import subprocess
import sys
from contextlib import closing
from pathlib import Path

import pytest

from guardrails.cli import main
from guardrails.cli.demo import run
from guardrails.observe.coverage import from_exposition
from guardrails.verdicts import Outcome, model_sentence


def play(tmp_path: Path) -> list[str]:
    out = io.StringIO()
    assert run(out, tmp_path) == 0
    return out.getvalue().splitlines()


def after(lines: list[str], call: str) -> str:
    """The 'model sees' line of the first call whose line starts with ``call``."""
    index = next(i for i, line in enumerate(lines) if line.strip().startswith(call))
    return lines[index + 1].strip()


def test_forbidden_subject_removes_the_tool_before_the_model_is_called(tmp_path: Path) -> None:
    lines = play(tmp_path)
    lawyer = next(i for i, line in enumerate(lines) if "My lawyer" in line)
    offered = lines[lawyer + 1]
    assert offered.strip().startswith("offered to the model:")
    assert "refund" not in offered
    assert "refund (by legal_subject)" in lines[lawyer + 2]
    assert after(lines, 'model calls refund({"amount": 250') == (
        f"model sees: unavailable   {model_sentence(Outcome.UNAVAILABLE)}"
    )


def test_bad_arguments_are_refused_with_closed_sentences(tmp_path: Path) -> None:
    lines = play(tmp_path)
    missing = after(lines, 'model calls refund({"amount": 40})')
    assert missing.endswith(model_sentence(Outcome.INVALID_ARGS, ["reason"]))
    supplied = after(lines, 'model calls refund({"account_id": "acc-999"')
    assert supplied.endswith(model_sentence(Outcome.INVALID_ARGS))
    text = "\n".join(lines)
    assert "the tool did not run" in text
    assert "acc-999" not in text.split("model sees")[-1]


def test_a_raising_guard_is_a_counted_escape_and_no_exception_text_is_shown(
    tmp_path: Path,
) -> None:
    text = "\n".join(play(tmp_path))
    assert "fail-open escape: guard fraud_check raised" in text
    assert "sk-demo-123" not in text and "ConnectionError" not in text


def test_out_of_order_step_is_unavailable_without_the_next_instructions(tmp_path: Path) -> None:
    lines = play(tmp_path)
    early = after(lines, "model calls submit_dispute({})")
    assert early == f"model sees: unavailable   {model_sentence(Outcome.UNAVAILABLE)}"
    assert "Next:" not in early
    assert any("Next: call attach_evidence" in line for line in lines)


def test_backstop_and_cap_are_shown(tmp_path: Path) -> None:
    text = "\n".join(play(tmp_path))
    assert "backstop: required_notify_human called notify_human (ok)" in text
    assert f"model sees: limit         {model_sentence(Outcome.LIMIT)}" in text
    assert "why: the daily refund cap (in the store) is reached; no money moved" in text


def test_audit_database_holds_every_call_and_decision(tmp_path: Path) -> None:
    text = "\n".join(play(tmp_path))
    database = tmp_path / "audit.db"
    assert f"audit database (SQLite, append-only): {database}" in text
    with closing(sqlite3.connect(database)) as db:
        rows = db.execute(
            "SELECT kind, tool, outcome, reason FROM guardrails_audit ORDER BY id"
        ).fetchall()
    calls = [(tool, outcome) for kind, tool, outcome, _ in rows if kind == "tool_call"]
    assert len(calls) == 12  # 11 model calls and one backstop action
    assert ("paid_call", "refund_payout", "limit", "daily_cap") in rows
    assert ("backstop", "notify_human") in [(kind, tool) for kind, tool, _, _ in rows]
    assert ("refund", "invalid_args") in calls


def test_a_second_run_on_the_same_directory_tells_the_same_story(tmp_path: Path) -> None:
    first = [line for line in play(tmp_path) if "model sees" in line]
    second = [line for line in play(tmp_path) if "model sees" in line]
    assert first == second


def test_coverage_table_and_metrics_file_agree(tmp_path: Path) -> None:
    text = "\n".join(play(tmp_path))
    metrics = tmp_path / "metrics.prom"
    assert f"metrics (Prometheus text): {metrics}" in text
    report = from_exposition(metrics.read_text())
    fraud = next(g for g in report.guards if g.guard == "fraud_check")
    assert (fraud.not_evaluated, fraud.escapes) == (3, {"raised": 3})
    assert report.tools["refund"]["limit"] == 1
    assert "GUARD" in text and "fraud_check" in text


def test_cli_demo_runs_without_anthropic_or_mcp(tmp_path: Path) -> None:
    blocked = (
        "import sys; sys.modules['anthropic'] = None; sys.modules['mcp'] = None; "
        "from guardrails.cli import main; sys.exit(main(['demo', '--dir', sys.argv[1]]))"
    )
    done = subprocess.run(
        [sys.executable, "-c", blocked, str(tmp_path)],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert "Guard coverage" in done.stdout


def test_cli_demo_exits_0_and_prints_the_turns(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["demo", "--dir", str(tmp_path)]) == 0
    assert "[5] a cap reached: limit" in capsys.readouterr().out


# -- the live mode, with the scripted API standing in for the model --------------------


def test_live_mode_drives_the_model_through_the_anthropic_tool_loop(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from guardrails.cli.demo import SCENES
    from guardrails.integrations.scripted import (
        ScriptedMessagesAPI,
        text_message,
        tool_use_message,
    )

    script = []
    for scene in SCENES:
        script += [tool_use_message(*scene.calls), text_message(scene.reply)]
    with ScriptedMessagesAPI(script) as api:
        monkeypatch.setenv("ANTHROPIC_API_KEY", "scripted")
        monkeypatch.setenv("ANTHROPIC_BASE_URL", api.base_url)
        out = io.StringIO()
        assert run(out, tmp_path, model="claude-sonnet-5-5") == 0
    text = out.getvalue()
    assert len(api.requests) == 2 * len(SCENES)
    lawyer = next(r for r in api.requests if "lawyer" in str(r["messages"][0]))
    assert "refund" not in [t["name"] for t in lawyer["tools"]]
    assert "backstop: required_notify_human called notify_human (ok)" in text
    assert f"model sees: limit         {model_sentence(Outcome.LIMIT)}" in text
    assert "sk-demo-123" not in str(api.requests)


def test_live_mode_without_a_key_explains_and_exits_2(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.delenv("ANTHROPIC_API_KEY", raising=False)
    assert main(["demo", "--dir", str(tmp_path), "--live"]) == 2
    assert "ANTHROPIC_API_KEY" in capsys.readouterr().err
