"""``guardrails demo`` tells the ternary verdict, explains its counts, and fails in one line."""

from __future__ import annotations

import io
from pathlib import Path

import pytest

from guardrails.cli import main
from guardrails.cli.demo import run


def play(tmp_path: Path) -> str:
    out = io.StringIO()
    assert run(out, tmp_path) == 0
    return out.getvalue()


def test_the_story_says_not_evaluated_and_why(tmp_path: Path) -> None:
    text = play(tmp_path)
    story = text.split("Guard coverage")[0]
    assert "not_evaluated" in story
    assert "fraud_check raised (its fraud-scoring service is down)" in story
    assert "the call went on" not in text  # the cap stops a call that fraud_check let through


def test_the_counts_are_explained(tmp_path: Path) -> None:
    text = play(tmp_path)
    reading = text.split("How to read it:")[1].split("audit database")[0]
    assert "11 model calls in 5 turns" in reading
    assert "workflow:dispute REJECT 11" in reading and "withholds tools" in reading
    assert "fraud_check: 3 of 3 not_evaluated" in reading


def test_the_suggested_sql_shows_verdicts_and_escapes(tmp_path: Path) -> None:
    text = play(tmp_path)
    (sql,) = [line for line in text.splitlines() if "sqlite3 " in line]
    assert "verdict" in sql and "escapes" in sql


@pytest.mark.parametrize("where", ["file", "proc"])
def test_a_bad_directory_is_one_line(
    where: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    target = tmp_path / "a-file"
    target.write_text("x")
    directory = str(target) if where == "file" else "/proc/guardrails-demo"
    assert main(["demo", "--dir", directory]) == 2
    err = capsys.readouterr().err
    assert err.startswith("guardrails demo: ") and err.count("\n") == 1
    assert "Traceback" not in err


@pytest.mark.parametrize("command", ["demo", "example", "coverage"])
def test_every_subcommand_has_a_description(
    command: str, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as info:
        main([command, "--help"])
    assert info.value.code == 0
    usage, description = capsys.readouterr().out.split("\n\n")[:2]
    assert usage.startswith(f"usage: guardrails {command}")
    assert len(description.split()) >= 6
