"""Bearer tokens mapped to tenants, read from a file or the environment.

One entry per line, ``<tenant> <token>``; blank lines and ``#`` comments are
skipped. A token may be written as ``sha256:<hex digest>`` so that the file
holds no usable credential. Tokens are compared by their SHA-256 digest in
constant time; a token that maps to no tenant is refused by the MCP SDK's
bearer middleware with HTTP 401 and ``WWW-Authenticate: Bearer``, and counted.

The table is read again, without a restart, when ``auth.tokens_file``
changes (checked at each request) and on ``reload()`` (SIGHUP): a revoked
token stops working at the next request. A file that cannot be read or
parsed then is logged and leaves the table as it was.
"""

from __future__ import annotations

import hashlib
import hmac
import logging
import os
from collections.abc import Awaitable, Callable, MutableMapping
from pathlib import Path
from typing import Any

from ..errors import ConfigurationError
from .config import AuthConfig

__all__ = ["CountRefusals", "TokenTable", "load_tokens", "parse_tokens"]

log = logging.getLogger("guardrails.gateway")

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
ASGIApp = Callable[[Scope, Receive, Send], Awaitable[None]]


def _digest(token: str) -> bytes:
    return hashlib.sha256(token.encode("utf-8")).digest()


def token_digest(token: str, where: str, number: int) -> bytes:
    """The SHA-256 of a token line's token, or the digest it gives as ``sha256:<hex>``."""
    if not token.startswith("sha256:"):
        return _digest(token)
    try:
        digest = bytes.fromhex(token[len("sha256:") :])
    except ValueError:
        digest = b""
    if len(digest) != 32:
        raise ConfigurationError(f"{where}, line {number}: a bad sha256: digest")
    return digest


def parse_tokens(text: str, where: str) -> dict[bytes, str]:
    """``digest -> tenant`` from ``<tenant> <token>`` lines; errors name the line, not the token."""
    table: dict[bytes, str] = {}
    for number, line in enumerate(text.splitlines(), 1):
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        parts = line.split()
        if len(parts) != 2:
            raise ConfigurationError(f"{where}, line {number}: expected '<tenant> <token>'")
        tenant, token = parts
        digest = token_digest(token, where, number)
        if digest in table and table[digest] != tenant:
            raise ConfigurationError(f"{where}, line {number}: this token already maps to a tenant")
        table[digest] = tenant
    return table


def load_tokens(config: AuthConfig) -> dict[bytes, str]:
    """The tokens of the file and of the environment variable (either may be absent)."""
    table: dict[bytes, str] = {}
    if config.tokens_file is not None:
        try:
            text = Path(config.tokens_file).read_text(encoding="utf-8")
        except OSError as exc:
            raise ConfigurationError(
                f"auth.tokens_file: cannot read {config.tokens_file} ({exc.strerror})"
            ) from exc
        table.update(parse_tokens(text, config.tokens_file))
    if config.tokens_env is not None:
        raw = os.environ.get(config.tokens_env, "")
        # In a variable, entries may also be separated by ';'.
        table.update(parse_tokens(raw.replace(";", "\n"), f"${config.tokens_env}"))
    return table


class TokenTable:
    """The MCP SDK's ``TokenVerifier``: a known token becomes an ``AccessToken`` of its tenant.

    ``client_id`` is the tenant; ``subject`` is a short digest of the token, the
    principal that client-chosen session keys are scoped by.
    """

    def __init__(self, tokens: dict[bytes, str], config: AuthConfig | None = None) -> None:
        self._tokens = list(tokens.items())
        self.config = config
        self._stamp = self._file_stamp()

    def _file_stamp(self) -> tuple[int, int, int] | None:
        path = None if self.config is None else self.config.tokens_file
        if path is None:
            return None
        try:
            status = os.stat(path)
        except OSError:
            return None
        return (status.st_mtime_ns, status.st_size, status.st_ino)

    def reload(self) -> bool:
        """Read the configuration's tokens again; False (and logged) when they cannot be."""
        if self.config is None:
            return False
        self._stamp = self._file_stamp()
        try:
            tokens = load_tokens(self.config)
        except ConfigurationError as exc:
            log.warning("tokens not reloaded: %s", str(exc).splitlines()[0])
            return False
        self._tokens = list(tokens.items())
        return True

    def _refresh(self) -> None:
        watched = self.config is not None and self.config.tokens_file is not None
        if watched and self._file_stamp() != self._stamp:
            self.reload()

    @property
    def tenants(self) -> frozenset[str]:
        return frozenset(tenant for _, tenant in self._tokens)

    def tenant_of(self, token: str) -> str | None:
        digest = _digest(token)
        found = None
        for known, tenant in self._tokens:
            # Every entry is compared, so the time taken does not say which matched.
            if hmac.compare_digest(known, digest):
                found = tenant
        return found

    async def verify_token(self, token: str) -> Any:
        from mcp.server.auth.provider import AccessToken

        self._refresh()
        tenant = self.tenant_of(token)
        if tenant is None:
            return None
        principal = hashlib.sha256(b"principal:" + _digest(token)).hexdigest()[:16]
        return AccessToken(token=token, client_id=tenant, scopes=[], subject=principal)


class CountRefusals:
    """ASGI wrapper that counts the HTTP 401/403 answers of the app it wraps."""

    def __init__(self, app: ASGIApp, count: Callable[[], None]) -> None:
        self.app = app
        self.count = count

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope.get("type") != "http":
            await self.app(scope, receive, send)
            return

        async def counted(message: Message) -> None:
            if message.get("type") == "http.response.start" and message.get("status") in (401, 403):
                self.count()
            await send(message)

        await self.app(scope, receive, counted)
