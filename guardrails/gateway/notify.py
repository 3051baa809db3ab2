"""Telling connected clients that the tools changed, in both protocol eras, by tenant.

A 2026-07-28 client opens a ``subscriptions/listen`` stream: it is served
from its tenant's own subscription bus, which is sent ``ToolsListChanged``.
A handshake-era client (stdio, a stateful HTTP session) is sent
``notifications/tools/list_changed`` on its session: each session that asked
for the tools is remembered (its SDK ``Connection``, weakly: a closed one is
forgotten) with its tenant. Either is told only when the tools its tenant may see changed, so a
change never tells another tenant anything.
"""

from __future__ import annotations

import json
import logging
import weakref
from collections.abc import Callable, Iterable, Mapping
from typing import Any

import anyio

__all__ = ["Listeners", "changed_for", "signatures"]

log = logging.getLogger("guardrails.gateway")

_SEND_TIMEOUT = 5.0


class Listeners:
    """The clients to tell of a change, by tenant: listen streams and handshake sessions."""

    def __init__(self, tenant_of: Callable[[Any], str | None]) -> None:
        self.tenant_of = tenant_of
        self._sessions: weakref.WeakKeyDictionary[Any, str | None] = weakref.WeakKeyDictionary()
        self._streams: dict[str | None, Any] = {}  # tenant -> (bus, ListenHandler)

    async def listen(self, ctx: Any, params: Any) -> Any:
        """``subscriptions/listen``: a stream on the bus of the caller's tenant."""
        from mcp.server.subscriptions import InMemorySubscriptionBus, ListenHandler

        tenant = self.tenant_of(ctx)
        found = self._streams.get(tenant)
        if found is None:
            bus = InMemorySubscriptionBus()
            found = self._streams[tenant] = (bus, ListenHandler(bus))
        return await found[1](ctx, params)

    def remember(self, ctx: Any) -> None:
        """Remember the session of a request made over a handshake-era protocol."""
        from mcp_types.version import HANDSHAKE_PROTOCOL_VERSIONS

        if getattr(ctx, "protocol_version", None) not in HANDSHAKE_PROTOCOL_VERSIONS:
            return
        # The request's ServerSession lives as long as the request; its connection
        # (the SDK keeps no public name for it) as long as the client's session.
        session = getattr(getattr(ctx, "session", None), "_connection", None)
        if session is None:
            return
        if session in self._sessions:
            return
        try:
            self._sessions[session] = self.tenant_of(ctx)
        except TypeError:  # a session that cannot be weakly referenced is not kept
            return

    async def publish(self, changed: Callable[[str | None], bool]) -> None:
        """Tell the listen streams of each tenant that ``changed(tenant)``."""
        from mcp.server.subscriptions import ToolsListChanged

        for tenant, (bus, _) in list(self._streams.items()):
            if changed(tenant):
                await bus.publish(ToolsListChanged())

    async def tell(self, changed: Callable[[str | None], bool]) -> None:
        """Send ``tools/list_changed`` to each session whose tenant ``changed(tenant)``."""
        told: dict[str | None, bool] = {}
        for session, tenant in list(self._sessions.items()):
            if tenant not in told:
                told[tenant] = changed(tenant)
            if not told[tenant]:
                continue
            try:
                with anyio.fail_after(_SEND_TIMEOUT):
                    await session.send_tool_list_changed()
            except Exception as exc:  # a session gone or stuck: forgotten
                log.debug("tools/list_changed not sent (%s)", type(exc).__name__)
                self._sessions.pop(session, None)

    def close(self) -> None:
        """End every listen stream."""
        for _, handler in self._streams.values():
            handler.close()


def signatures(tools: Iterable[Any], fields: Mapping[str, Mapping[str, Any]]) -> dict[str, str]:
    """Published name -> what a client reads of it, as comparable text."""
    return {
        t.name: json.dumps([t.to_mcp(), fields.get(t.name)], sort_keys=True, default=str)
        for t in tools
    }


def changed_for(
    before: Mapping[str, str], after: Mapping[str, str], allowed: frozenset[str] | None
) -> bool:
    """Whether the tools an allow-list (None: every tool) lets a tenant see changed."""
    if allowed is None:
        return before != after
    return {k: v for k, v in before.items() if k in allowed} != {
        k: v for k, v in after.items() if k in allowed
    }
