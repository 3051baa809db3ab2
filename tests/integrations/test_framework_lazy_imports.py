"""The framework adapters import their framework only when used."""

from __future__ import annotations

import subprocess
import sys


def test_the_adapters_import_without_any_framework() -> None:
    code = (
        "import sys\n"
        "for name in ('agent_framework', 'google', 'google.adk', 'claude_agent_sdk'):\n"
        "    sys.modules[name] = None\n"
        "from guardrails.integrations import agent_framework, claude_agent, google_adk\n"
        "from guardrails.integrations import scripted_models\n"
        "import guardrails\n"
        "try:\n"
        "    agent_framework.guard(object(), guardrails.Guardrails())\n"
        "except ImportError:\n"
        "    pass\n"
        "else:\n"
        "    raise SystemExit('guard() ran without the framework')\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=False
    )
    assert done.returncode == 0, done.stderr
