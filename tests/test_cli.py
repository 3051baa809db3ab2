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


# What ``guardrails --help`` must not load: each comes with the subcommand that needs it.
_NOT_FOR_HELP = (
    "guardrails.cli.demo",
    "guardrails.demo",
    "guardrails.gateway",
    "guardrails.integrations",
    "prometheus_client",
    "mcp",
    "anthropic",
    "openai",
    "langchain",
    "langchain_core",
    "pydantic_ai",
    "agents",
    "google.adk",
    "claude_agent_sdk",
    "agent_framework",
)


def _loaded_by(*argv: str) -> set[str]:
    """The modules ``python -X importtime ARGV`` imports (read from its stderr)."""
    done = subprocess.run(
        [sys.executable, "-X", "importtime", *argv], capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr[-2000:]
    rows = [line.split("|") for line in done.stderr.splitlines() if line.startswith("import time:")]
    return {row[-1].strip() for row in rows[1:]}


@pytest.mark.parametrize(
    "argv",
    [
        ["-m", "guardrails", "--help"],
        ["-m", "guardrails.cli", "--help"],
        ["-m", "guardrails", "audit", "--help"],
    ],
    ids=["guardrails --help", "python -m guardrails.cli --help", "guardrails audit --help"],
)
def test_help_loads_no_other_subcommand_nor_what_one_needs(argv: list[str]) -> None:
    loaded = _loaded_by(*argv)
    assert "guardrails.cli" in loaded  # the list is read
    wrong = sorted(m for m in loaded if any(m == n or m.startswith(n + ".") for n in _NOT_FOR_HELP))
    assert not wrong, f"{' '.join(argv)} imports {wrong}"


def test_a_subcommand_s_module_is_loaded_when_it_runs() -> None:
    loaded = _loaded_by("-m", "guardrails", "demo", "--help")
    assert "guardrails.cli.demo" in loaded and "guardrails.gateway" not in loaded
