"""A real ``mcp`` client against the gateway in front of real upstream servers, both transports."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from guardrails.verdicts import Outcome, model_sentence

from .conftest import (
    BILLING,
    PY,
    ROOT,
    SECRET,
    billing_over_http,
    command_toml,
    gateway_client,
    text,
    write_config,
)

TOOLS = f"""
[tenants.acme]
tools = ["lookup", "charge", "explode", "echo", "pid"]
values = {{ account_id = "acc-7" }}

[tenants.globex]
tools = ["lookup"]
values = {{ account_id = "acc-9" }}

[upstreams.billing]
command = {command_toml(BILLING)}
timeout = 20

[upstreams.billing.tools.lookup]
bind = {{ account_id = "account_id" }}

[upstreams.billing.tools.charge]
action = true
bind = {{ account_id = "account_id" }}
secrets = {{ api_key = "PAY_KEY" }}
"""


def dump(result: Any) -> str:
    return json.dumps(result.model_dump(mode="json"))


@pytest.mark.slow
async def test_listing_hides_bound_parameters_and_secrets(transport: str, tmp_path: Path) -> None:
    async with gateway_client(transport, write_config(tmp_path, TOOLS)) as client:
        listed = await client.list_tools()
    tools = {t.name: t.input_schema for t in listed.tools}
    assert sorted(tools) == ["charge", "echo", "explode", "lookup", "pid"]
    assert sorted(tools["charge"]["properties"]) == ["amount"]
    assert sorted(tools["lookup"]["properties"]) == ["year"]
    assert "api_key" not in dump(listed) and "account_id" not in dump(listed)


@pytest.mark.slow
async def test_a_tenant_sees_and_calls_only_its_tools(tmp_path: Path) -> None:
    config = write_config(tmp_path, TOOLS)
    async with gateway_client("http", config, tenant="globex") as client:
        listed = await client.list_tools()
        refused = await client.call_tool("echo", {"text": "hi"})
        lookup = await client.call_tool("lookup", {"year": 2025})
    assert [t.name for t in listed.tools] == ["lookup"]
    assert refused.is_error and text(refused) == model_sentence(Outcome.UNAVAILABLE)
    assert text(lookup) == "invoices of acc-9 for 2025: 2"


@pytest.mark.slow
async def test_a_tenant_the_config_does_not_name_is_offered_nothing(tmp_path: Path) -> None:
    async with gateway_client("http", write_config(tmp_path, TOOLS), tenant="nobody") as client:
        listed = await client.list_tools()
        refused = await client.call_tool("lookup", {"year": 2025})
    assert listed.tools == []
    assert text(refused) == model_sentence(Outcome.UNAVAILABLE)


@pytest.mark.slow
async def test_every_outcome_with_its_fixed_sentence(transport: str, tmp_path: Path) -> None:
    config = write_config(tmp_path, TOOLS, gateway="max_calls_per_session = 4")
    calls: list[tuple[str, dict[str, Any], Outcome | None, str | None]] = [
        ("lookup", {"year": 2025}, None, "invoices of acc-7 for 2025: 2"),
        ("echo", {}, Outcome.INVALID_ARGS, None),
        ("lookup", {"year": 2025, "account_id": "acc-1"}, Outcome.INVALID_ARGS, None),
        ("lookup", {"year": "last"}, Outcome.INVALID_ARGS, None),
        ("no_such_tool", {}, Outcome.UNAVAILABLE, None),
        ("explode", {"reason": "disk"}, Outcome.ERROR, None),
        ("echo", {"text": "one"}, None, "one"),
        ("pid", {}, None, None),
        ("echo", {"text": "over the ceiling"}, Outcome.LIMIT, None),
    ]
    async with gateway_client(transport, config, session="s-1") as client:
        for name, arguments, outcome, expected in calls:
            result = await client.call_tool(name, arguments)
            assert result.is_error is (outcome is not None), (name, arguments, text(result))
            if outcome is Outcome.INVALID_ARGS:
                assert text(result).startswith(model_sentence(Outcome.INVALID_ARGS))
            elif outcome is not None:
                assert text(result) == model_sentence(outcome), name
            if expected is not None:
                assert text(result) == expected
            # Neither the upstream's error text nor a rejected value comes back.
            assert "hunter2" not in dump(result) and "acc-1" not in dump(result)


@pytest.mark.slow
async def test_secrets_reach_action_tools_and_never_any_response(
    transport: str, tmp_path: Path
) -> None:
    config = write_config(tmp_path, TOOLS)
    seen: list[str] = []
    async with gateway_client(transport, config) as client:
        seen.append(dump(await client.list_tools()))
        charged = await client.call_tool("charge", {"amount": 5})
        seen.append(dump(charged))
        for arguments in ({"amount": 5, "api_key": "mine"}, {"amount": "x"}, {}):
            seen.append(dump(await client.call_tool("charge", arguments)))
    # The upstream echoed the key it received: the gateway cut it out.
    assert text(charged) == "charged 5 to acc-7 with key [redacted]"
    assert not any(SECRET in response for response in seen)


@pytest.mark.slow
async def test_session_ceiling_holds_across_calls_and_per_session(tmp_path: Path) -> None:
    config = write_config(tmp_path, TOOLS, gateway="max_calls_per_session = 2")
    from .conftest import TOKENS, http_client, http_gateway

    async with http_gateway(config) as (url, _):
        outcomes = []
        for session in ("a", "a", "a", "b"):
            async with http_client(url, TOKENS["acme"], session) as client:
                result = await client.call_tool("echo", {"text": "x"})
                outcomes.append(text(result))
    limit = model_sentence(Outcome.LIMIT)
    assert outcomes == ["x", "x", limit, "x"]


async def test_stdio_connection_is_a_session(tmp_path: Path) -> None:
    config = write_config(tmp_path, TOOLS, gateway="max_calls_per_session = 1")
    async with gateway_client("stdio", config) as client:
        first = await client.call_tool("echo", {"text": "x"})
        second = await client.call_tool("echo", {"text": "x"})
    assert text(first) == "x" and text(second) == model_sentence(Outcome.LIMIT)


@pytest.mark.slow
async def test_upstream_over_streamable_http(transport: str, tmp_path: Path) -> None:
    async with billing_over_http() as url:
        body = f'[upstreams.billing]\nurl = "{url}"\n'
        async with gateway_client(transport, write_config(tmp_path, body)) as client:
            listed = await client.list_tools()
            echoed = await client.call_tool("echo", {"text": "over http"})
            failed = await client.call_tool("explode", {"reason": "x"})
    assert "echo" in [t.name for t in listed.tools]
    assert text(echoed) == "over http"
    assert text(failed) == model_sentence(Outcome.ERROR)


@pytest.mark.slow
async def test_a_clashing_name_stays_the_first_upstreams_and_prefix_publishes_both(
    transport: str, tmp_path: Path
) -> None:
    body = (
        f"[upstreams.one]\ncommand = {command_toml(BILLING)}\n"
        f"[upstreams.two]\ncommand = {command_toml(BILLING)}\nprefix = true\n"
        f"[upstreams.three]\ncommand = {command_toml(BILLING)}\n"
    )
    async with gateway_client(transport, write_config(tmp_path, body)) as client:
        listed = await client.list_tools()
        first = await client.call_tool("pid", {})
        second = await client.call_tool("two__pid", {})
        routed = await client.call_tool("two__echo", {"text": "routed"})
    names = {t.name for t in listed.tools}
    # one keeps the plain names, two publishes its own space, three's are refused.
    assert {"echo", "pid", "two__echo", "two__pid"} <= names
    assert not any(name.startswith(("one__", "three__")) for name in names)
    assert text(routed) == "routed" and text(first) != text(second)


@pytest.mark.parametrize("token", [None, "not-a-token"])
@pytest.mark.slow
async def test_http_without_a_known_token_is_refused_and_counted(
    tmp_path: Path, token: str | None
) -> None:
    import urllib.error
    import urllib.request

    from .conftest import http_client, http_gateway, scrape

    async with http_gateway(write_config(tmp_path, TOOLS)) as (url, _):
        with pytest.raises(Exception) as caught:
            async with http_client(url, token) as client:
                await client.list_tools()
        assert not isinstance(caught.value, AssertionError)
        # The protocol's answer: 401 with a Bearer challenge.
        request = urllib.request.Request(url, data=b"{}", method="POST")
        if token is not None:
            request.add_header("Authorization", f"Bearer {token}")
        with pytest.raises(urllib.error.HTTPError) as refused_http:
            urllib.request.urlopen(request)
        refused_http.value.close()
        assert refused_http.value.code == 401
        assert refused_http.value.headers["WWW-Authenticate"].startswith("Bearer")
        metrics = scrape(url)
    refused = [
        line
        for line in metrics.splitlines()
        if line.startswith("guardrails_gateway_auth_refusals_total")
    ]
    # The client's attempt (one or more requests) and the direct request above.
    assert refused and float(refused[0].split()[-1]) >= 2


EXAMPLE = [PY, str(ROOT / "examples" / "mcp_server.py")]


@pytest.mark.slow
async def test_in_front_of_the_repositorys_example_server(transport: str, tmp_path: Path) -> None:
    from .conftest import started

    async def check(upstream: str) -> None:
        async with gateway_client(transport, write_config(tmp_path, upstream)) as client:
            listed = await client.list_tools()
            invoices = await client.call_tool("list_invoices", {"year": 2025})
            refused = await client.call_tool("list_invoices", {"year": 2025, "tenant": "acme"})
        schemas = {t.name: t.input_schema for t in listed.tools}
        assert sorted(schemas) == ["list_invoices", "purge_invoices"]
        assert sorted(schemas["list_invoices"]["properties"]) == ["year"]
        assert json.loads(text(invoices)) == ["guest-2025-001", "guest-2025-002"]
        assert text(refused).startswith(model_sentence(Outcome.INVALID_ARGS))

    await check(f"[upstreams.invoices]\ncommand = {command_toml([*EXAMPLE, '--stdio'])}\n")
    async with started(
        [*EXAMPLE, "--http", "127.0.0.1:0"], r"running on (http://\S+)", stderr=True
    ) as (url, _):
        await check(f'[upstreams.invoices]\nurl = "{url}/mcp"\n')


WORKFLOW = (
    TOOLS
    + """
