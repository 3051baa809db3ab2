"""The scenario's tools as an MCP server of their own (``MCPServer``, ``@app.tool()``).

Used in memory behind ``tools_from_server`` and, run as a script, as the
gateway's upstream: over stdio, or over streamable HTTP with ``--http``
(``tests/gateway/servers/_serve.py``). Each body records its run through
``record``; run as a script it appends its name to the file ``$BANK_RAN``.

Its text tools declare no output schema (``structured_output=False``): the
gateway passes an upstream's output schema and structured content on as they
are (``tests/gateway/test_protocol.py`` holds it to that with the SDK's default
``{"result": text}`` wrapping), so the table's text rows are plain text here.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Callable
from typing import Any

from mcp.server import MCPServer
from mcp.server.mcpserver import Image

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.dirname(__file__))))
from tests.conformance import scenario as sc


def server(record: Callable[[str], None]) -> MCPServer:
    app = MCPServer("bank")

    @app.tool(structured_output=False)
    def balance(account_id: str) -> str:
        """The customer's balance."""
        record("balance")
        return sc.balance_of(account_id)

    @app.tool(structured_output=False)
    def transfer(to: str, amount: float) -> str:
        """Move money from the customer's account to a payee."""
        record("transfer")
        return sc.transfer_of(to, amount)

    @app.tool()
    def search(query: str) -> dict[str, Any]:
        """Search the help centre."""
        record("search")
        return sc.hits_of(query)

    @app.tool(structured_output=False)
    def history() -> str:
        """Every card payment of the account."""
        record("history")
        return sc.history_text()

    @app.tool()
    def chart() -> Image:
        """The month's spending as a chart."""
        record("chart")
        return Image(data=sc.PNG, format="png")

    @app.tool(structured_output=False)
    def close_account() -> str:
        """Close the account (never offered to the tenant)."""
        record("close_account")
        return "closed"

    return app


def _to_file(name: str) -> None:
    with open(os.environ["BANK_RAN"], "a", encoding="utf-8") as ran:
        ran.write(name + "\n")


if __name__ == "__main__":
    from tests.gateway.servers._serve import serve

    serve(server(_to_file))
