"""A deliberately misbehaving MCP server over stdio, written without the SDK.

It speaks just enough JSON-RPC to be listed, then, per tool: ``ok`` answers
its process id; ``crash`` exits mid-call; ``hang`` never answers; ``slow``
answers after ``seconds``; ``garbage`` writes a line that is not JSON and a
result that is not a tool result; ``leak`` answers an error whose text holds a
credential; ``image`` answers an image block. It also lists a tool whose
schema does not compile and one whose name cannot be published. With ``--hang-all`` a hang stops it answering anything at all.
"""

from __future__ import annotations

import hashlib
import json
import os
import sys
import threading

LOCK = threading.Lock()
HUNG = threading.Event()


def send(message: dict[str, object]) -> None:
    with LOCK:
        sys.stdout.write(json.dumps(message) + "\n")
        sys.stdout.flush()


def tool(name: str, properties: dict[str, object] | None = None) -> dict[str, object]:
    schema = {"type": "object", "properties": properties or {}}
    return {"name": name, "description": f"misbehaves: {name}", "inputSchema": schema}


TOOLS = [
    tool("ok"),
    tool("crash"),
    tool("hang"),
    tool("slow", {"seconds": {"type": "number"}}),
    tool("garbage"),
    tool("leak"),
    tool("image"),
    tool("key_digest"),
    {"name": "broken_schema", "inputSchema": {"type": "object", "properties": {"x": {"type": 12}}}},
    tool("bad name!"),
]


def text(value: str, error: bool = False) -> dict[str, object]:
    return {"content": [{"type": "text", "text": value}], "isError": error}


def call(rid: object, params: dict[str, object]) -> None:
    name = params.get("name")
    arguments = params.get("arguments") or {}
    assert isinstance(arguments, dict)
    if name == "ok":
        send({"jsonrpc": "2.0", "id": rid, "result": text(str(os.getpid()))})
    elif name == "crash":
        os._exit(3)
    elif name == "hang":
        HUNG.set()
    elif name == "slow":
        marker = os.environ.get("MISBEHAVING_MARKER")
        if marker:  # tells a test that the call reached the server
            with open(marker, "a") as out:
                out.write("slow\n")
        seconds = float(arguments.get("seconds", 1))
        reply = {"jsonrpc": "2.0", "id": rid, "result": text("slow done")}
        threading.Timer(seconds, send, (reply,)).start()
    elif name == "garbage":
        with LOCK:
            sys.stdout.write("}}} this is not JSON {{{\n")
            sys.stdout.flush()
        send({"jsonrpc": "2.0", "id": rid, "result": {"content": "not a list", "isError": 7}})
    elif name == "key_digest":  # proves the server received its key, without showing it
        key = os.environ.get("UPSTREAM_KEY", "").encode()
        send({"jsonrpc": "2.0", "id": rid, "result": text(hashlib.sha256(key).hexdigest())})
    elif name == "image":
        image = {"type": "image", "data": "aGVsbG8=", "mimeType": "image/png"}
        send({"jsonrpc": "2.0", "id": rid, "result": {"content": [image], "isError": False}})
    elif name == "leak":
        send({"jsonrpc": "2.0", "id": rid, "result": text("password=hunter2 at db", True)})
    else:
        send({"jsonrpc": "2.0", "id": rid, "error": {"code": -32602, "message": "no such tool"}})


def main() -> None:
    hang_all = "--hang-all" in sys.argv
    for line in sys.stdin:
        message = json.loads(line)
        rid, method = message.get("id"), message.get("method")
        if rid is None or (hang_all and HUNG.is_set()):
            continue  # a notification, or a server that hangs
        if method == "initialize":
            version = message["params"]["protocolVersion"]
            result = {
                "protocolVersion": version,
                "capabilities": {"tools": {}},
                "serverInfo": {"name": "misbehaving", "version": "0"},
            }
            send({"jsonrpc": "2.0", "id": rid, "result": result})
        elif method == "tools/list":
            send({"jsonrpc": "2.0", "id": rid, "result": {"tools": TOOLS}})
        elif method == "ping":
            send({"jsonrpc": "2.0", "id": rid, "result": {}})
        elif method == "tools/call":
            call(rid, message.get("params") or {})
        else:
            send({"jsonrpc": "2.0", "id": rid, "error": {"code": -32601, "message": "not found"}})


if __name__ == "__main__":
    main()
