"""Run an ``MCPServer`` over stdio, or over streamable HTTP on a free port it announces."""

from __future__ import annotations

import socket
import sys
from typing import Any

import anyio


def serve(app: Any) -> None:
    """``--http`` binds 127.0.0.1:0 and prints ``listening <port>`` once the socket is open."""
    if "--http" not in sys.argv:
        app.run("stdio")
        return
    import uvicorn

    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM, socket.IPPROTO_TCP)  # TCP_NODELAY
    sock.bind(("127.0.0.1", 0))
    sock.listen(64)
    port = sock.getsockname()[1]
    starlette = app.streamable_http_app()
    server = uvicorn.Server(uvicorn.Config(starlette, log_level="warning", lifespan="on"))
    print(f"listening {port}", flush=True)
    anyio.run(lambda: server.serve(sockets=[sock]))
