"""The agent-framework examples run offline and show what the model was sent."""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
from pathlib import Path

import pytest

from guardrails import Outcome
from guardrails.verdicts import model_sentence

EXAMPLES = Path(__file__).resolve().parents[2] / "examples" / "frameworks"
INVALID = model_sentence(Outcome.INVALID_ARGS)
INVALID_STATUS = model_sentence(Outcome.INVALID_ARGS, ["status"])
ERROR = model_sentence(Outcome.ERROR)

EXPECTED = {
    "agent_framework_orders.py": (
        "agent_framework",
        [
            "parameters the model sees: ['status']",
            "call_0: acme: 2 open orders",
            f"call_1: {INVALID}",
            f"call_2: {INVALID_STATUS}",
            f"call_3: {ERROR}",
            f"call_4: {model_sentence(Outcome.UNAVAILABLE)}",
        ],
    ),
    "google_adk_orders.py": (
        "google.adk",
        [
            "get_orders parameters the model sees: ['status']",
            "call_0: {'result': 'acme: 2 open orders'}",
            f"call_1: {{'error': '{INVALID}'}}",
            f"call_3: {{'error': '{ERROR}'}}",
            "post_run saw: You have 2 open orders.",
        ],
    ),
    "claude_agent_orders.py": (
        "claude_agent_sdk",
        [
            "mcp__shop__get_orders parameters the model sees: ['status']",
            "tool_result: acme: 2 open orders",
            f"tool_result (is_error): {INVALID}",
            f"tool_result (is_error): {INVALID_STATUS}",
            f"tool_result (is_error): {ERROR}",
        ],
    ),
}


def test_every_framework_example_is_covered() -> None:
    # ``_shop.py`` is what the Agent Framework and ADK examples share, not an example.
    assert sorted(p.name for p in EXAMPLES.glob("[!_]*.py")) == sorted(EXPECTED)
    assert sorted(p.name for p in EXAMPLES.glob("_*.py")) == ["_shop.py"]


@pytest.mark.parametrize("script", sorted(EXPECTED))
@pytest.mark.slow
def test_framework_example_runs_offline(script: str) -> None:
    module, lines = EXPECTED[script]
    top = module.split(".")[0]
    if importlib.util.find_spec(top) is None or importlib.util.find_spec(module) is None:
        if os.environ.get("GUARDRAILS_REQUIRE_FRAMEWORKS") == "1":
            pytest.fail(f"GUARDRAILS_REQUIRE_FRAMEWORKS=1 but {module} is not installed")
        pytest.skip(f"{module} is not installed")
    env = {k: v for k, v in os.environ.items() if k != "ANTHROPIC_API_KEY"}
    done = subprocess.run(
        [sys.executable, "-W", "error", str(EXAMPLES / script)],
        capture_output=True,
        text=True,
        timeout=180,
        check=False,
        env=env,
    )
    assert done.returncode == 0, done.stderr
    for line in lines:
        assert line in done.stdout
    assert "sk-live-123" not in done.stdout and "Traceback" not in done.stdout
