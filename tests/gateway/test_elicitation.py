"""An upstream whose request during a call has no way back: a 2026-07-28 upstream
sending an older mid-call request (``ctx.elicit``, ``create_message``) rather
than answering ``input_required``. Its request fails at once on the
upstream's side; that call answers as the upstream decides (``error`` when it
raises), and no client, the calling one included, is asked anything. What
is relayed is in ``test_relay.py``."""

from __future__ import annotations

import tomllib
from pathlib import Path
from typing import Any

import pytest
from mcp import Client

from guardrails.gateway import Gateway, parse_config
from guardrails.verdicts import Outcome, model_sentence

from .conftest import PY, SERVERS, command_toml, text

UPSTREAM = f"""
[upstreams.rich]
command = {command_toml([PY, str(SERVERS / "rich.py")])}
"""


class Asked:
    """A client's elicitation and sampling callbacks that note every request."""

    def __init__(self) -> None:
        self.requests: list[Any] = []

    async def elicit(self, context: Any, params: Any) -> Any:
        from mcp.types import ElicitResult

        self.requests.append(params)
        return ElicitResult(action="accept", content={"name": "client"})

    async def sample(self, context: Any, params: Any) -> Any:
        from mcp.types import CreateMessageResult, TextContent

        self.requests.append(params)
        content = TextContent(type="text", text="client")
        return CreateMessageResult(role="assistant", content=content, model="m")


@pytest.mark.slow
async def test_an_elicitation_or_a_sampling_never_reaches_a_client(
    tmp_path: Path,
) -> None:
    config = parse_config(tomllib.loads(UPSTREAM), base=tmp_path)
    gateway = Gateway(config, secrets={}.get, health_interval=3600)
    asked = Asked()
    async with (
        gateway.running(),
        Client(
            gateway.server(),
            cache=None,
            elicitation_callback=asked.elicit,
            sampling_callback=asked.sample,
        ) as client,
    ):
        elicited = await client.call_tool("ask", {})
        sampled = await client.call_tool("sample", {})
        after = await client.call_tool("weather", {"city": "Oslo"})
    assert elicited.is_error and text(elicited) == model_sentence(Outcome.ERROR)
    assert not sampled.is_error and text(sampled).startswith("sampling refused (")
    assert asked.requests == []  # the calling client is never asked, nor any other
    assert not after.is_error


@pytest.mark.slow
async def test_over_http_another_tenants_client_is_never_asked(tmp_path: Path) -> None:
    from guardrails.gateway.upstream import _http

    from .conftest import TOKENS, http_gateway, write_config

    body = UPSTREAM + "[tenants.acme]\n[tenants.globex]\n"
    acme_asked, globex_asked = Asked(), Asked()

    def client(url: str, tenant: str, asked: Asked) -> Client:
        headers = {"Authorization": f"Bearer {TOKENS[tenant]}"}
        return Client(
            _http(url, headers),
            cache=None,
            elicitation_callback=asked.elicit,
            sampling_callback=asked.sample,
        )

    async with (
        http_gateway(write_config(tmp_path, body)) as (url, _),
        client(url, "acme", acme_asked) as acme,
        client(url, "globex", globex_asked) as globex,
    ):
        await globex.list_tools()
        elicited = await acme.call_tool("ask", {})
        sampled = await acme.call_tool("sample", {})
        other = await globex.call_tool("weather", {"city": "Oslo"})
    assert elicited.is_error and text(elicited) == model_sentence(Outcome.ERROR)
    assert text(sampled).startswith("sampling refused (")
    assert acme_asked.requests == [] and globex_asked.requests == []
    assert not other.is_error
