"""The upstream every gateway benchmark calls: one ``echo`` tool, over stdio or HTTP.

``--http`` binds 127.0.0.1:0 and prints ``listening <port>`` once it listens.
"""

from __future__ import annotations

import os
import socket
import sys

import anyio
from mcp.server import MCPServer

app = MCPServer("echo")


@app.tool()
def echo(text: str) -> str:
    """Echo text back."""
    return text


def main() -> None:
    if "--http" not in sys.argv:
        app.run("stdio")
        return
    import uvicorn

    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM, socket.IPPROTO_TCP)  # TCP_NODELAY
    sock.bind(("127.0.0.1", 0))
    sock.listen(128)
    server = uvicorn.Server(
        uvicorn.Config(
            app.streamable_http_app(json_response=os.environ.get("ECHO_JSON") == "1"),
            log_level="warning",
        )
    )
    print(f"listening {sock.getsockname()[1]}", flush=True)
    anyio.run(lambda: server.serve(sockets=[sock]))


if __name__ == "__main__":
    main()
