"""An upstream whose one tool's description is read from a file at start.

``lookup(word)`` answers ``found <word>``; its description is the file's text.
``stop`` ends the process mid-call (the gateway restarts it, and the new
process reads the file again): a definition changed between two starts.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

from mcp.server import MCPServer

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(__file__)))))
from tests.gateway.servers._serve import serve

DESCRIPTION = Path(sys.argv[1]).read_text()
app = MCPServer("described")


@app.tool()
def stop() -> str:
    """End this process (the gateway restarts it)."""
    os._exit(3)


@app.tool(description=DESCRIPTION)
def lookup(word: str) -> str:
    return f"found {word}"


if __name__ == "__main__":
    serve(app)
