"""An upstream whose tool list depends on its generation, read from a file at start.

Generation 1 lists ``alpha(text: str)``, ``beta(text: str)``; generation 2
lists ``alpha(count: int)`` (a changed schema) and ``gamma(text: str)`` (beta
is gone). Both list ``stop``, which ends the process mid-call (the gateway
restarts it, and the new process reads the file again).
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

from mcp.server import MCPServer

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(__file__)))))
from tests.gateway.servers._serve import serve

GENERATION = Path(sys.argv[1]).read_text().strip()
app = MCPServer("changing")


@app.tool()
def stop() -> str:
    """End this process (the gateway restarts it)."""
    os._exit(3)


if GENERATION == "1":

    @app.tool()
    def alpha(text: str) -> str:
        """Alpha, first generation."""
        return f"alpha 1 {text}"

    @app.tool()
    def beta(text: str) -> str:
        """Beta, first generation only."""
        return f"beta 1 {text}"

else:

    @app.tool()
    def alpha(count: int) -> str:
        """Alpha, second generation: its parameter changed."""
        return f"alpha 2 {count}"

    @app.tool()
    def gamma(text: str) -> str:
        """Gamma, second generation only."""
        return f"gamma 2 {text}"


if __name__ == "__main__":
    serve(app)
