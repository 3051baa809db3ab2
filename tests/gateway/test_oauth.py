"""The gateway as an OAuth 2.1 resource server, driven over HTTP by the real ``mcp`` client
with tokens of a local issuer: metadata, the 401 challenge, tenants and scopes."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

import httpx
import pytest

from guardrails.verdicts import Outcome, model_sentence

from .conftest import (
    BILLING,
    PY,
    SERVERS,
    TOKENS,
    command_toml,
    http_client,
    http_gateway,
    scrape,
    started,
    text,
)
from .oauth_issuer import ISSUER, RESOURCE, Issuer

METADATA = "https://gateway.test/.well-known/oauth-protected-resource/mcp"


def config(tmp_path: Path, issuer: Issuer, upstreams: str) -> Path:
    issuer.write(tmp_path / "jwks.json")
    (tmp_path / "tokens.txt").write_text(f"acme {TOKENS['acme']}\n")
    path = tmp_path / "gateway.toml"
    path.write_text(
        f"""
[gateway]
store = "audit.db"

{upstreams}

[tenants.acme]
[tenants.globex]
tools = ["echo"]

[auth]
tokens_file = "tokens.txt"

[auth.oauth]
issuer = "{ISSUER}"
resource = "{RESOURCE}"
jwks_file = "jwks.json"

