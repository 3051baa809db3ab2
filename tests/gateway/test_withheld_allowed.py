"""A tool a tenant's allow-list names, withheld by its pin, stops nothing else: the
other changes of the same upstream and of others are published, the withheld tool
answers ``unavailable``, and approving the pin publishes it again."""

from __future__ import annotations

import tomllib
from pathlib import Path

import anyio
import pytest
from mcp import Client

from guardrails.errors import ConfigurationError
from guardrails.gateway import Gateway, parse_config
from guardrails.verdicts import Outcome, model_sentence

from .conftest import PY, SERVERS, command_toml, text
from .test_pins import cli

RICH = command_toml([PY, str(SERVERS / "rich.py")])
ALLOWED = '["weather", "retitle", "grow", "other__weather", "other__retitle"]'


def gateway(tmp_path: Path, allowed: str = ALLOWED) -> Gateway:
    body = f"""
[gateway]
store = "{tmp_path / "pins.db"}"
pin_interval = 0.05
[upstreams.rich]
command = {RICH}
[upstreams.other]
command = {RICH}
prefix = true
pin = "auto"
[tenants.local]
tools = {allowed}
[tenants.acme]
"""
    config = parse_config(tomllib.loads(body), base=tmp_path)
    return Gateway(config, secrets={}.get, health_interval=3600)


async def told(changes: object) -> None:
    with anyio.fail_after(60):
        await changes.__anext__()  # type: ignore[attr-defined]


async def published(gw: Gateway, name: str) -> None:
    """Wait, with a bound, until the engine served publishes ``name``."""
    with anyio.fail_after(60):
        while gw.rails is None or name not in gw.rails.tools:
            await anyio.sleep(0.01)


@pytest.mark.slow
async def test_a_withheld_tool_in_an_allow_list_blocks_no_other_change(tmp_path: Path) -> None:
    gw = gateway(tmp_path)
    async with gw.running(), Client(gw.server(), cache=None) as client:
        async with client.listen(tools_list_changed=True) as changes:
            await client.call_tool("retitle", {})  # rich's weather changes: withheld
            await told(changes)
            await client.call_tool("other__retitle", {})  # other's changes: pin = auto
            await told(changes)
        await client.call_tool("grow", {})  # a new tool, outside local's list
        await published(gw, "grown")
        during = {t.name: t for t in (await client.list_tools()).tools}
        refused = text(await client.call_tool("weather", {"city": "Oslo"}))
        async with client.listen(tools_list_changed=True) as changes:
            approved = cli("approve", "rich", "weather", "--store", str(tmp_path / "pins.db"))
            await told(changes)
        after = {t.name: t for t in (await client.list_tools()).tools}
        called = await client.call_tool("weather", {"city": "Oslo"})
    assert set(during) == {"retitle", "grow", "other__weather", "other__retitle"}
    assert during["other__weather"].title == "Weather, changed"
    assert refused == model_sentence(Outcome.UNAVAILABLE)
    assert approved[0] == 0
    assert set(after) == set(during) | {"weather"}
    assert after["weather"].title == "Weather, changed"
    assert called.structured_content == {"city": "Oslo", "celsius": 21}


@pytest.mark.slow
async def test_a_gateway_starts_with_a_withheld_tool_in_an_allow_list(tmp_path: Path) -> None:
    first = gateway(tmp_path)
    async with (
        first.running(),
        Client(first.server(), cache=None) as client,
        client.listen(tools_list_changed=True) as changes,
    ):
        await client.call_tool("retitle", {})
        await told(changes)
    # The retitled weather becomes the pin; the upstream starts again with its first
    # definition, a change from that pin: withheld from the start.
    assert cli("approve", "rich", "weather", "--store", str(tmp_path / "pins.db"))[0] == 0
    again = gateway(tmp_path)
    async with again.running(), Client(again.server(), cache=None) as client:
        names = {t.name for t in (await client.list_tools()).tools}
        refused = text(await client.call_tool("weather", {"city": "Oslo"}))
    assert "weather" not in names and "retitle" in names
    assert refused == model_sentence(Outcome.UNAVAILABLE)


@pytest.mark.slow
async def test_a_name_no_upstream_ever_listed_is_still_refused_at_start(tmp_path: Path) -> None:
    gw = gateway(tmp_path, '["weather", "wether"]')
    with pytest.raises(ConfigurationError, match=r"tenants\.local\.tools: no tool 'wether'"):
        async with gw.running():
            pass
