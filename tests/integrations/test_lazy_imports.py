"""The integrations import their SDKs only when used."""

from __future__ import annotations

import subprocess
import sys


def test_guardrails_and_every_integration_import_without_anthropic_or_mcp() -> None:
    code = (
        "import sys; sys.modules['anthropic'] = None; sys.modules['mcp'] = None\n"
        "import guardrails, guardrails.cli.demo\n"
        "from guardrails.integrations import anthropic, mcp, openai, scripted\n"
        "rails = guardrails.Guardrails([guardrails.tool(lambda x: x, name='echo')])\n"
        "turn = rails.turn()\n"
        "msg = {'content': [{'type': 'tool_use', 'id': 't1', 'name': 'echo', 'input': {'x': 1}}]}\n"
        "assert anthropic.tool_results(turn, msg)[0]['content'] == '1'\n"
        "assert openai.offer_tools(turn)[0]['function']['name'] == 'echo'\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=False
    )
    assert done.returncode == 0, done.stderr
