"""What choosing JSON or an event stream per request costs a call that asks for no progress.

``progress_http.stream_progress`` puts a step in front of the SDK's request
handler: every 2026-07-28 POST that accepts ``text/event-stream`` (what the
``mcp`` client sends) has its headers read and its body searched for
``"progressToken"``. This times that step alone, in interleaved rounds, on a
``tools/call`` of about 1 KB: the handler behind it only reads the body.

Run: ``python benchmarks/run.py --only progress_route`` (or this file).
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from types import SimpleNamespace
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _harness import compare

from guardrails.gateway.progress_http import stream_progress

GROUP = "gateway.progress_route"
FLOOR = "the SDK's handler alone"

_BODY = json.dumps(
    {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "tools/call",
        "params": {"name": "echo", "arguments": {"text": "x" * 900}},
    }
).encode()
_SCOPE = {
    "type": "http",
    "method": "POST",
    "headers": [
        (b"host", b"127.0.0.1"),
        (b"authorization", b"Bearer tok"),
        (b"content-type", b"application/json"),
        (b"accept", b"application/json, text/event-stream"),
        (b"mcp-protocol-version", b"2026-07-28"),
        (b"mcp-method", b"tools/call"),
        (b"mcp-name", b"echo"),
    ],
}
_MESSAGE = {"type": "http.request", "body": _BODY, "more_body": False}


async def _handler(scope: Any, receive: Any, send: Any) -> None:
    await receive()


async def _receive() -> dict[str, Any]:
    return _MESSAGE


async def _send(message: Any) -> None:
    return None


def run(quick: bool = False) -> list[dict[str, Any]]:
    limit = SimpleNamespace(app=_handler)
    manager = SimpleNamespace(asgi_app=limit, _lifespan_state=None)
    assert stream_progress(SimpleNamespace(session_manager=manager))
    routed = limit.app

    async def alone() -> None:
        await _handler(_SCOPE, _receive, _send)

    async def through() -> None:
        await routed(_SCOPE, _receive, _send)

    cases = {FLOOR: alone, "through the progress routing": through}
    return compare(GROUP, cases, floor=FLOOR, quick=quick)


if __name__ == "__main__":
    for found in run():
        print(f"{found['name']}: {found['median_us']:.2f} us (added {found['added_us']:.2f} us)")
