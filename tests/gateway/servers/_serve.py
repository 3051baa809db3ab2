"""Run an ``MCPServer`` over stdio, or over streamable HTTP on a free port it announces."""

from __future__ import annotations

import socket
import sys
from typing import Any

import anyio


def serve(app: Any) -> None:
    """``--http [PORT]`` binds 127.0.0.1:PORT (default 0: a free port) and prints
    ``listening <port>`` once the socket is open."""
    if "--http" not in sys.argv:
        app.run("stdio")
        return
    import uvicorn

    after = sys.argv[sys.argv.index("--http") + 1 :]
    wanted = int(after[0]) if after and after[0].isdigit() else 0
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM, socket.IPPROTO_TCP)  # TCP_NODELAY
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", wanted))
    sock.listen(64)
    port = sock.getsockname()[1]
    starlette = app.streamable_http_app()
    server = uvicorn.Server(uvicorn.Config(starlette, log_level="warning", lifespan="on"))
    print(f"listening {port}", flush=True)
    anyio.run(lambda: server.serve(sockets=[sock]))