[auth.oauth.scopes]
read = ["echo", "lookup"]
admin = ["*"]
"""
    )
    return path


@asynccontextmanager
async def gateway(tmp_path: Path, issuer: Issuer) -> AsyncIterator[str]:
    upstreams = f"[upstreams.billing]\ncommand = {command_toml(BILLING)}\n"
    async with http_gateway(config(tmp_path, issuer, upstreams)) as (url, _):
        yield url


async def listed_and_called(url: str, token: str) -> tuple[set[str], str, str]:
    async with http_client(url, token) as client:
        names = {t.name for t in (await client.list_tools()).tools}
        echo = text(await client.call_tool("echo", {"text": "hi"}))
        charge = text(await client.call_tool("charge", {"account_id": "a", "amount": 1}))
    return names, echo, charge


@pytest.mark.slow
async def test_metadata_challenge_tenants_and_scopes_over_http(tmp_path: Path) -> None:
    issuer = Issuer()
    async with gateway(tmp_path, issuer) as url:
        base = url.removesuffix("/mcp")
        async with httpx.AsyncClient() as http:
            documents = [
                (await http.get(base + path)).json()
                for path in (
                    "/.well-known/oauth-protected-resource",
                    "/.well-known/oauth-protected-resource/mcp",
                )
            ]
            bare = await http.post(url, json={})
            refused = {
                why: await http.post(url, json={}, headers={"Authorization": f"Bearer {t}"})
                for why, t in {
                    "another resource": issuer.token(aud="https://other.test/mcp"),
                    "expired": issuer.token(exp=1),
                    "another issuer": issuer.token(iss="https://evil.test"),
                    "no tenant claim": issuer.token(tenant=None),
                }.items()
            }
        read = await listed_and_called(url, issuer.token(scope="read"))
        admin = await listed_and_called(url, issuer.token(scp=["admin"], scope=None))
        nothing = await listed_and_called(url, issuer.token(scope="write"))
        globex = await listed_and_called(url, issuer.token(scope="admin", tenant="globex"))
        static = await listed_and_called(url, TOKENS["acme"])
        metrics = scrape(url)
    for document in documents:
        assert document["resource"] == RESOURCE
        assert document["authorization_servers"] == [ISSUER]
        assert document["scopes_supported"] == ["admin", "read"]
    assert bare.status_code == 401
    challenge = bare.headers["www-authenticate"]
    assert challenge.startswith("Bearer ") and f'resource_metadata="{METADATA}"' in challenge
    assert {why: r.status_code for why, r in refused.items()} == dict.fromkeys(refused, 401)
    unavailable = model_sentence(Outcome.UNAVAILABLE)
    assert read == ({"echo", "lookup"}, "hi", unavailable)
    assert admin[0] >= {"echo", "lookup", "charge"} and admin[1] == "hi"
    assert nothing == (set(), unavailable, unavailable)
    assert globex == ({"echo"}, "hi", unavailable)  # the tenant's list and the scopes, both
    assert static[0] >= {"echo", "lookup", "charge"}  # static tokens are not scoped
    assert "guardrails_gateway_auth_refusals_total 5.0" in metrics


@pytest.mark.slow
async def test_the_clients_token_never_reaches_an_upstream(tmp_path: Path) -> None:
    issuer = Issuer()
    server = [PY, str(SERVERS / "headers.py"), "--http"]
    async with started(server, r"listening (\d+)", stderr=False) as (port, _):
        upstream = f'[upstreams.headers]\nurl = "http://127.0.0.1:{port}/mcp"\n'
        upstream += 'headers = { Authorization = "Bearer upstream-own" }\n'
        body = config(tmp_path, issuer, upstream).read_text()
        body = body.replace('read = ["echo", "lookup"]', 'read = ["seen"]')
        body = body.replace('tools = ["echo"]', 'tools = ["seen"]')
        (tmp_path / "gateway.toml").write_text(body)
        async with http_gateway(tmp_path / "gateway.toml") as (url, _):
            token = issuer.token(scope="read")
            async with http_client(url, token) as client:
                seen = text(await client.call_tool("seen", {}))
            async with http_client(url, TOKENS["acme"]) as client:
                seen_static = text(await client.call_tool("seen", {}))
    assert seen == seen_static == "authorization: Bearer upstream-own"


@pytest.mark.parametrize(
    ("oauth", "where"),
    [
        ('issuer = "x"\nresource = "https://g/mcp"\njwks_file = "j"', "auth.oauth.issuer"),
        (
            'issuer = "https://i"\nresource = "https://g/mcp"',
            "auth.oauth: give exactly one of jwks_url",
        ),
        (
            'issuer = "https://i"\nresource = "https://g/mcp"\njwks_file = "j"\n'
            'algorithms = ["HS256"]',
            "auth.oauth.algorithms: must be a list of",
        ),
        (
            'issuer = "https://i"\nresource = "https://g/mcp"\njwks_file = "j"\n'
            'algorithms = ["none"]',
            "auth.oauth.algorithms",
        ),
        (
            'issuer = "https://i"\nresource = "https://g/mcp"\njwks_url = "http://i.test/j"',
            "auth.oauth.jwks_url: must be an https:// URL",
        ),
        (
            'issuer = "https://i"\nresource = "https://g/mcp"\njwks_file = "j"\nleeway = 301',
            "auth.oauth.leeway: must be at most 300",
        ),
        (
            'issuer = "https://i"\nresource = "https://g/mcp"\njwks_file = "j"\naudience = "x"',
            "auth.oauth.audience: unknown key",
        ),
        (
            'issuer = "https://i"\nresource = "https://g/mcp"\njwks_file = "j"\n'
            '[auth.oauth.scopes]\nread = "echo"',
            "auth.oauth.scopes.read: must be a list of tool names",
        ),
    ],
)
def test_an_oauth_mistake_names_the_key(oauth: str, where: str) -> None:
    import tomllib

    from guardrails.errors import ConfigurationError
    from guardrails.gateway import parse_config

    text = f'[upstreams.b]\ncommand = ["x"]\n[auth.oauth]\n{oauth}\n'
    with pytest.raises(ConfigurationError) as raised:
        parse_config(tomllib.loads(text), source="gw.toml")
    assert str(raised.value).startswith(f"gw.toml: {where}")


def test_oauth_without_the_extra_is_one_configuration_error(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import sys
    import tomllib
    from types import SimpleNamespace

    from guardrails.errors import ConfigurationError
    from guardrails.gateway import parse_config
    from guardrails.gateway.serve import http_tokens

    text = (
        '[upstreams.b]\ncommand = ["x"]\n[auth.oauth]\nissuer = "https://i"\n'
        'resource = "https://g/mcp"\njwks_file = "j"\n'
    )
    gateway = SimpleNamespace(config=parse_config(tomllib.loads(text), base=tmp_path))
    assert http_tokens(gateway) is not None  # type: ignore[arg-type]  # OAuth alone serves
    monkeypatch.setitem(sys.modules, "jwt", None)  # as if PyJWT were not installed
    with pytest.raises(ConfigurationError) as raised:
        http_tokens(gateway)  # type: ignore[arg-type]
    assert str(raised.value) == (
        "auth.oauth: needs the gateway-oauth extra: pip install 'guardrails-kit[gateway-oauth]'"
    )


def test_a_tenant_value_named_like_the_scopes_never_reaches_the_scope_guard() -> None:
    from types import SimpleNamespace

    from guardrails.gateway.scopes import SCOPES_KEY
    from guardrails.gateway.sessions import _with_scopes

    token = SimpleNamespace(scopes=["read"], claims={"iss": ISSUER})

    configured = {SCOPES_KEY: frozenset({"admin"}), "account_id": "a-1"}
    assert _with_scopes(configured, None) == {"account_id": "a-1"}
    assert _with_scopes(configured, token) == {
        "account_id": "a-1",
        SCOPES_KEY: frozenset({"read"}),
    }
