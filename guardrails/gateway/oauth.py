"""OAuth 2.1 bearer JWTs, as the MCP authorization specification asks of a resource server.

``JwtVerifier`` is the MCP SDK's ``TokenVerifier``: a token is accepted when
its signature verifies with a key of the issuer's JWKS (an asymmetric
algorithm of ``algorithms``: never ``none``, never HMAC), its ``iss`` is the
configured issuer, its ``aud`` holds this gateway's resource URL, and its
``exp`` and ``nbf`` (with ``leeway``) say it is valid now. The tenant is the
``tenant_claim`` claim; the scopes are ``scope`` (space-separated) or
``scp`` (a list). A token whose ``kid`` is not in the keys held makes the
JWKS be read again, at most once per ``jwks_refetch_interval`` seconds.
Any failure answers None (HTTP 401): nothing of the token is logged.
The token itself stays in the gateway: upstreams are called with their own
configured headers only.
"""

from __future__ import annotations

import hashlib
import json
import logging
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import anyio

from .settings import OAuthConfig

__all__ = ["JwksCache", "JwtVerifier", "scopes_of"]

log = logging.getLogger("guardrails.gateway")

_MAX_JWKS_BYTES = 1 << 20


class JwksCache:
    """The issuer's signing keys by ``kid``, read from a URL or a file, refreshed on a miss."""

    def __init__(self, config: OAuthConfig, clock: Callable[[], float] = time.monotonic) -> None:
        self.config = config
        self.clock = clock
        self.keys: dict[str, Any] = {}
        self.fetches = 0
        self._last: float | None = None
        self._lock = anyio.Lock()

    async def key(self, kid: str) -> Any:
        """The key ``kid`` (a ``jwt.PyJWK``), or None; reads the JWKS again if allowed."""
        found = self.keys.get(kid)
        if found is not None:
            return found
        async with self._lock:
            found = self.keys.get(kid)
            if found is None and self._may_fetch():
                await self._refresh()
                found = self.keys.get(kid)
        return found

    def _may_fetch(self) -> bool:
        if self._last is None:
            return True
        return self.clock() - self._last >= self.config.jwks_refetch_interval

    async def _refresh(self) -> None:
        self._last = self.clock()
        self.fetches += 1
        try:
            text = await self._read()
            self.keys = _parsed_keys(text)
        except Exception as exc:
            # The keys held stay; the reason is ours (a type name), not the server's text.
            log.warning("oauth: the JWKS could not be read (%s)", type(exc).__name__)

    async def _read(self) -> bytes:
        config = self.config
        if config.jwks_file is not None:
            path = Path(config.jwks_file)
            return await anyio.to_thread.run_sync(lambda: path.read_bytes()[:_MAX_JWKS_BYTES])
        import httpx

        assert config.jwks_url is not None
        async with httpx.AsyncClient(timeout=5.0, follow_redirects=False) as client:
            response = await client.get(config.jwks_url)
            response.raise_for_status()
            return response.content[:_MAX_JWKS_BYTES]


def _parsed_keys(text: bytes) -> dict[str, Any]:
    """``kid -> PyJWK`` of the signing keys in a JWKS document (keys without a kid are skipped)."""
    import jwt

    document = json.loads(text)
    keys: dict[str, Any] = {}
    for entry in document.get("keys", []) if isinstance(document, Mapping) else []:
        if not isinstance(entry, Mapping) or not isinstance(entry.get("kid"), str):
            continue
        if entry.get("use", "sig") != "sig":
            continue
        try:
            keys[entry["kid"]] = jwt.PyJWK(dict(entry))
        except jwt.PyJWTError:
            continue  # a key type or curve this library cannot use
    return keys


def scopes_of(claims: Mapping[str, Any]) -> frozenset[str]:
    """The token's scopes: ``scope`` (RFC 8693/9068, space-separated) or ``scp`` (a list)."""
    scope = claims.get("scope")
    if isinstance(scope, str):
        return frozenset(scope.split())
    scp = claims.get("scp")
    if isinstance(scp, list):
        return frozenset(s for s in scp if isinstance(s, str) and s)
    return frozenset()


