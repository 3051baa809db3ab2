"""An upstream whose transfers are written to a file ($LEDGER): tests count what really ran."""

from __future__ import annotations

import json
import os
import sys

from mcp.server import MCPServer

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(__file__)))))
from tests.gateway.servers._serve import serve

app = MCPServer("ledger")


@app.tool()
def transfer(amount: int, to: str) -> str:
    """Send money (each call that runs is one line of the ledger)."""
    with open(os.environ["LEDGER"], "a", encoding="utf-8") as ledger:
        ledger.write(json.dumps({"amount": amount, "to": to}, sort_keys=True) + "\n")
    return f"sent {amount} to {to}"


@app.tool()
def balance(account: str) -> str:
    """An account's balance."""
    return f"{account}: 100"


if __name__ == "__main__":
    serve(app)