[workflows.checkout]
steps = [
    { tool = "lookup", instructions = "Now call charge with the amount due." },
    { tool = "charge", instructions = "Paid: tell the user." },
]
"""
)


@pytest.mark.slow
async def test_a_workflow_is_gated_step_by_step_across_calls(
    transport: str, tmp_path: Path
) -> None:
    async with gateway_client(transport, write_config(tmp_path, WORKFLOW), session="w") as c:
        first = {t.name for t in (await c.list_tools()).tools}
        skipped = await c.call_tool("charge", {"amount": 5})
        looked = await c.call_tool("lookup", {"year": 2025})
        second = {t.name for t in (await c.list_tools()).tools}
        charged = await c.call_tool("charge", {"amount": 5})
        again = await c.call_tool("lookup", {"year": 2025})
    assert "lookup" in first and "charge" not in first
    assert text(skipped) == model_sentence(Outcome.UNAVAILABLE)
    assert "Now call charge" not in dump(skipped)
    assert text(looked) == "invoices of acc-7 for 2025: 2\n\nNow call charge with the amount due."
    assert "charge" in second and "lookup" not in second
    assert text(charged).endswith("Paid: tell the user.")
    assert text(again) == model_sentence(Outcome.UNAVAILABLE)  # the workflow is done


@pytest.mark.slow
async def test_a_stateful_mcp_session_is_the_session(tmp_path: Path) -> None:
    from mcp import Client

    from guardrails.gateway.upstream import _http

    from .conftest import TOKENS, http_gateway

    config = write_config(tmp_path, TOOLS, gateway="max_calls_per_session = 1")
    headers = {"Authorization": f"Bearer {TOKENS['acme']}"}
    answers = []
    async with http_gateway(config) as (url, _):
        for _ in range(2):  # two connections, each its own Mcp-Session-Id
            async with Client(_http(url, headers), cache=None, mode="legacy") as client:
                answers.append(text(await client.call_tool("echo", {"text": "x"})))
                answers.append(text(await client.call_tool("echo", {"text": "x"})))
    limit = model_sentence(Outcome.LIMIT)
    assert answers == ["x", limit, "x", limit]