class JwtVerifier:
    """Validates bearer JWTs; a valid one becomes the ``AccessToken`` of its tenant."""

    def __init__(self, config: OAuthConfig, jwks: JwksCache | None = None) -> None:
        self.config = config
        self.jwks = jwks if jwks is not None else JwksCache(config)

    async def claims(self, token: str) -> dict[str, Any] | None:
        """The token's claims when it is valid for this gateway, else None."""
        import jwt

        config = self.config
        try:
            header = jwt.get_unverified_header(token)
            alg, kid = header.get("alg"), header.get("kid")
            if alg not in config.algorithms or not isinstance(kid, str):
                return None
            key = await self.jwks.key(kid)
            if key is None:
                return None
            claims: dict[str, Any] = jwt.decode(
                token,
                key.key,
                algorithms=[alg],
                audience=config.resource,
                issuer=config.issuer,
                leeway=config.leeway,
                options={"require": ["exp", "iss", "aud"]},
            )
        except jwt.PyJWTError:
            return None
        return claims

    async def verify_token(self, token: str) -> Any:
        from mcp.server.auth.provider import AccessToken

        claims = await self.claims(token)
        if claims is None:
            return None
        tenant = claims.get(self.config.tenant_claim)
        if not isinstance(tenant, str) or not tenant:
            return None
        subject = claims.get("sub")
        principal = json.dumps([self.config.issuer, subject if isinstance(subject, str) else ""])
        return AccessToken(
            token=token,
            client_id=tenant,
            scopes=sorted(scopes_of(claims)),
            expires_at=int(claims["exp"]),
            resource=self.config.resource,
            subject="jwt:" + hashlib.sha256(principal.encode()).hexdigest()[:16],
            # An issuer's token: its scopes restrict the tools (``sessions.py``).
            claims={"iss": self.config.issuer},
        )


class AnyOf:
    """A ``TokenVerifier`` accepting what the first of its verifiers that knows a token says."""

    def __init__(self, *verifiers: Any) -> None:
        self.verifiers = verifiers

    async def verify_token(self, token: str) -> Any:
        for verifier in self.verifiers:
            found = await verifier.verify_token(token)
            if found is not None:
                return found
        return None

    def reload(self) -> bool:
        """Read the static tokens again (SIGHUP): what each verifier that can reload says."""
        return all([v.reload() for v in self.verifiers if hasattr(v, "reload")])


def auth_settings(config: OAuthConfig | None, fallback_issuer: str) -> Any:
    """The SDK's ``AuthSettings``: with OAuth, this gateway as a resource server of the issuer.

    The audience is checked by ``JwtVerifier`` (``validate_token_resource`` off).
    """
    from mcp.server.auth.settings import AuthSettings

    if config is None:
        return AuthSettings.model_validate(
            {"issuer_url": fallback_issuer, "resource_server_url": None}
        )
    return AuthSettings.model_validate(
        {
            "issuer_url": config.issuer,
            "resource_server_url": config.resource,
            "validate_token_resource": False,
            "required_scopes": None,
        }
    )


def metadata_routes(config: OAuthConfig | None) -> list[Any]:
    """RFC 9728 metadata at ``/.well-known/oauth-protected-resource`` and at its form
    suffixed with the resource's path (``.../oauth-protected-resource/mcp``), with the
    scopes of ``[auth.oauth.scopes]``; to be matched before the SDK's own route."""
    if config is None:
        return []
    from urllib.parse import urlparse

    from mcp.server.auth.handlers.metadata import ProtectedResourceMetadataHandler
    from mcp.shared.auth import ProtectedResourceMetadata
    from starlette.routing import Route

    metadata = ProtectedResourceMetadata.model_validate(
        {
            "resource": config.resource,
            "authorization_servers": [config.issuer],
            "scopes_supported": None if config.scopes is None else sorted(config.scopes),
        }
    )
    handler = ProtectedResourceMetadataHandler(metadata)
    bare = "/.well-known/oauth-protected-resource"
    suffix = urlparse(config.resource).path.rstrip("/")
    paths = [bare, bare + suffix] if suffix else [bare]
    return [Route(path, handler.handle, methods=["GET"]) for path in paths]
