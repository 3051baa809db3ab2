"""An upstream whose tools change between two starts: published again, clients told.

The upstreams here say ``pin = "auto"`` (a changed definition is published); what
``strict`` withholds is in ``test_pins.py``."""

from __future__ import annotations

import logging
import tomllib
from pathlib import Path

import anyio
import pytest
from mcp import Client

from guardrails.gateway import Gateway, parse_config
from guardrails.verdicts import Outcome, model_sentence

from .conftest import (
    PY,
    SERVERS,
    TOKENS,
    command_toml,
    http_client,
    http_gateway,
    text,
    write_config,
)


def config_text(generation: Path, extra: str = "") -> str:
    command = command_toml([PY, str(SERVERS / "changing.py"), str(generation)])
    return f"""
[gateway]
store = "audit.db"
[upstreams.changing]
command = {command}
backoff_initial = 0.05
pin = "auto"
{extra}
"""


def schema_of(listing: object, name: str) -> dict[str, object]:
    tools = {t.name: t for t in listing.tools}  # type: ignore[attr-defined]
    return dict(tools[name].input_schema["properties"])


async def restart_with(client: Client, generation: Path, number: str) -> None:
    generation.write_text(number)
    stopped = await client.call_tool("stop", {})
    assert stopped.is_error and text(stopped) == model_sentence(Outcome.ERROR)


@pytest.mark.slow
async def test_a_new_listing_is_published_and_listening_clients_are_told(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    generation = tmp_path / "generation"
    generation.write_text("1")
    config = parse_config(tomllib.loads(config_text(generation)), base=tmp_path)
    gateway = Gateway(config, secrets={}.get, health_interval=3600)
    caplog.set_level(logging.WARNING, logger="guardrails.gateway")
    async with gateway.running(), Client(gateway.server(), cache=None) as client:
        first = await client.list_tools()
        async with client.listen(tools_list_changed=True) as changes:
            await restart_with(client, generation, "2")
            with anyio.fail_after(60):
                event = await changes.__anext__()
        second = await client.list_tools()
        gamma = await client.call_tool("gamma", {"text": "new"})
        alpha = await client.call_tool("alpha", {"count": 3})
        old_alpha = await client.call_tool("alpha", {"text": "old"})
        beta = await client.call_tool("beta", {"text": "gone"})
    assert type(event).__name__ == "ToolsListChanged"
    logged = [r.getMessage() for r in caplog.records]
    assert "upstream 'changing': its tool list changed; publishing it again" in logged
    assert {t.name for t in first.tools} == {"alpha", "beta", "stop"}
    assert {t.name for t in second.tools} == {"alpha", "gamma", "stop"}
    assert set(schema_of(first, "alpha")) == {"text"}
    assert set(schema_of(second, "alpha")) == {"count"}
    assert text(gamma) == "gamma 2 new" and text(alpha) == "alpha 2 3"
    # The new schema is the one checked: the old argument is refused by the gateway
    # (``count`` is missing, and ``text`` is no longer declared).
    assert text(old_alpha) == model_sentence(Outcome.INVALID_ARGS, ["count"], undeclared=True)
    assert text(beta) == model_sentence(Outcome.UNAVAILABLE)


@pytest.mark.slow
async def test_a_listing_that_no_longer_fits_the_configuration_keeps_the_old_one(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    generation = tmp_path / "generation"
    generation.write_text("1")
    extra = "[upstreams.changing.tools.beta]\ntimeout = 5\n"
    config = parse_config(tomllib.loads(config_text(generation, extra)), base=tmp_path)
    gateway = Gateway(config, secrets={}.get, health_interval=3600)
    with caplog.at_level(logging.WARNING, logger="guardrails.gateway"):
        async with gateway.running(), Client(gateway.server(), cache=None) as client:
            upstream = gateway.upstreams[0]
            await restart_with(client, generation, "2")
            with anyio.fail_after(60):
                while not {t.name for t in upstream.listed} >= {"gamma"}:
                    await anyio.sleep(0.02)
            listed = await client.list_tools()
            beta = await client.call_tool("beta", {"text": "x"})
    assert {t.name for t in listed.tools} == {"alpha", "beta", "stop"}
    assert text(beta) == model_sentence(Outcome.ERROR)  # the upstream no longer has it
    assert (
        "upstream 'changing': its new tool list is not published "
        "(upstreams.changing.tools.beta: the upstream does not list this tool)"
    ) in [r.getMessage() for r in caplog.records]


@pytest.mark.slow
async def test_over_http_a_listening_client_is_told_and_lists_the_new_tools(
    tmp_path: Path,
) -> None:
    generation = tmp_path / "generation"
    generation.write_text("1")
    command = command_toml([PY, str(SERVERS / "changing.py"), str(generation)])
    body = f'[upstreams.changing]\ncommand = {command}\nbackoff_initial = 0.05\npin = "auto"\n'
    async with (
        http_gateway(write_config(tmp_path, body)) as (url, _),
        http_client(url, TOKENS["acme"]) as client,
    ):
        first = {t.name for t in (await client.list_tools()).tools}
        async with client.listen(tools_list_changed=True) as changes:
            await restart_with(client, generation, "2")
            with anyio.fail_after(60):
                event = await changes.__anext__()
        second = {t.name for t in (await client.list_tools()).tools}
    assert type(event).__name__ == "ToolsListChanged"
    assert first == {"alpha", "beta", "stop"} and second == {"alpha", "gamma", "stop"}
