"""A ``requestState`` the gateway hands a client is bound to the call that got it.

An upstream seals its ``requestState`` against its own client, and every
tenant's calls reach it through the gateway's one connection: the upstream
cannot tell whose state comes back. So the gateway hands out
``grs1.<mac>.<state>``, where ``mac`` is an HMAC-SHA256 over the tenant,
the session, the upstream, its tool and the (redacted) state, keyed by a
random key kept in the store (set once with a compare-and-set, so every
replica uses the same). A retry carrying a state handed to another tenant,
session or tool, one the gateway did not hand out, or answers without any
state, is refused before the upstream sees it (``unavailable``).
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import os

from ..errors import StopRun
from ..store import Store, StoreUnavailable

__all__ = ["ForeignState", "StateSeal", "state_key"]

KEY = "gateway.request_state_key"
PREFIX = "grs1."
_NONE = "-"  # the upstream gave no state (only its questions)
_GIVEN = "="


class ForeignState(StopRun):
    """A retry's ``requestState`` was not handed to this caller for this tool."""


def state_key(store: Store) -> bytes:
    """The store's key for the states' HMAC, made the first time (synchronous store work)."""
    for _ in range(64):
        current = store.get(KEY)
        if current is not None:
            return base64.b64decode(current)
        made = base64.b64encode(os.urandom(32)).decode()
        if store.compare_and_set(KEY, None, made):
            return base64.b64decode(made)
    raise StoreUnavailable("the request-state key: the store kept changing")


class StateSeal:
    """Seals and opens the states of one key; ``binding`` names the call (tenant, session,
    upstream, tool)."""

    def __init__(self, key: bytes) -> None:
        self.key = key

    def seal(self, binding: tuple[str | None, ...], state: str | None) -> str:
        body = _NONE if state is None else _GIVEN + state
        return f"{PREFIX}{self._mac(binding, body)}.{body}"

    def open(
        self, binding: tuple[str | None, ...], sealed: str | None, answered: bool
    ) -> str | None:
        """The upstream's state of ``sealed``; raises ``ForeignState`` unless it was
        handed out for ``binding`` (or, without any state, nothing was ``answered``)."""
        if sealed is None:
            if answered:
                raise ForeignState("answers without the state that asked for them")
            return None
        mac, _, body = sealed.removeprefix(PREFIX).partition(".")
        good = sealed.startswith(PREFIX) and body[:1] in (_NONE, _GIVEN)
        if not good or not hmac.compare_digest(mac, self._mac(binding, body)):
            raise ForeignState("a request state not handed out for this call")
        return None if body == _NONE else body[1:]

    def _mac(self, binding: tuple[str | None, ...], body: str) -> str:
        message = json.dumps([*binding, body], ensure_ascii=False).encode()
        digest = hmac.new(self.key, message, hashlib.sha256).digest()
        return base64.urlsafe_b64encode(digest).decode().rstrip("=")
