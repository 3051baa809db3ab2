"""Claude Agent SDK: a call the gate holds waits in the application's permission callback.

The bundled CLI against a scripted Messages API (offline). When the CLI asks
the application's ``can_use_tool`` about a served call the gate would ask
about, the adapter first puts the call to the gate (the request is stored),
then asks the callback: the application keeps its permission UI, and a
person decides with the CLI while it waits. The callback's "allow" is
advisory: the call runs only on the stored approval of its exact arguments;
its "deny" stops it whatever the store says.
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import pytest

from guardrails.integrations.scripted import ScriptedMessagesAPI, text_message, tool_use_message
from tests.integrations import _approvals as ap

if os.environ.get("GUARDRAILS_REQUIRE_FRAMEWORKS") != "1":
    pytest.importorskip("claude_agent_sdk", reason="claude-agent-sdk is not installed")

from claude_agent_sdk import (
    ClaudeAgentOptions,
    PermissionResultAllow,
    PermissionResultDeny,
    query,
    tool,
)

from guardrails.integrations.claude_agent import guard_options

pytestmark = pytest.mark.slow
NAME = "mcp__bank__transfer"


def _transfer(setup: ap.Setup) -> Any:
    body = setup.transfer()

    @tool("transfer", "Send money.", {"amount": int, "to": str})
    async def transfer(args: dict[str, Any]) -> dict[str, Any]:
        return {"content": [{"type": "text", "text": body(args["amount"], args["to"])}]}

    return transfer


async def _run(setup: ap.Setup, home: Path, person: Callable[[], Awaitable[Any]] | None) -> str:
    """One query whose model asks for the transfer; ``person`` is what the application's
    permission callback does meanwhile (its answer is the callback's). What the model read."""
    asked: list[str] = []

    async def can_use_tool(name: str, tool_input: dict[str, Any], ctx: Any) -> Any:
        asked.append(name)
        assert [r.status for r in setup.requests()] == ["pending"]  # stored before it asks
        assert person is not None
        return await person()

    steps = [tool_use_message((NAME, dict(ap.ARGS))), text_message("done")]
    with ScriptedMessagesAPI(steps) as api:
        env = {
            "ANTHROPIC_BASE_URL": api.base_url,
            "ANTHROPIC_API_KEY": "test",
            "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1",
            "ENABLE_TOOL_SEARCH": "false",
            "HOME": str(home),
            "CLAUDE_CONFIG_DIR": str(home),
        }
        options = ClaudeAgentOptions(
            env=env,
            cwd=str(home),
            model="claude-scripted",
            can_use_tool=None if person is None else can_use_tool,
        )
        options = guard_options(options, setup.rails(), server="bank", sdk_tools=[_transfer(setup)])

        async def prompt() -> Any:
            yield {"type": "user", "message": {"role": "user", "content": "Pay bob 900."}}

        async for _ in query(prompt=prompt(), options=options):
            pass
    assert asked == ([] if person is None else [NAME])
    [block] = [
        b for b in api.requests[-1]["messages"][-1]["content"] if b.get("type") == "tool_result"
    ]
    content = block["content"]
    return content if isinstance(content, str) else "".join(c["text"] for c in content)


def _deciding(setup: ap.Setup, verb: str | None, answer: Any, expire: bool = False) -> Any:
    async def person() -> Any:
        if verb is not None:
            await asyncio.to_thread(setup.decide, verb)
        if expire:
            setup.expire()
        return answer

    return person


async def test_approved_with_the_cli_while_the_callback_waits_it_runs_once(tmp_path: Path) -> None:
    (tmp_path / "db").mkdir()
    setup = ap.setup(tmp_path / "db")
    read = await _run(setup, tmp_path, _deciding(setup, "approve", PermissionResultAllow()))
    assert read == "sent 900 to bob"
    assert setup.ran == [ap.ARGS]
    assert [r.status for r in setup.requests(None)] == ["used"]
    setup.one_turn()


async def test_denied_with_the_cli_it_never_runs(tmp_path: Path) -> None:
    (tmp_path / "db").mkdir()
    setup = ap.setup(tmp_path / "db")
    read = await _run(setup, tmp_path, _deciding(setup, "deny", PermissionResultAllow()))
    assert read == ap.DENIED
    assert setup.ran == []


async def test_an_expired_approval_never_runs(tmp_path: Path) -> None:
    (tmp_path / "db").mkdir()
    setup = ap.setup(tmp_path / "db")
    person = _deciding(setup, "approve", PermissionResultAllow(), expire=True)
    assert await _run(setup, tmp_path, person) == ap.EXPIRED
    assert setup.ran == []


async def test_the_callbacks_allow_without_a_stored_approval_does_not_run_it(
    tmp_path: Path,
) -> None:
    (tmp_path / "db").mkdir()
    setup = ap.setup(tmp_path / "db")
    read = await _run(setup, tmp_path, _deciding(setup, None, PermissionResultAllow()))
    assert read == ap.PENDING
    assert setup.ran == []


async def test_the_callbacks_deny_wins_over_a_stored_approval(tmp_path: Path) -> None:
    (tmp_path / "db").mkdir()
    setup = ap.setup(tmp_path / "db")
    deny = PermissionResultDeny(message="not now")
    await _run(setup, tmp_path, _deciding(setup, "approve", deny))
    assert setup.ran == []
    assert [r.status for r in setup.requests(None)] == ["approved"]


async def test_an_allow_with_edited_arguments_is_a_new_request(tmp_path: Path) -> None:
    (tmp_path / "db").mkdir()
    setup = ap.setup(tmp_path / "db")
    edited = PermissionResultAllow(updated_input=dict(ap.EDITED))
    assert await _run(setup, tmp_path, _deciding(setup, "approve", edited)) == ap.PENDING
    assert setup.ran == []
    [new] = setup.requests()
    assert '"mallory"' in new.arguments
    assert [r.status for r in setup.requests("approved")] == ["approved"]


async def test_without_a_permission_callback_the_model_reads_pending(tmp_path: Path) -> None:
    """Nothing asks the application: the run does not pause, the call does not run."""
    (tmp_path / "db").mkdir()
    setup = ap.setup(tmp_path / "db")
    assert await _run(setup, tmp_path, None) == ap.PENDING
    assert setup.ran == []
    assert [r.status for r in setup.requests(None)] == ["pending"]
