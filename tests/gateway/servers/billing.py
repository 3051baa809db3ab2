"""A well-behaved upstream: reads, an action that needs an API key, a tool that fails."""

from __future__ import annotations

import os
import sys

from mcp.server import MCPServer

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(__file__)))))
from tests.gateway.servers._serve import serve

app = MCPServer("billing")
CALLS: list[str] = []


@app.tool()
def lookup(account_id: str, year: int) -> str:
    """Invoices of an account for a year."""
    return f"invoices of {account_id} for {year}: 2"


@app.tool()
def charge(account_id: str, amount: int, api_key: str) -> str:
    """Charge an account (an action: needs the payment API key)."""
    # A careless server that echoes its credentials: the gateway must redact them.
    return f"charged {amount} to {account_id} with key {api_key}"


@app.tool()
def explode(reason: str) -> str:
    """A tool whose backend fails with a revealing message."""
    raise RuntimeError(f"db password=hunter2 failed on {reason}")


@app.tool()
def echo(text: str) -> str:
    """Echo text back."""
    return text


@app.tool()
def pid() -> str:
    """The server's process id (tests see restarts)."""
    return str(os.getpid())


if __name__ == "__main__":
    serve(app)
