"""Prompts, read-only: exposed only when the configuration names them, under the
upstream's prefix, with the upstream's secrets cut out, and bounded."""

from __future__ import annotations

import tomllib
from pathlib import Path

import pytest
from mcp import Client
from mcp.shared.exceptions import MCPError

from guardrails.gateway import Gateway, parse_config
from guardrails.gateway.upstream import _http

from .conftest import PY, SECRET, SERVERS, TOKENS, command_toml, http_gateway, write_config

RICH = [PY, str(SERVERS / "rich.py")]
UPSTREAM = f"""
[upstreams.rich]
command = {command_toml(RICH)}
env = {{ RICH_KEY = "${{PAY_KEY}}" }}
prompts = ["greet", "long"]
"""
INPROCESS = '[gateway]\nstore = "audit.db"\nmax_result_chars = 200\n' + UPSTREAM


@pytest.mark.slow
async def test_only_the_named_prompts_are_listed_and_got_without_secrets(tmp_path: Path) -> None:
    config = parse_config(tomllib.loads(INPROCESS), base=tmp_path)
    gateway = Gateway(config, secrets={"PAY_KEY": SECRET}.get)
    async with gateway.running(), Client(gateway.server(), cache=None) as client:
        listed = {p.name for p in (await client.list_prompts()).prompts}
        greeting = await client.get_prompt("rich__greet", {"name": "Ada"})
        refused = []
        for name in ("rich__hidden", "hidden", "greet"):
            with pytest.raises(MCPError) as caught:
                await client.get_prompt(name, {})
            refused.append(str(caught.value))
        with pytest.raises(MCPError) as too_long:
            await client.get_prompt("rich__long", {})
    assert listed == {"rich__greet", "rich__long"}
    assert greeting.messages[0].content.text == "Hello Ada, key [redacted]"
    assert SECRET not in greeting.model_dump_json()
    assert refused == ["Prompt not found"] * 3
    assert str(too_long.value) == "The prompt could not be read"


@pytest.mark.slow
async def test_without_the_key_no_prompt_is_exposed(tmp_path: Path) -> None:
    body = INPROCESS.replace('prompts = ["greet", "long"]\n', "")
    config = parse_config(tomllib.loads(body), base=tmp_path)
    gateway = Gateway(config, secrets={"PAY_KEY": SECRET}.get)
    async with gateway.running(), Client(gateway.server(), cache=None) as client:
        with pytest.raises(MCPError):
            await client.list_prompts()
        with pytest.raises(MCPError):
            await client.get_prompt("rich__greet", {"name": "Ada"})


TENANTS = UPSTREAM + "\n[tenants.acme]\n"


@pytest.mark.parametrize("mode", ["auto", "legacy"])
@pytest.mark.slow
async def test_over_http_a_tenant_the_config_does_not_name_sees_no_prompt(
    mode: str, tmp_path: Path
) -> None:
    async with http_gateway(write_config(tmp_path, TENANTS)) as (url, _):
        seen = {}
        for tenant in ("acme", "globex"):
            headers = {"Authorization": f"Bearer {TOKENS[tenant]}"}
            async with Client(_http(url, headers), cache=None, mode=mode) as client:  # type: ignore[arg-type]
                seen[tenant] = {p.name for p in (await client.list_prompts()).prompts}
                if tenant == "globex":
                    with pytest.raises(MCPError):
                        await client.get_prompt("rich__greet", {"name": "Ada"})
                else:
                    got = await client.get_prompt("rich__greet", {"name": "Ada"})
                    assert got.messages[0].content.text == "Hello Ada, key [redacted]"
    assert seen == {"acme": {"rich__greet", "rich__long"}, "globex": set()}
