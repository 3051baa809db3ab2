"""The gateway's store work runs off its event loop: listing (workflow phase), and a
budgeted, ceilinged step call (counter, phase, reservation, settlement, audit rows).

As in ``tests/store/test_off_loop.py`` (``tests/store/_gated.py``): one store method at a time waits on an
event that only a coroutine of the gateway's loop sets once the method started.
"""

from __future__ import annotations

import asyncio
import threading
import tomllib
from pathlib import Path
from typing import Any

import pytest
from mcp import Client

from guardrails.gateway import Gateway, parse_config
from guardrails.store import MemoryStore
from tests.store._gated import Gated

from .conftest import BILLING, command_toml, text

CONFIG = f"""
[gateway]
store = "memory:"
max_calls_per_session = 5
[upstreams.billing]
command = {command_toml(BILLING)}
[upstreams.billing.tools.echo]
cost = 0.25
daily_cap = 10
[workflows.w]
steps = [{{ tool = "echo", instructions = "Now ask for the pid." }}, {{ tool = "pid", instructions = "Done." }}]
"""
METHODS = ["get", "compare_and_set", "incr", "reserve_leased", "settle_leased", "append"]


async def _scenario(gateway: Gateway, store: Any) -> tuple[list[str], str]:
    gateway.rails = gateway.engine(store)
    meta = {"guardrails/session": "s-1"}
    async with Client(gateway.server(), cache=None) as client:
        listed = await client.list_tools(meta=meta)  # type: ignore[call-arg]
        called = await client.call_tool("echo", {"text": "hi"}, meta=meta)  # type: ignore[arg-type]
    return sorted(t.name for t in listed.tools), text(called)


@pytest.mark.parametrize("method", METHODS)
@pytest.mark.slow
async def test_no_store_method_of_the_gateway_blocks_its_loop(tmp_path: Path, method: str) -> None:
    config = parse_config(tomllib.loads(CONFIG), base=tmp_path)
    gateway = Gateway(config, secrets={}.get)
    async with gateway.running():
        expected = await _scenario(gateway, MemoryStore())
        gated = Gated(MemoryStore(), method)

        async def opener() -> None:
            while not gated.started.is_set():
                await asyncio.sleep(0.001)
            gated.gate.set()

        task = asyncio.create_task(opener())
        try:
            got = await _scenario(gateway, gated)
        finally:
            task.cancel()
    assert gated.started.is_set(), f"the scenario never called {method}"
    assert threading.get_ident() not in gated.threads
    assert got == expected
    assert "pid" not in expected[0] and expected[1].endswith("Now ask for the pid.")
