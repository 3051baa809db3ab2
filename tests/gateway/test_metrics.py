"""``/metrics``: open on the clients' port, or only on its own address; never values or secrets."""

from __future__ import annotations

import re
import urllib.error
import urllib.request
from pathlib import Path

import pytest

from .conftest import (
    BILLING,
    GATEWAY_ENV,
    PY,
    SECRET,
    TOKENS,
    command_toml,
    http_client,
    http_gateway,
    scrape,
    started,
    text,
    write_config,
)

BODY = f"""
[tenants.acme]
values = {{ account_id = "acc-private-77" }}

[upstreams.billing]
command = {command_toml(BILLING)}

[upstreams.billing.tools.charge]
action = true
bind = {{ account_id = "account_id" }}
secrets = {{ api_key = "PAY_KEY" }}
"""

VALUE = "a-distinctive-argument-value-31337"
SESSION = "session-key-never-exported"


async def exercise(url: str) -> None:
    async with http_client(url, TOKENS["acme"], SESSION) as client:
        charged = await client.call_tool("charge", {"amount": 424242})
        await client.call_tool("echo", {"text": VALUE})
        await client.call_tool("echo", {"text": VALUE, "extra": VALUE})
        await client.call_tool(VALUE, {})
    assert text(charged) == "charged 424242 to acc-private-77 with key [redacted]"


def assert_no_private_text(metrics: str) -> None:
    assert "guardrails_tool_outcomes_total" in metrics
    for private in (SECRET, VALUE, SESSION, "424242", "acc-private-77", *TOKENS.values()):
        assert private not in metrics


@pytest.mark.slow
async def test_metrics_on_the_clients_port_carry_no_value_secret_token_or_session(
    tmp_path: Path,
) -> None:
    async with http_gateway(write_config(tmp_path, BODY)) as (url, _):
        await exercise(url)
        metrics = scrape(url)
    assert_no_private_text(metrics)
    assert 'guardrails_tool_outcomes_total{outcome="unavailable",tool="_unknown"}' in metrics


@pytest.mark.slow
async def test_with_metrics_on_their_own_address_the_clients_port_has_none(
    tmp_path: Path,
) -> None:
    config = write_config(tmp_path, BODY)
    command = [PY, "-m", "guardrails.cli", "gateway", "--config", str(config)]
    pattern = r"(metrics on http://\S+/metrics[\s\S]*listening on http://\S+/mcp)"
    async with started(
        [*command, "--http", "127.0.0.1:0", "--metrics", "127.0.0.1:0"],
        pattern,
        stderr=True,
        env=GATEWAY_ENV,
    ) as (announced, _):
        found = re.search(r"metrics on (http://\S+/metrics)", announced)
        url = re.search(r"listening on (http://\S+/mcp)", announced)
        assert found is not None and url is not None
        await exercise(url.group(1))
        with pytest.raises(urllib.error.HTTPError) as caught:
            scrape(url.group(1))
        caught.value.close()
        with urllib.request.urlopen(found.group(1)) as response:
            metrics = response.read().decode()
    assert caught.value.code == 404
    assert_no_private_text(metrics)
