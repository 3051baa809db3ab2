"""An upstream's resources, read-only: ``resources/list`` and ``resources/read`` relayed.

Nothing is exposed unless the configuration names it: an upstream's
``resources = ["uri", ...]`` lists the exact URIs clients may list and read.
Each is published as ``gateway://<upstream>/<uri, percent-encoded>``, so two
upstreams' URIs never collide and a URI always names its upstream. Templates
are not relayed (``resources/templates/list`` is empty). A tenant the
configuration does not name sees none. Text contents have the upstream's
secrets cut out, like a tool's answer; a resource whose text is longer than
``max_result_chars`` is refused, not cut (binary contents are bounded by the
transport's bytes). An upstream that is down, or a URI not exposed, is an MCP
error with a fixed message: the upstream's own text never reaches the client.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable
from typing import Any
from urllib.parse import quote

from .stderr import redact_model

__all__ = ["SCHEME", "Resources", "published_uri"]

log = logging.getLogger("guardrails.gateway")

SCHEME = "gateway://"
_NOT_FOUND = "Resource not found"
_FAILED = "The resource could not be read"


def published_uri(upstream: str, uri: str) -> str:
    """The URI a client sees for an upstream's ``uri``."""
    return f"{SCHEME}{upstream}/{quote(uri, safe='')}"


class Resources:
    """``on_list_resources``, ``on_list_resource_templates`` and ``on_read_resource``."""

    def __init__(self, upstreams: Iterable[Any], sees: Callable[[Any], bool], max_chars: int):
        self.by_uri: dict[str, tuple[Any, str]] = {
            published_uri(u.name, uri): (u, uri) for u in upstreams for uri in u.config.resources
        }
        self.sees = sees
        self.max_chars = max_chars

    async def list_resources(self, ctx: Any, params: Any = None) -> Any:
        from mcp.types import ListResourcesResult

        found: list[Any] = []
        if self.by_uri and self.sees(ctx):
            for upstream in {u.name: u for u, _ in self.by_uri.values()}.values():
                found.extend(await self._listed(upstream))
        return ListResourcesResult(resources=found, ttl_ms=0, cache_scope="private")

    async def list_templates(self, ctx: Any, params: Any = None) -> Any:
        from mcp.types import ListResourceTemplatesResult

        return ListResourceTemplatesResult(resource_templates=[], ttl_ms=0, cache_scope="private")

    async def _listed(self, upstream: Any) -> list[Any]:
        try:
            listed = await upstream.ask("list_resources")
        except Exception as exc:
            log.warning("upstream %r: resources not listed (%s)", upstream.name, type(exc).__name__)
            return []
        allowed, secrets = set(upstream.config.resources), upstream.stderr.secrets
        found: dict[str, Any] = {}
        for r in listed.resources:  # each named URI once, however often it is listed
            uri = str(r.uri)
            if uri in allowed and uri not in found:
                published = published_uri(upstream.name, uri)
                found[uri] = redact_model(r, secrets).model_copy(update={"uri": published})
        return list(found.values())

    async def read_resource(self, ctx: Any, params: Any) -> Any:
        from mcp.shared.exceptions import MCPError
        from mcp_types import INTERNAL_ERROR, INVALID_PARAMS

        found = self.by_uri.get(str(params.uri))
        if found is None or not self.sees(ctx):
            raise MCPError(INVALID_PARAMS, _NOT_FOUND)
        upstream, uri = found
        try:
            result = await upstream.ask("read_resource", uri)
        except Exception as exc:
            log.warning("upstream %r: resource %r not read (%s)", upstream.name, uri,
                        type(exc).__name__)  # fmt: skip
            raise MCPError(INTERNAL_ERROR, _FAILED) from None
        return self._bounded(upstream, str(params.uri), result)

    def _bounded(self, upstream: Any, published: str, result: Any) -> Any:
        from mcp.shared.exceptions import MCPError
        from mcp_types import INTERNAL_ERROR

        secrets = upstream.stderr.secrets
        contents = []
        size = 0
        for item in result.contents:
            item = redact_model(item, secrets)
            text = getattr(item, "text", None)
            if isinstance(text, str):
                size += len(text)
            contents.append(item.model_copy(update={"uri": published}))
        if size > self.max_chars:
            log.warning("upstream %r: a resource longer than max_result_chars was refused",
                        upstream.name)  # fmt: skip
            raise MCPError(INTERNAL_ERROR, _FAILED)
        return result.model_copy(
            update={"contents": contents, "ttl_ms": 0, "cache_scope": "private"}
        )
