"""A scripted Anthropic Messages API on 127.0.0.1, for tests and examples without network.

Point the real ``anthropic`` client at it (``base_url=api.base_url``); each
``POST /v1/messages`` gets the next scripted message, and every request body is
kept for assertions::

    with ScriptedMessagesAPI([tool_use_message(...), text_message("done")]) as api:
        client = anthropic.Anthropic(api_key="test", base_url=api.base_url)
        ...
        api.requests[0]["tools"]

A request with ``"stream": true`` (the Claude Code CLI sends them) is answered
with the same message as server-sent events.
"""

from __future__ import annotations

import itertools
import json
import threading
from collections.abc import Callable, Iterable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

__all__ = ["ScriptedMessagesAPI", "text_message", "tool_use_message"]

Scripted = dict[str, Any] | Callable[[dict[str, Any]], dict[str, Any]]

_IDS = itertools.count(1)


def _message(content: list[dict[str, Any]], stop_reason: str) -> dict[str, Any]:
    return {
        "id": f"msg_scripted_{next(_IDS)}",
        "type": "message",
        "role": "assistant",
        "model": "scripted",
        "content": content,
        "stop_reason": stop_reason,
        "stop_sequence": None,
        "usage": {"input_tokens": 0, "output_tokens": 0},
    }


def text_message(text: str) -> dict[str, Any]:
    """A final assistant message."""
    return _message([{"type": "text", "text": text}], "end_turn")


def tool_use_message(*calls: tuple[str, dict[str, Any]], text: str = "") -> dict[str, Any]:
    """An assistant message asking for tool calls, each ``(name, input)``."""
    content: list[dict[str, Any]] = [{"type": "text", "text": text}] if text else []
    for name, arguments in calls:
        content.append(
            {"type": "tool_use", "id": f"toolu_{next(_IDS):06d}", "name": name, "input": arguments}
        )
    return _message(content, "tool_use")


def _events(message: dict[str, Any]) -> bytes:
    """``message`` as the Messages API streams it."""
    events: list[tuple[str, dict[str, Any]]] = [
        ("message_start", {"message": {**message, "content": [], "stop_reason": None}})
    ]
    for index, block in enumerate(message["content"]):
        if block["type"] == "tool_use":
            start = {**block, "input": {}}
            delta = {"type": "input_json_delta", "partial_json": json.dumps(block["input"])}
        else:
            start = {**block, "text": ""}
            delta = {"type": "text_delta", "text": block.get("text", "")}
        events += [
            ("content_block_start", {"index": index, "content_block": start}),
            ("content_block_delta", {"index": index, "delta": delta}),
            ("content_block_stop", {"index": index}),
        ]
    stop = {"stop_reason": message["stop_reason"], "stop_sequence": None}
    events += [
        ("message_delta", {"delta": stop, "usage": {"output_tokens": 0}}),
        ("message_stop", {}),
    ]
    return b"".join(
        f"event: {kind}\ndata: {json.dumps({'type': kind, **data})}\n\n".encode()
        for kind, data in events
    )


class ScriptedMessagesAPI:
    """Serves scripted messages, in order, on an ephemeral port. A context manager."""

    def __init__(self, script: Iterable[Scripted]) -> None:
        self.script = list(script)
        self.requests: list[dict[str, Any]] = []
        self._lock = threading.Lock()
        self._server: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None

    @property
    def base_url(self) -> str:
        if self._server is None:
            raise RuntimeError("the scripted API is not running; use it as a context manager")
        host, port = self._server.server_address[:2]
        return f"http://{host!s}:{port}"

    def _next(self, body: dict[str, Any]) -> tuple[int, dict[str, Any]]:
        with self._lock:
            self.requests.append(body)
            index = len(self.requests) - 1
        if index >= len(self.script):
            error = {"type": "invalid_request_error", "message": "the script has ended"}
            return 400, {"type": "error", "error": error}
        step = self.script[index]
        return 200, step(body) if callable(step) else step

    def __enter__(self) -> ScriptedMessagesAPI:
        api = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                length = int(self.headers.get("content-length") or 0)
                body = json.loads(self.rfile.read(length) or b"{}")
                if self.path.split("?")[0] != "/v1/messages":
                    # Token counting and the like: not a model turn.
                    self._send(200, "application/json", b'{"input_tokens": 0}')
                    return
                status, reply = api._next(body)
                if status == 200 and body.get("stream"):
                    self._send(status, "text/event-stream", _events(reply))
                else:
                    self._send(status, "application/json", json.dumps(reply).encode())

            def _send(self, status: int, kind: str, data: bytes) -> None:
                self.send_response(status)
                self.send_header("content-type", kind)
                self.send_header("content-length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def log_message(self, format: str, *args: Any) -> None:
                pass

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._server.daemon_threads = True
        # A short poll: ``shutdown`` waits for the serving loop to look again.
        self._thread = threading.Thread(
            target=self._server.serve_forever, kwargs={"poll_interval": 0.01}, daemon=True
        )
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
        if self._thread is not None:
            self._thread.join()
        self._server = self._thread = None
