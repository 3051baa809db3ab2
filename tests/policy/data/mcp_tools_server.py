"""A tiny MCP server over stdio for the ``mcp:`` tool source (``--hang`` never answers)."""

import sys
import time

if "--hang" in sys.argv:
    time.sleep(600)

from mcp.server import MCPServer
from mcp.types import ToolAnnotations

app = MCPServer("policy-tools")


@app.tool()
def send_mail(to: str, subject: str, body: str) -> str:
    """Send an email."""
    return "sent"


@app.tool(annotations=ToolAnnotations(readOnlyHint=True))
def list_contacts(query: str = "") -> list[str]:
    """List the user's contacts."""
    return []


if __name__ == "__main__":
    app.run("stdio")
