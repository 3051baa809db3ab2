"""The framework adapters import their framework only when used."""

from __future__ import annotations

import subprocess
import sys

import pytest

FRAMEWORKS = (
    "agents",
    "langchain",
    "langchain_core",
    "langgraph",
    "pydantic_ai",
    "agent_framework",
    "google",
    "google.adk",
    "claude_agent_sdk",
)

# Each adapter's one documented call, made without its framework.
CALLS = {
    "langchain": "langchain.middleware(rails)",
    "openai_agents": "openai_agents.guard_agent(object(), rails)",
    "pydantic_ai": "pydantic_ai.capability(rails)",
    "agent_framework": "agent_framework.guard_agent(object(), rails)",
    "google_adk": "google_adk.plugin(object(), rails)",
}


@pytest.mark.parametrize("adapter", sorted(CALLS))
@pytest.mark.slow
def test_an_adapter_imports_without_any_framework_and_its_call_says_what_it_needs(
    adapter: str,
) -> None:
    code = (
        "import sys\n"
        f"for name in {FRAMEWORKS!r}:\n"
        "    sys.modules[name] = None\n"
        "from guardrails.integrations import (\n"
        "    agent_framework, claude_agent, google_adk, langchain, openai_agents, pydantic_ai,\n"
        "    scripted_models,\n"
        ")\n"
        "import guardrails\n"
        "rails = guardrails.Guardrails()\n"
        "try:\n"
        f"    {CALLS[adapter]}\n"
        "except ImportError:\n"
        "    print('needs its framework')\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=False
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout == "needs its framework\n"
