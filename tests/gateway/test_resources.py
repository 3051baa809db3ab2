"""Resources, read-only: exposed only when the configuration names their URIs,
under the upstream's namespace, with the upstream's secrets cut out, and bounded."""

from __future__ import annotations

import tomllib
from pathlib import Path

import pytest
from mcp import Client
from mcp.shared.exceptions import MCPError

from guardrails.gateway import Gateway, parse_config
from guardrails.gateway.resources import published_uri
from guardrails.gateway.upstream import _http

from .conftest import PY, SECRET, SERVERS, TOKENS, command_toml, http_gateway, write_config

RICH = [PY, str(SERVERS / "rich.py")]
UPSTREAM = f"""
[upstreams.rich]
command = {command_toml(RICH)}
env = {{ RICH_KEY = "${{PAY_KEY}}" }}
resources = ["file:///notes.txt", "file:///long.txt"]
"""
INPROCESS = '[gateway]\nstore = "audit.db"\nmax_result_chars = 200\n' + UPSTREAM
NOTES = published_uri("rich", "file:///notes.txt")


@pytest.mark.slow
async def test_only_the_named_resources_are_listed_and_read_without_secrets(
    tmp_path: Path,
) -> None:
    config = parse_config(tomllib.loads(INPROCESS), base=tmp_path)
    gateway = Gateway(config, secrets={"PAY_KEY": SECRET}.get)
    async with gateway.running(), Client(gateway.server(), cache=None) as client:
        listed = {r.uri for r in (await client.list_resources()).resources}
        templates = (await client.list_resource_templates()).resource_templates
        notes = await client.read_resource(NOTES)
        refused = []
        for uri in (published_uri("rich", "file:///private.txt"), "file:///notes.txt"):
            with pytest.raises(MCPError) as caught:
                await client.read_resource(uri)
            refused.append(str(caught.value))
        with pytest.raises(MCPError) as too_long:
            await client.read_resource(published_uri("rich", "file:///long.txt"))
    assert listed == {NOTES, published_uri("rich", "file:///long.txt")}
    assert NOTES == "gateway://rich/file%3A%2F%2F%2Fnotes.txt" and templates == []
    assert [(c.uri, c.text) for c in notes.contents] == [(NOTES, "notes, key [redacted]")]
    assert SECRET not in notes.model_dump_json()
    assert refused == ["Resource not found"] * 2
    assert str(too_long.value) == "The resource could not be read"


@pytest.mark.slow
async def test_without_the_key_no_resource_is_exposed(tmp_path: Path) -> None:
    body = INPROCESS.replace('resources = ["file:///notes.txt", "file:///long.txt"]\n', "")
    config = parse_config(tomllib.loads(body), base=tmp_path)
    gateway = Gateway(config, secrets={"PAY_KEY": SECRET}.get)
    async with gateway.running(), Client(gateway.server(), cache=None) as client:
        with pytest.raises(MCPError):
            await client.list_resources()
        with pytest.raises(MCPError):
            await client.read_resource(NOTES)


@pytest.mark.parametrize("mode", ["auto", "legacy"])
@pytest.mark.slow
async def test_over_http_a_tenant_the_config_does_not_name_reads_no_resource(
    mode: str, tmp_path: Path
) -> None:
    async with http_gateway(write_config(tmp_path, UPSTREAM + "\n[tenants.acme]\n")) as (url, _):
        seen = {}
        for tenant in ("acme", "globex"):
            headers = {"Authorization": f"Bearer {TOKENS[tenant]}"}
            async with Client(_http(url, headers), cache=None, mode=mode) as client:  # type: ignore[arg-type]
                seen[tenant] = {r.uri for r in (await client.list_resources()).resources}
                if tenant == "globex":
                    with pytest.raises(MCPError):
                        await client.read_resource(NOTES)
                else:
                    read = await client.read_resource(NOTES)
                    assert read.contents[0].text == "notes, key [redacted]"
    assert seen["globex"] == set() and NOTES in seen["acme"]
