"""A streamable-HTTP upstream's transport, with each answer bounded in bytes.

The MCP SDK reads a JSON answer whole (``response.aread()``). Here the HTTP
client's transport reads at most the request's bound (``bounds.py``: the
calling tenant's ``max_result_bytes``) of a JSON answer; a longer one is
dropped unread past the bound and the request is answered with the error
``TOO_LARGE`` instead, so the call ends at once. An event stream is cut at the
transport's bound (the largest of any tenant): reading it then fails, which
the SDK reports as a failed request. An answer that declares its length
(``Content-Length``, not compressed) within the bound is passed on unread:
the SDK's one reading of it stops at that length. A request's bound is
released when its call ends (``bounds.release``), an event stream's included.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

from .bounds import BoundedWriter, Bounds, too_large

__all__ = ["http_transport"]


def _request_id(content: bytes) -> Any:
    """The JSON-RPC id of a request body (a single request), or None."""
    try:
        message = json.loads(content)
    except ValueError:
        return None
    return message.get("id") if isinstance(message, dict) and "method" in message else None


def _declared_within(headers: Any, limit: int) -> bool:
    """Whether an answer declares a length within ``limit``, unencoded: its reader then
    stops at that length (HTTP/1.1 framing), so it needs no reading here first."""
    length = headers.get("content-length")
    encoding = headers.get("content-encoding", "identity").strip().lower()
    return (
        length is not None
        and length.isdigit()
        and int(length) <= limit
        and (encoding == "identity")
    )


def _bounded_transport(bounds: Bounds) -> Any:
    import httpx2

    class Bounded(httpx2.AsyncBaseTransport):
        def __init__(self) -> None:
            self.inner = httpx2.AsyncHTTPTransport()

        async def handle_async_request(self, request: Any) -> Any:
            response = await self.inner.handle_async_request(request)
            kind = response.headers.get("content-type", "").lower()
            if request.method != "POST" or not kind.startswith("application/json"):
                return response
            rid = _request_id(request.content)
            limit = bounds.of(rid) if rid is not None else bounds.default
            if _declared_within(response.headers, limit):
                return response  # read once, by the SDK: at most its declared length
            held = bytearray()
            try:
                async for chunk in response.aiter_raw():
                    held += chunk
                    if len(held) > limit:
                        break
            finally:
                await response.aclose()
            if len(held) > limit:
                error = too_large(rid).message.model_dump_json(by_alias=True, exclude_none=True)
                return httpx2.Response(200, headers={"content-type": "application/json"},
                                       content=error.encode(), request=request)  # fmt: skip
            headers = [
                (k, v) for k, v in response.headers.items() if k.lower() != "content-encoding"
            ]
            return httpx2.Response(response.status_code, headers=headers, content=bytes(held),
                                   request=request, extensions=response.extensions)  # fmt: skip

        async def aclose(self) -> None:
            await self.inner.aclose()

    return Bounded()


@asynccontextmanager
async def http_transport(
    url: str, headers: dict[str, str], max_bytes: int | None = None
) -> AsyncIterator[Any]:
    """The (read, write) streams of a streamable-HTTP upstream; ``max_bytes`` bounds answers."""
    import httpx2
    from mcp.client.streamable_http import streamable_http_client
    from mcp.shared._httpx_utils import MCP_DEFAULT_SSE_READ_TIMEOUT, MCP_DEFAULT_TIMEOUT

    bounds = None if max_bytes is None else Bounds(max_bytes)
    http = httpx2.AsyncClient(
        headers=headers,
        timeout=httpx2.Timeout(MCP_DEFAULT_TIMEOUT, read=MCP_DEFAULT_SSE_READ_TIMEOUT),
        transport=None if bounds is None else _bounded_transport(bounds),
    )
    async with http, streamable_http_client(url, http_client=http) as (read, write):
        yield read, (write if bounds is None else BoundedWriter(write, bounds))
