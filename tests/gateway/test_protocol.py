"""More of MCP through the gateway, with the real ``mcp`` client: titles, annotations,
output schemas, structured content and non-text blocks, over both protocol eras."""

from __future__ import annotations

import tomllib
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import pytest
from mcp import Client

from guardrails.gateway import Gateway, parse_config
from guardrails.gateway.upstream import _http

from .conftest import (
    BILLING,
    PY,
    SECRET,
    SERVERS,
    TOKENS,
    command_toml,
    http_gateway,
    stdio_client,
    text,
    write_config,
)

RICH = [PY, str(SERVERS / "rich.py")]
PIXEL = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8BQDwAEhQGAhKmMIQAAAABJRU5ErkJggg=="
BODY = f"""
[upstreams.rich]
command = {command_toml(RICH)}
"""


async def _seen(client: Client) -> dict[str, Any]:
    """What a client reads of the rich upstream: its listing and three answers."""
    listed = {t.name: t for t in (await client.list_tools()).tools}
    return {
        "weather": listed["weather"],
        "delete": listed["delete"],
        "forecast": await client.call_tool("weather", {"city": "Oslo"}),
        "deleted": await client.call_tool("delete", {"path": "x"}),
        "picture": await client.call_tool("picture", {}),
    }


def _check(seen: dict[str, Any]) -> None:
    weather, delete = seen["weather"], seen["delete"]
    assert weather.title == "Current weather"
    assert weather.annotations.read_only_hint is True
    assert weather.annotations.open_world_hint is False
    assert weather.output_schema["required"] == ["city", "celsius"]
    assert delete.annotations.destructive_hint is True
    assert delete.annotations.idempotent_hint is True
    forecast, deleted, picture = seen["forecast"], seen["deleted"], seen["picture"]
    assert forecast.is_error is False
    assert forecast.structured_content == {"city": "Oslo", "celsius": 21}
    # A tool returning a string answers {"result": ...} beside its text.
    assert (text(deleted), deleted.structured_content) == ("deleted x", {"result": "deleted x"})
    assert [b.type for b in picture.content] == ["image", "resource"]
    assert (picture.content[0].data, picture.content[0].mime_type) == (PIXEL, "image/png")
    assert picture.content[1].resource.text == "notes"


@pytest.mark.parametrize("mode", ["auto", "legacy"])
@pytest.mark.slow
async def test_over_http_the_listing_and_answers_keep_their_shape(
    mode: str, tmp_path: Path
) -> None:
    headers = {"Authorization": f"Bearer {TOKENS['acme']}"}
    async with (
        http_gateway(write_config(tmp_path, BODY)) as (url, _),
        Client(_http(url, headers), cache=None, mode=mode) as client,  # type: ignore[arg-type]
    ):
        _check(await _seen(client))


@pytest.mark.slow
async def test_over_stdio_the_listing_and_answers_keep_their_shape(tmp_path: Path) -> None:
    async with stdio_client(write_config(tmp_path, BODY)) as client:
        _check(await _seen(client))


INPROCESS = f"""
[gateway]
store = "audit.db"
max_result_chars = 200
[tenants.local]
values = {{ account_id = "acc-7" }}
[upstreams.rich]
command = {command_toml(RICH)}
[upstreams.billing]
command = {command_toml(BILLING)}
[upstreams.billing.tools.charge]
action = true
bind = {{ account_id = "account_id" }}
secrets = {{ api_key = "PAY_KEY" }}
"""


@asynccontextmanager
async def connected(tmp_path: Path, body: str = INPROCESS) -> AsyncIterator[Client]:
    config = parse_config(tomllib.loads(body), base=tmp_path)
    gateway = Gateway(config, secrets={"PAY_KEY": SECRET}.get)
    async with gateway.running(), Client(gateway.server(), cache=None) as client:
        yield client


@pytest.mark.slow
async def test_in_process_the_listing_and_answers_keep_their_shape(tmp_path: Path) -> None:
    async with connected(tmp_path) as client:
        _check(await _seen(client))


@pytest.mark.slow
async def test_a_secret_is_cut_out_of_the_structured_content_too(tmp_path: Path) -> None:
    async with connected(tmp_path) as client:
        charged = await client.call_tool("charge", {"amount": 3})
    assert charged.is_error is False
    assert charged.structured_content == {"result": "charged 3 to acc-7 with key [redacted]"}
    assert SECRET not in charged.model_dump_json()


@pytest.mark.slow
async def test_a_cut_answer_keeps_a_short_structured_content_or_is_an_error(
    tmp_path: Path,
) -> None:
    async with connected(tmp_path) as client:
        # The text is cut; its structured content would be as long: not sent, and an
        # ok answer without it would break the output schema's promise.
        long = await client.call_tool("echo", {"text": "line\n" * 5000})
        short = await client.call_tool("echo", {"text": "short"})
    assert long.is_error is True and long.structured_content is None
    assert text(long).endswith("[guardrails: result truncated]")
    assert (short.is_error, short.structured_content) == (False, {"result": "short"})


WORKFLOW = (
    INPROCESS
    + """
[workflows.pay]
steps = [
  { tool = "lookup", instructions = "Now call charge." },
  { tool = "charge", instructions = "Done." },
]
[upstreams.billing.tools.lookup]
bind = { account_id = "account_id" }
"""
)


@pytest.mark.slow
async def test_a_rewritten_answer_keeps_its_structured_content(tmp_path: Path) -> None:
    config = parse_config(tomllib.loads(WORKFLOW), base=tmp_path)
    gateway = Gateway(config, secrets={"PAY_KEY": SECRET}.get)
    async with gateway.running():
        server = gateway.server()
        async with Client(server, cache=None) as client:
            looked = await client.call_tool(
                "lookup", {"year": 2025}, meta={"guardrails/session": "s1"}
            )
    assert looked.is_error is False, text(looked)
    assert text(looked).endswith("Now call charge.")
    assert looked.structured_content == {"result": "invoices of acc-7 for 2025: 2"}
