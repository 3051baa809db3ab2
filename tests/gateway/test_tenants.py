"""Tenants never harm each other over HTTP: one tenant at a limit is refused, the others are not.

Real processes: the gateway over HTTP, the misbehaving upstream over stdio,
real ``mcp`` clients and a raw legacy handshake (what an older client sends).
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import anyio
import httpx
import pytest
from mcp_types.version import HANDSHAKE_PROTOCOL_VERSIONS

from guardrails.verdicts import Outcome, model_sentence

from .conftest import (
    MISBEHAVING,
    TOKENS,
    command_toml,
    http_client,
    http_gateway,
    scrape,
    text,
    write_config,
)

LIMIT = model_sentence(Outcome.LIMIT)


def config(tmp_path: Path, acme_limits: str, gateway: str = "", extra: str = "") -> Path:
    marker = tmp_path / "received"
    body = (
        f"[upstreams.bad]\ncommand = {command_toml(MISBEHAVING)}\ntimeout = 20\n"
        f'env = {{ MISBEHAVING_MARKER = "{marker}" }}\n'
        f"[tenants.acme]\n[tenants.acme.limits]\n{acme_limits}\n[tenants.globex]\n" + extra
    )
    return write_config(tmp_path, body, gateway=gateway)


def series(metrics: str, name: str) -> float:
    for line in metrics.splitlines():
        if line.startswith(name + " "):
            return float(line.split()[-1])
    raise AssertionError(f"no {name} in {metrics}")


async def open_legacy_session(url: str, token: str) -> int:
    """An initialize with a handshake-era protocol version: the HTTP status."""
    body = {
        "jsonrpc": "2.0", "id": 1, "method": "initialize",
        "params": {"protocolVersion": HANDSHAKE_PROTOCOL_VERSIONS[-1], "capabilities": {},
                   "clientInfo": {"name": "legacy", "version": "0"}},
    }  # fmt: skip
    headers = {"Authorization": f"Bearer {token}", "Accept": "application/json, text/event-stream"}
    async with httpx.AsyncClient() as http:
        response = await http.post(url, json=body, headers=headers)
    return response.status_code


@pytest.mark.slow
async def test_a_tenant_at_its_session_limit_is_refused_and_others_open_theirs(
    tmp_path: Path,
) -> None:
    path = config(tmp_path, "max_sessions = 2", gateway="max_sessions = 100\n")
    async with http_gateway(path) as (url, _):
        acme = [await open_legacy_session(url, TOKENS["acme"]) for _ in range(3)]
        globex = [await open_legacy_session(url, TOKENS["globex"]) for _ in range(3)]
        metrics = scrape(url)
    assert acme == [200, 200, 503]  # at the bound, then one past it
    assert globex == [200, 200, 200]
    assert series(metrics, 'guardrails_gateway_tenant_limit_refusals_total{limit="sessions"}') == 1


@pytest.mark.slow
async def test_a_tenant_past_its_rate_gets_limit_and_another_tenant_does_not(
    tmp_path: Path,
) -> None:
    # One call per 100 s: a second call within the test is past the rate, whatever the load.
    path = config(tmp_path, "calls_per_second = 0.01")
    async with http_gateway(path) as (url, _):
        async with http_client(url, TOKENS["acme"]) as acme:
            first, second = [await acme.call_tool("ok", {}) for _ in range(2)]
        async with http_client(url, TOKENS["globex"]) as globex:
            others = [await globex.call_tool("ok", {}) for _ in range(5)]
        metrics = scrape(url)
    assert not first.is_error and text(second) == LIMIT
    assert not any(r.is_error for r in others)
    name = 'guardrails_gateway_tenant_limit_refusals_total{limit="calls_per_second"}'
    assert series(metrics, name) == 1


@pytest.mark.slow
async def test_a_tools_rate_is_per_tenant_and_tool(tmp_path: Path) -> None:
    path = config(tmp_path, "tool_calls_per_second = 0.01")
    async with http_gateway(path) as (url, _):
        async with http_client(url, TOKENS["acme"]) as acme:
            ok_twice = [await acme.call_tool("ok", {}) for _ in range(2)]
            image = await acme.call_tool("image", {})
        async with http_client(url, TOKENS["globex"]) as globex:
            other = await globex.call_tool("ok", {})
    assert [r.is_error for r in ok_twice] == [False, True] and text(ok_twice[1]) == LIMIT
    assert not image.is_error and not other.is_error


@pytest.mark.slow
async def test_a_tenant_at_its_calls_in_flight_is_refused_while_another_calls(
    tmp_path: Path,
) -> None:
    marker = tmp_path / "received"
    path = config(tmp_path, "max_in_flight = 1")
    async with (
        http_gateway(path) as (url, _),
        http_client(url, TOKENS["acme"]) as acme,
        http_client(url, TOKENS["globex"]) as globex,
    ):
        slow: list[Any] = []
        async with anyio.create_task_group() as tg:

            async def in_flight() -> None:
                slow.append(await acme.call_tool("slow", {"seconds": 2}))

            tg.start_soon(in_flight)
            with anyio.fail_after(30):
                while not marker.exists():  # the slow call reached the upstream
                    await anyio.sleep(0.02)
            refused = await acme.call_tool("ok", {})
            other = await globex.call_tool("ok", {})
        after = await acme.call_tool("ok", {})  # the slot is given back
    assert text(refused) == LIMIT
    assert not other.is_error and not after.is_error and text(slow[0]) == "slow done"


@pytest.mark.slow
async def test_a_minus_32000_answer_for_one_tenant_never_fails_another_tenants_call(
    tmp_path: Path,
) -> None:
    marker = tmp_path / "received"
    path = config(tmp_path, "")
    async with http_gateway(path) as (url, _):
        async with (
            http_client(url, TOKENS["acme"]) as acme,
            http_client(url, TOKENS["globex"]) as globex,
        ):
            before = text(await acme.call_tool("ok", {}))
            slow: list[Any] = []
            async with anyio.create_task_group() as tg:

                async def in_flight() -> None:
                    slow.append(await globex.call_tool("slow", {"seconds": 2}))

                tg.start_soon(in_flight)
                with anyio.fail_after(30):
                    while not marker.exists():
                        await anyio.sleep(0.02)
                refused = await acme.call_tool("refuse", {})
            after = text(await acme.call_tool("ok", {}))
        metrics = scrape(url)
    assert text(refused) == model_sentence(Outcome.ERROR)
    assert text(slow[0]) == "slow done" and before == after
    assert series(metrics, 'guardrails_gateway_upstream_restarts_total{upstream="bad"}') == 0


@pytest.mark.slow
async def test_a_revoked_token_stops_working_without_a_restart(tmp_path: Path) -> None:
    path = config(tmp_path, "")
    async with http_gateway(path) as (url, _):
        async with http_client(url, TOKENS["acme"]) as acme:
            assert not (await acme.call_tool("ok", {})).is_error
        # The operator removes acme's line (and adds a new token for it).
        (tmp_path / "tokens.txt").write_text(
            f"globex {TOKENS['globex']}\nacme tok-acme-rotated-000000\n"
        )
        async with httpx.AsyncClient() as http:
            revoked = await http.post(
                url, json={}, headers={"Authorization": f"Bearer {TOKENS['acme']}"}
            )
        async with http_client(url, "tok-acme-rotated-000000") as rotated:
            fresh = await rotated.call_tool("ok", {})
    assert revoked.status_code == 401
    assert not fresh.is_error


@pytest.mark.slow
async def test_host_and_origin_are_checked_and_counted_apart_from_tokens(tmp_path: Path) -> None:
    path = config(tmp_path, "", gateway='allowed_hosts = ["gateway.example"]\n')
    log: list[str] = []
    async with http_gateway(path, log=log) as (url, _):
        auth = {"Authorization": f"Bearer {TOKENS['acme']}"}
        async with httpx.AsyncClient() as http:
            proxied = await http.post(url, json={}, headers={**auth, "Host": "gateway.example"})
            stranger = await http.post(url, json={}, headers={**auth, "Host": "evil.example"})
            cross = await http.post(url, json={}, headers={**auth, "Origin": "http://evil.example"})
        metrics = scrape(url)
    assert proxied.status_code not in (421, 403)  # behind a proxy: its Host is allowed
    assert stranger.status_code == 421 and cross.status_code == 403
    assert series(metrics, 'guardrails_gateway_http_refusals_total{reason="host"}') == 1
    assert series(metrics, 'guardrails_gateway_http_refusals_total{reason="origin"}') == 1
    assert series(metrics, "guardrails_gateway_auth_refusals_total") == 0
    assert "evil.example" not in "".join(log)


@pytest.mark.slow
async def test_the_log_carries_no_full_mcp_session_id(tmp_path: Path) -> None:
    path = config(tmp_path, "")
    log: list[str] = []
    async with http_gateway(path, log=log) as (url, _):
        body = {
            "jsonrpc": "2.0", "id": 1, "method": "initialize",
            "params": {"protocolVersion": HANDSHAKE_PROTOCOL_VERSIONS[-1], "capabilities": {},
                       "clientInfo": {"name": "legacy", "version": "0"}},
        }  # fmt: skip
        accept = {"Accept": "application/json, text/event-stream"}
        async with httpx.AsyncClient() as http:
            opened = await http.post(
                url, json=body, headers={**accept, "Authorization": f"Bearer {TOKENS['acme']}"}
            )
            session = opened.headers["mcp-session-id"]
            # Another tenant's token on acme's session: the SDK logs the refusal.
            stolen = await http.post(url, json=body, headers={
                **accept, "Authorization": f"Bearer {TOKENS['globex']}", "Mcp-Session-Id": session})  # fmt: skip
    assert stolen.status_code == 404
    logged = "".join(log)
    assert session[:8] in logged  # the line is there, cut
    assert session not in logged
    assert not re.search(r"[0-9a-f]{32}", logged)
