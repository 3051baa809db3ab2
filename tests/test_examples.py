"""Every script in examples/ runs, without network, and shows what it promises."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from mcp import Client, StdioServerParameters

from guardrails import Outcome
from guardrails.verdicts import model_sentence

EXAMPLES = Path(__file__).resolve().parents[1] / "examples"

EXPECTED = {
    "anthropic_tool_loop.py": [
        "tools sent to the model: ['get_balance', 'transfer']",
        f"tool_result (is_error): {model_sentence(Outcome.INVALID_ARGS, ['currency'])}",
        f"tool_result (is_error): {model_sentence(Outcome.INVALID_ARGS)}",
        'tool_result: {"account":"acc-42","balance":250.0}',
    ],
    "anthropic_beta_tool_runner.py": [
        "parameters the model sees: ['amount']",
        f"tool_result (is_error): {model_sentence(Outcome.ERROR)}",
        "tool_result: refunded 20.0 EUR to acc-42",
    ],
    "openai_function_calling.py": [
        '"tool_call_id": "call_2", "content": "The arguments were not accepted.',
        f'"tool_call_id": "call_3", "content": "{model_sentence(Outcome.UNAVAILABLE)}"',
    ],
    "langchain_agent.py": [
        "parameters the model sees: {'get_balance': [], 'refund': ['amount']}",
        f"c1 (error): {model_sentence(Outcome.INVALID_ARGS)}",
        f"c2 (error): {model_sentence(Outcome.ERROR)}",
        f"c3 (error): {model_sentence(Outcome.UNAVAILABLE)}",
        "c4 (success): refunded 20.0 EUR to acc-42",
    ],
    "openai_agents_sdk.py": [
        "c1: 'acc-42: 250.00 EUR'",
        "[guardrails: result truncated]'",
        f"c4: '{model_sentence(Outcome.UNAVAILABLE)}'",
    ],
    "pydantic_ai_agent.py": [
        "offered: ['search_docs']",
        f"c2 (failed): {model_sentence(Outcome.INVALID_ARGS, ['limit', 'query'])}",
        f"c3 (failed): {model_sentence(Outcome.UNAVAILABLE)}",
    ],
    "policy_mail_payments.py": [
        "  pay: invalid_args policy:pay.iban",
        "  browse: invalid_args policy:browse.url",
        "  send_mail: invalid_args policy:send_mail.to",
    ],
    "policy_calendar_files.py": [
        "  create_event: invalid_args policy:create_event.attendees.*",
        "  share_file: invalid_args policy:share_file.path",
    ],
    "policy_mail_calendar.py": ["benign allowed: 46/48", "injected refused: 35/35"],
    "policy_payments.py": ["benign allowed: 40/42", "injected refused: 33/34"],
    "mcp_server.py": [
        "acme sees: ['list_invoices']",
        f"purge_invoices{{'year': 2025}}: isError=True {model_sentence(Outcome.UNAVAILABLE)}",
    ],
}


def test_every_example_is_covered() -> None:
    assert sorted(p.name for p in EXAMPLES.glob("*.py")) == sorted(EXPECTED)


@pytest.mark.parametrize("script", sorted(EXPECTED))
@pytest.mark.slow
def test_example_runs_and_shows_the_guarded_outcomes(script: str) -> None:
    env = {k: v for k, v in os.environ.items() if k != "ANTHROPIC_API_KEY"}
    done = subprocess.run(
        [sys.executable, "-W", "error", str(EXAMPLES / script)],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
        env=env,
    )
    assert done.returncode == 0, done.stderr
    for line in EXPECTED[script]:
        assert line in done.stdout
    assert "sk-live-123" not in done.stdout and "Traceback" not in done.stdout


async def test_mcp_example_serves_over_stdio() -> None:
    params = StdioServerParameters(
        command=sys.executable, args=[str(EXAMPLES / "mcp_server.py"), "--stdio"]
    )
    async with Client(params) as client:
        admin = await client.list_tools(meta={"tenant": "admin"})
        denied = await client.call_tool("purge_invoices", {"year": 2025}, meta={"tenant": "acme"})
    assert [t.name for t in admin.tools] == ["list_invoices", "purge_invoices"]
    assert denied.is_error
    assert denied.content[0].text == model_sentence(Outcome.UNAVAILABLE)  # type: ignore[union-attr]
