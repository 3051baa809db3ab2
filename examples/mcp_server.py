"""An MCP server whose tools are guarded: tools/list by pre_turn, tools/call by tool_call.

python examples/mcp_server.py           # a client talks to the server in memory
python examples/mcp_server.py --stdio   # serve over stdio, for any MCP client
python examples/mcp_server.py --http 127.0.0.1:8000   # serve streamable HTTP at /mcp
"""

from __future__ import annotations

import sys
from typing import Any

import anyio
from mcp import Client

from guardrails import Guardrails, TurnContext, tool
from guardrails.integrations.mcp import guarded_server
from guardrails.rules import allow_list


@tool(bind={"tenant": "tenant"})
def list_invoices(tenant: str, year: int) -> list[str]:
    """The tenant's invoices for a year."""
    return [f"{tenant}-{year}-001", f"{tenant}-{year}-002"]


@tool
def purge_invoices(year: int) -> str:
    """Delete a year of invoices (admins only)."""
    return f"purged {year}"


def context(ctx: Any) -> TurnContext:
    # In production the tenant comes from your auth layer (for example the
    # access token of an HTTP transport); here it rides in the request's _meta.
    return TurnContext(tenant=(ctx.meta or {}).get("tenant", "guest"))


rails = Guardrails(
    [list_invoices, purge_invoices],
    [
        allow_list(
            by_tenant={"acme": ["list_invoices"], "admin": ["list_invoices", "purge_invoices"]}
        )
    ],
)
server = guarded_server(rails, "invoices", context=context)


async def demo() -> None:
    async with Client(server) as client:
        listed = await client.list_tools(meta={"tenant": "acme"})
        print("acme sees:", [t.name for t in listed.tools])
        for name, arguments in [
            ("list_invoices", {"year": 2025}),
            ("list_invoices", {"year": "last"}),
            ("purge_invoices", {"year": 2025}),
        ]:
            result = await client.call_tool(name, arguments, meta={"tenant": "acme"})
            print(f"{name}{arguments}: isError={result.is_error} {result.content[0].text}")  # type: ignore[union-attr]


async def serve_stdio() -> None:
    from mcp.server.stdio import stdio_server

    async with stdio_server() as (read, write):
        await server.run(read, write, server.create_initialization_options())


async def serve_http(address: str) -> None:
    import uvicorn

    host, _, port = address.rpartition(":")
    config = uvicorn.Config(server.streamable_http_app(host=host), host=host, port=int(port))
    await uvicorn.Server(config).serve()


if __name__ == "__main__":
    if "--http" in sys.argv:
        anyio.run(serve_http, sys.argv[sys.argv.index("--http") + 1])
    else:
        anyio.run(serve_stdio if "--stdio" in sys.argv else demo)
