"""The framework adapters import their framework only when used."""

from __future__ import annotations

import subprocess
import sys


def test_adapters_import_without_their_frameworks() -> None:
    code = (
        "import sys\n"
        "for name in ('agents', 'langchain', 'langchain_core', 'langgraph', 'pydantic_ai'):\n"
        "    sys.modules[name] = None\n"
        "from guardrails.integrations import langchain, openai_agents, pydantic_ai\n"
        "import guardrails\n"
        "rails = guardrails.Guardrails()\n"
        "try:\n"
        "    langchain.middleware(rails)\n"
        "except ImportError:\n"
        "    print('needs langchain')\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=False
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout == "needs langchain\n"
