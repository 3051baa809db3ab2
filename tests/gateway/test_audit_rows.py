"""The audit rows of a tools/call: its pre_turn row and its own, both committed when it answers."""

from __future__ import annotations

import tomllib
from pathlib import Path

from mcp import Client

from guardrails.gateway import Gateway, parse_config
from guardrails.store import SQLiteStore

from .conftest import BILLING, command_toml, text


async def test_a_calls_pre_turn_row_and_its_own_are_committed_in_order_when_it_answers(
    tmp_path: Path,
) -> None:
    body = (
        f'[gateway]\nstore = "audit.db"\n[upstreams.billing]\ncommand = {command_toml(BILLING)}\n'
    )
    config = parse_config(tomllib.loads(body), base=tmp_path)
    gateway = Gateway(config, secrets={}.get)
    async with gateway.running(), Client(gateway.server(), cache=None) as client:
        await client.list_tools()  # (else the client lists after its first call)
        for word in ("one", "two"):
            answer = await client.call_tool("echo", {"text": word})
            assert text(answer) == word
            # Read on another connection, before anything else is asked of the gateway.
            reader = SQLiteStore(str(tmp_path / "audit.db"))
            try:
                rows = reader.audit_rows()
            finally:
                reader.close()
            kinds = [r.kind for r in rows]
            assert kinds[-2:] == ["pre_turn", "tool_call"]
            assert rows[-1].tool == "echo" and rows[-1].outcome == "ok"
            assert rows[-2].session == rows[-1].session
