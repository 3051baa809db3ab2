"""An upstream's ``tools/list_changed``: relisted at once, reviewed, and told to the
clients whose tenant sees the change (listen streams and handshake sessions)."""

from __future__ import annotations

import tomllib
from pathlib import Path
from typing import Any

import anyio
import pytest
from mcp import Client
from mcp.types import ToolListChangedNotification

from guardrails.gateway import Gateway, parse_config
from guardrails.gateway.upstream import _http

from .conftest import PY, SERVERS, TOKENS, command_toml, http_gateway, stdio_client, write_config

RICH = [PY, str(SERVERS / "rich.py")]
# No health check during the test: only the upstream's notification relists it.
UPSTREAM = f"""
[upstreams.rich]
command = {command_toml(RICH)}
health_interval = 3600
"""
WAIT = 60


class Told:
    """A message handler that notes each ``tools/list_changed``."""

    def __init__(self) -> None:
        self.count = 0
        self.event = anyio.Event()

    async def __call__(self, message: Any) -> None:
        if isinstance(message, ToolListChangedNotification):
            self.count += 1
            self.event.set()


@pytest.mark.slow
async def test_in_process_a_listening_client_is_told_and_lists_the_new_tool(
    tmp_path: Path,
) -> None:
    config = parse_config(tomllib.loads(UPSTREAM), base=tmp_path)
    gateway = Gateway(config)
    async with gateway.running(), Client(gateway.server(), cache=None) as client:
        before = {t.name for t in (await client.list_tools()).tools}
        async with client.listen(tools_list_changed=True) as changes:
            await client.call_tool("grow", {})
            with anyio.fail_after(WAIT):
                event = await changes.__anext__()
        after = {t.name for t in (await client.list_tools()).tools}
    assert type(event).__name__ == "ToolsListChanged"
    assert "grown" not in before and after == before | {"grown"}


@pytest.mark.slow
async def test_over_stdio_a_handshake_client_is_told(tmp_path: Path) -> None:
    told = Told()
    params = stdio_client(write_config(tmp_path, UPSTREAM)).server
    async with Client(params, cache=None, mode="legacy", message_handler=told) as client:
        await client.list_tools()
        await client.call_tool("grow", {})
        with anyio.fail_after(WAIT):
            await told.event.wait()
        grown = await client.call_tool("grown", {"text": "x"})
    assert grown.content[0].text == "grown x"


TENANTS = (
    UPSTREAM
    + """pin = "auto"
[tenants.acme]
[tenants.globex]
tools = ["weather"]
"""
)


@pytest.mark.slow
async def test_over_http_only_the_tenant_that_sees_the_change_is_told(tmp_path: Path) -> None:
    # globex may see `weather` only: `grown` changes nothing it sees, and it is not
    # told. `retitle` then changes `weather`'s title (pin = "auto"): globex is told
    # of that, once.
    async with http_gateway(write_config(tmp_path, TENANTS)) as (url, _):
        globex_told, acme_told = Told(), Told()

        def client(tenant: str, handler: Told) -> Client:
            headers = {"Authorization": f"Bearer {TOKENS[tenant]}"}
            return Client(_http(url, headers), cache=None, mode="legacy", message_handler=handler)

        async with client("globex", globex_told) as globex, client("acme", acme_told) as acme:
            await globex.list_tools()
            await acme.list_tools()
            await acme.call_tool("grow", {})
            with anyio.fail_after(WAIT):
                await acme_told.event.wait()
            acme_sees = {t.name for t in (await acme.list_tools()).tools}
            await acme.call_tool("retitle", {})
            with anyio.fail_after(WAIT):
                await globex_told.event.wait()
            globex_sees = {t.name for t in (await globex.list_tools()).tools}
    assert "grown" in acme_sees and "weather" in acme_sees
    assert globex_told.count == 1 and globex_sees == {"weather"}
