"""An HTTP upstream that answers with the Authorization header of each request it gets.

``seen()`` returns that header (``none`` when absent): what the gateway sends
this upstream, so a test can see that a client's token never travels on.
"""

from __future__ import annotations

import os
import sys

from mcp.server import MCPServer
from mcp.server.mcpserver import Context

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(__file__)))))
from tests.gateway.servers._serve import serve

app = MCPServer("headers")


@app.tool()
def seen(ctx: Context) -> str:
    """The Authorization header this request came with."""
    request = ctx.request_context.request
    headers = getattr(request, "headers", None) or {}
    return f"authorization: {headers.get('authorization', 'none')}"


if __name__ == "__main__":
    serve(app)
