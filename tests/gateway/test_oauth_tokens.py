"""Bearer JWTs against a local issuer: what is accepted, what is refused, key rotation."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import pytest

from guardrails.gateway.oauth import JwksCache, JwtVerifier, scopes_of
from guardrails.gateway.settings import OAuthConfig

from .oauth_issuer import ISSUER, RESOURCE, Issuer, jwks_server, unsigned


@pytest.fixture(scope="module")
def issuer() -> Issuer:
    return Issuer()


def config(jwks_file: Path, **changes: Any) -> OAuthConfig:
    fields: dict[str, Any] = {
        "issuer": ISSUER,
        "resource": RESOURCE,
        "jwks_file": str(jwks_file),
        "leeway": 30.0,
        **changes,
    }
    return OAuthConfig(**fields)


async def verified(issuer: Issuer, tmp_path: Path, token: str, **changes: Any) -> Any:
    jwks = issuer.write(tmp_path / "jwks.json")
    return await JwtVerifier(config(jwks, **changes)).verify_token(token)


async def test_a_valid_token_gives_its_tenant_scopes_and_this_resource(
    issuer: Issuer, tmp_path: Path
) -> None:
    token = issuer.token(scope="read write")
    found = await verified(issuer, tmp_path, token)
    assert found is not None
    assert found.client_id == "acme" and sorted(found.scopes) == ["read", "write"]
    assert found.resource == RESOURCE and found.subject.startswith("jwt:")
    assert token not in repr(found.subject)


@pytest.mark.parametrize(
    "claims",
    [
        {"aud": "https://gateway.test/other"},  # a token for another resource
        {"aud": "https://gateway.test/mcp/"},  # near-miss: a trailing slash
        {"aud": "https://gateway.test/mcp2"},
        {"aud": ["https://a.test/mcp", "https://b.test/mcp"]},
        {"aud": None},
        {"iss": "https://issuer.test/"},
        {"iss": "https://evil.test"},
        {"iss": None},
        {"exp": None},
        {"exp": int(time.time()) - 3600},  # expired
        {"nbf": int(time.time()) + 3600},  # not yet valid
        {"tenant": None},
        {"tenant": ""},
        {"tenant": ["acme"]},
    ],
)
async def test_a_token_that_does_not_fit_is_refused(
    issuer: Issuer, tmp_path: Path, claims: dict[str, Any]
) -> None:
    assert await verified(issuer, tmp_path, issuer.token(**claims)) is None


async def test_exp_and_nbf_are_read_with_the_leeway_on_either_side_of_it(
    issuer: Issuer, tmp_path: Path
) -> None:
    now = int(time.time())
    # 300 s of leeway: 200 s late or early is inside it, 400 s is outside (wide margins,
    # so the seconds the test takes never matter).
    inside = [issuer.token(exp=now - 200), issuer.token(nbf=now + 200)]
    outside = [issuer.token(exp=now - 400), issuer.token(nbf=now + 400)]
    for token in inside:
        assert await verified(issuer, tmp_path, token, leeway=300.0) is not None
    for token in outside:
        assert await verified(issuer, tmp_path, token, leeway=300.0) is None


async def test_alg_none_and_hs256_signed_with_the_public_key_are_refused(
    issuer: Issuer, tmp_path: Path
) -> None:
    now = int(time.time())
    payload = {"iss": ISSUER, "aud": RESOURCE, "tenant": "acme", "exp": now + 600}
    forged = [
        unsigned({"alg": "none", "kid": issuer.current}, payload),
        unsigned({"alg": "none"}, payload),
        unsigned({"alg": "HS256", "kid": issuer.current}, payload, issuer.public_pem()),
        unsigned({"alg": "HS256", "kid": issuer.current, "typ": "JWT"}, payload, b""),
    ]
    for token in forged:
        assert await verified(issuer, tmp_path, token) is None
    # Even when the configuration lists only one algorithm, the header cannot pick another.
    only = ("RS256",)
    assert await verified(issuer, tmp_path, forged[2], algorithms=only) is None


async def test_garbage_and_a_key_of_another_issuer_under_a_known_kid_are_refused(
    issuer: Issuer, tmp_path: Path
) -> None:
    impostor = Issuer()
    impostor.keys[issuer.current] = impostor.keys[impostor.current]
    stolen_kid = impostor.token(kid=issuer.current)
    for token in ("", "abc", "a.b.c", "e30.e30.", stolen_kid):
        assert await verified(issuer, tmp_path, token) is None


async def test_a_rotated_key_is_fetched_once_and_refetches_are_bounded(tmp_path: Path) -> None:
    issuer = Issuer()
    now = [1000.0]
    with jwks_server(issuer) as url:
        settings = OAuthConfig(
            issuer=ISSUER, resource=RESOURCE, jwks_url=url, jwks_refetch_interval=60.0
        )
        cache = JwksCache(settings, clock=lambda: now[0])
        verifier = JwtVerifier(settings, cache)
        assert await verifier.verify_token(issuer.token()) is not None
        assert await verifier.verify_token(issuer.token()) is not None
        assert issuer.fetches == 1  # the keys are kept
        issuer.rotate()
        rotated = issuer.token()
        now[0] += 59  # short of the bound: no refetch, the new kid is unknown
        assert await verifier.verify_token(rotated) is None
        unknown = [issuer.token(header_kid=f"unknown-{n}") for n in range(50)]
        for token in unknown:
            await verifier.verify_token(token)
        assert issuer.fetches == 1
        now[0] += 1  # at the bound: one refetch, and the rotated key verifies
        assert await verifier.verify_token(rotated) is not None
        assert issuer.fetches == 2
        for token in unknown:  # unknown kids do not make the issuer fetched again
            assert await verifier.verify_token(token) is None
        assert issuer.fetches == 2
        now[0] += 60  # one more refetch, for the first unknown kid after the bound
        for token in unknown:
            assert await verifier.verify_token(token) is None
        assert issuer.fetches == 3
        assert await verifier.verify_token(issuer.token(kid="k1")) is None  # retired key
        assert await verifier.verify_token(rotated) is not None


async def test_an_unreachable_jwks_refuses_tokens_and_logs_no_detail(
    issuer: Issuer, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    settings = config(tmp_path / "absent.json")
    assert await JwtVerifier(settings).verify_token(issuer.token()) is None
    messages = [r.getMessage() for r in caplog.records]
    assert "oauth: the JWKS could not be read (FileNotFoundError)" in messages


def test_scopes_are_read_from_scope_or_scp() -> None:
    assert scopes_of({"scope": "a  b"}) == {"a", "b"}
    assert scopes_of({"scp": ["a", 3, "", "b"]}) == {"a", "b"}
    assert scopes_of({"scope": 7, "scp": "a"}) == frozenset()


async def test_many_requests_with_a_rotated_kid_at_once_read_the_jwks_once() -> None:
    import anyio

    issuer = Issuer()
    with jwks_server(issuer) as url:
        settings = OAuthConfig(issuer=ISSUER, resource=RESOURCE, jwks_url=url)
        verifier = JwtVerifier(settings)
        tokens = [issuer.token() for _ in range(20)]
        found: list[object] = []

        async def verify(token: str) -> None:
            found.append(await verifier.verify_token(token))

        async with anyio.create_task_group() as tg:
            for token in tokens:
                tg.start_soon(verify, token)
    assert issuer.fetches == 1
    assert len(found) == 20 and all(f is not None for f in found)


async def test_static_tokens_beside_oauth_are_reloaded(issuer: Issuer, tmp_path: Path) -> None:
    from guardrails.gateway.auth import TokenTable, load_tokens
    from guardrails.gateway.oauth import AnyOf
    from guardrails.gateway.settings import AuthConfig

    tokens = tmp_path / "tokens.txt"
    tokens.write_text("acme tok-old-000\n")
    auth = AuthConfig(tokens_file=str(tokens))
    either = AnyOf(TokenTable(load_tokens(auth), auth), JwtVerifier(config(tmp_path / "j")))
    assert (await either.verify_token("tok-old-000")).client_id == "acme"
    tokens.write_text("globex tok-new-111\n")
    assert either.reload() is True
    assert await either.verify_token("tok-old-000") is None
    assert (await either.verify_token("tok-new-111")).client_id == "globex"
