"""Who may decide approval requests over HTTP: ``<tenant> <approver> <token>`` entries.

Read from ``approvals.approvers_file`` and ``approvals.approvers_env`` (``;``
also separates entries in the variable); blank lines and ``#`` comments are
skipped, and a token may be written ``sha256:<hex digest>``. An approver
decides only its tenant's requests, and its name is what the decision and
its audit row record. These are not MCP client tokens: a token that is both
is refused when the gateway starts, and a client's token never decides.
Tokens are compared by SHA-256 digest in constant time, every entry each
time. The file is read again when it changes (looked at on each request).

With ``[approvals] oauth_scope`` (and ``[auth.oauth]``), a bearer JWT valid
for this gateway whose scopes include that scope is also an approver: of its
``tenant_claim``'s tenant, named ``oauth:<sub>``. Without the scope a JWT
never decides.
"""

from __future__ import annotations

import hashlib
import hmac
import logging
import os
from pathlib import Path
from typing import Any, NamedTuple

from ..errors import ConfigurationError
from .auth import token_digest
from .settings import ApprovalsConfig

__all__ = ["Approver", "ApproverTable", "Approvers", "load_approvers", "parse_approvers"]

log = logging.getLogger("guardrails.gateway")

_MAX_NAME = 256


class Approver(NamedTuple):
    """An approver of one tenant: the name recorded with each decision."""

    tenant: str
    name: str


def _digest(token: str) -> bytes:
    return hashlib.sha256(token.encode("utf-8")).digest()


def parse_approvers(text: str, where: str) -> dict[bytes, Approver]:
    """``digest -> Approver`` from ``<tenant> <approver> <token>`` lines; errors name the line."""
    table: dict[bytes, Approver] = {}
    for number, line in enumerate(text.splitlines(), 1):
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        parts = line.split()
        if len(parts) != 3 or len(parts[1]) > _MAX_NAME:
            raise ConfigurationError(
                f"{where}, line {number}: expected '<tenant> <approver> <token>'"
            )
        tenant, name, token = parts
        digest = token_digest(token, where, number)
        if digest in table:
            raise ConfigurationError(f"{where}, line {number}: this token is listed twice")
        table[digest] = Approver(tenant, name)
    return table


def load_approvers(config: ApprovalsConfig) -> dict[bytes, Approver]:
    """The approvers of the file and of the environment variable (either may be absent)."""
    table: dict[bytes, Approver] = {}
    if config.approvers_file is not None:
        try:
            text = Path(config.approvers_file).read_text(encoding="utf-8")
        except OSError as exc:
            raise ConfigurationError(
                f"approvals.approvers_file: cannot read {config.approvers_file} ({exc.strerror})"
            ) from exc
        table.update(parse_approvers(text, config.approvers_file))
    if config.approvers_env is not None:
        raw = os.environ.get(config.approvers_env, "")
        table.update(parse_approvers(raw.replace(";", "\n"), f"${config.approvers_env}"))
    return table


class ApproverTable:
    """The approvers, read again when the file changes; ``approver(token)`` or None."""

    def __init__(self, config: ApprovalsConfig, known: dict[bytes, Approver]) -> None:
        self.config = config
        self._approvers = list(known.items())
        self._stamp = self._file_stamp()

    def _file_stamp(self) -> tuple[int, int, int] | None:
        if self.config.approvers_file is None:
            return None
        try:
            status = os.stat(self.config.approvers_file)
        except OSError:
            return None
        return (status.st_mtime_ns, status.st_size, status.st_ino)

    def _refresh(self) -> None:
        stamp = self._file_stamp()
        if self.config.approvers_file is None or stamp == self._stamp:
            return
        self._stamp = stamp
        try:
            self._approvers = list(load_approvers(self.config).items())
        except ConfigurationError as exc:
            log.warning("approvers not reloaded: %s", str(exc).splitlines()[0])

    def approver(self, token: str) -> Approver | None:
        self._refresh()
        digest = _digest(token)
        found = None
        for known, approver in self._approvers:
            # Every entry is compared, so the time taken does not say which matched.
            if hmac.compare_digest(known, digest):
                found = approver
        return found


class Approvers:
    """Who a bearer token decides as: an approver of the table, or a JWT with the scope."""

    def __init__(
        self, table: ApproverTable | None, jwts: Any = None, scope: str | None = None
    ) -> None:
        self.table = table
        self.jwts = jwts  # an ``oauth.JwtVerifier``, with ``scope``
        self.scope = scope

    async def approver(self, token: str) -> Approver | None:
        found = None if self.table is None else self.table.approver(token)
        if found is not None or self.jwts is None or self.scope is None:
            return found
        from .oauth import scopes_of

        claims = await self.jwts.claims(token)
        if claims is None or self.scope not in scopes_of(claims):
            return None
        tenant = claims.get(self.jwts.config.tenant_claim)
        subject = claims.get("sub")
        if not (isinstance(tenant, str) and tenant and isinstance(subject, str)):
            return None
        name = f"oauth:{subject}"
        if not subject.strip() or len(name) > _MAX_NAME or not name.isprintable():
            return None
        return Approver(tenant, name)
