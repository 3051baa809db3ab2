"""A secret provider runs off the event loop, under ``secrets.timeout``."""

from __future__ import annotations

import threading
import tomllib
from pathlib import Path

import anyio
import pytest
from mcp import Client

from guardrails.gateway import Gateway, UpstreamStartError, parse_config
from guardrails.verdicts import Outcome, model_sentence

from .conftest import BILLING, SECRET, command_toml, text

CONFIG = f"""
[gateway]
store = "audit.db"
[tenants.local]
values = {{ account_id = "acc-7" }}
[secrets]
timeout = 0.5
[upstreams.billing]
command = {command_toml(BILLING)}
[upstreams.billing.tools.charge]
action = true
bind = {{ account_id = "account_id" }}
secrets = {{ api_key = "PAY_KEY" }}
"""


class BlockingVault:
    """A provider that blocks its thread until released (a vault that hangs)."""

    def __init__(self) -> None:
        self.entered = threading.Event()
        self.release = threading.Event()
        self.returned = threading.Event()

    def __call__(self, name: str) -> str:
        self.entered.set()
        self.release.wait(60)
        self.returned.set()
        return SECRET


@pytest.mark.slow
async def test_a_hanging_provider_blocks_neither_other_calls_nor_past_its_deadline(
    tmp_path: Path,
) -> None:
    vault = BlockingVault()
    gateway = Gateway(parse_config(tomllib.loads(CONFIG), base=tmp_path), secrets=vault)
    answers: dict[str, object] = {}
    try:
        async with gateway.running(), Client(gateway.server(), cache=None) as client:

            async def charge() -> None:
                answers["charge"] = await client.call_tool("charge", {"amount": 3})

            async with anyio.create_task_group() as tg:
                tg.start_soon(charge)
                assert await anyio.to_thread.run_sync(vault.entered.wait, 30)
                echoed = await client.call_tool("echo", {"text": "loop is free"})
                # The loop answered while the provider's thread was still blocked.
                assert not vault.returned.is_set()
    finally:
        vault.release.set()
    assert text(echoed) == "loop is free"
    charged = answers["charge"]
    assert text(charged) == model_sentence(Outcome.UNAVAILABLE)
    assert SECRET not in charged.model_dump_json()  # type: ignore[attr-defined]


UPSTREAM_SECRET = f"""
[gateway]
store = "audit.db"
[secrets]
timeout = 0.2
[upstreams.billing]
command = {command_toml(BILLING)}
env = {{ BILLING_TOKEN = "${{BILLING_TOKEN}}" }}
connect_timeout = 3
"""


async def test_an_upstream_credential_is_read_off_the_loop_and_a_hang_stops_the_start(
    tmp_path: Path,
) -> None:
    vault = BlockingVault()
    gateway = Gateway(parse_config(tomllib.loads(UPSTREAM_SECRET), base=tmp_path), secrets=vault)
    try:
        with pytest.raises(UpstreamStartError, match=r"upstreams\.billing: not listed within 3s"):
            async with gateway.running():
                pass
    finally:
        vault.release.set()
    assert vault.entered.is_set()
