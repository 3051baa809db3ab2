"""Progress: a client's ``progressToken`` reaches the upstream, and the upstream's
``notifications/progress`` reach the client that made that call, no other."""

from __future__ import annotations

import json
import tomllib
from pathlib import Path
from typing import Any

import anyio
import pytest
from mcp import Client

from guardrails.gateway import Gateway, parse_config

from .conftest import (
    PY,
    SERVERS,
    TOKENS,
    command_toml,
    http_client,
    http_gateway,
    stdio_client,
    text,
    write_config,
)

RICH = [PY, str(SERVERS / "rich.py")]
UPSTREAM = f"""
[upstreams.rich]
command = {command_toml(RICH)}
"""


class Seen:
    def __init__(self) -> None:
        self.reports: list[tuple[float, float | None, str | None]] = []

    async def __call__(self, progress: float, total: float | None, message: str | None) -> None:
        self.reports.append((progress, total, message))


def _steps(label: str, steps: int) -> list[tuple[float, float | None, str | None]]:
    return [(float(i), float(steps), f"{label} {i}") for i in range(1, steps + 1)]


@pytest.mark.slow
async def test_in_process_progress_reaches_only_the_caller(tmp_path: Path) -> None:
    config = parse_config(tomllib.loads(UPSTREAM), base=tmp_path)
    gateway = Gateway(config)
    first, second = Seen(), Seen()
    async with (
        gateway.running(),
        Client(gateway.server(), cache=None) as one,
        Client(gateway.server(), cache=None) as two,
        Client(gateway.server(), cache=None) as quiet,
    ):
        answers: dict[str, Any] = {}

        async def call(name: str, client: Client, seen: Seen | None) -> None:
            arguments = {"label": name, "steps": 5}
            answers[name] = await client.call_tool("count", arguments, progress_callback=seen)

        async with anyio.create_task_group() as tg:
            tg.start_soon(call, "one", one, first)
            tg.start_soon(call, "two", two, second)
            tg.start_soon(call, "quiet", quiet, None)
    assert first.reports == _steps("one", 5) and second.reports == _steps("two", 5)
    assert text(answers["quiet"]) == "quiet counted 5"


@pytest.mark.parametrize("mode", ["auto", "legacy"])
@pytest.mark.slow
async def test_over_stdio_progress_reaches_the_caller(mode: str, tmp_path: Path) -> None:
    seen = Seen()
    params = stdio_client(write_config(tmp_path, UPSTREAM)).server
    async with Client(params, cache=None, mode=mode) as client:  # type: ignore[arg-type]
        answer = await client.call_tool("count", {"label": "s", "steps": 3}, progress_callback=seen)
    assert text(answer) == "s counted 3"
    assert seen.reports == _steps("s", 3)


@pytest.mark.slow
async def test_over_http_progress_reaches_the_caller_as_a_stream_and_only_it(
    tmp_path: Path,
) -> None:
    seen, other = Seen(), Seen()
    path = write_config(tmp_path, UPSTREAM)
    answers: dict[str, Any] = {}
    async with (
        http_gateway(path) as (url, _),
        http_client(url, TOKENS["acme"], "s-1") as one,
        http_client(url, TOKENS["globex"], "s-2") as two,
        http_client(url, TOKENS["acme"], "s-3") as quiet,
    ):

        async def call(name: str, client: Client, sink: Seen | None) -> None:
            arguments = {"label": name, "steps": 4}
            answers[name] = await client.call_tool("count", arguments, progress_callback=sink)

        async with anyio.create_task_group() as tg:
            tg.start_soon(call, "one", one, seen)
            tg.start_soon(call, "two", two, other)
            tg.start_soon(call, "quiet", quiet, None)
    assert {name: text(answer) for name, answer in answers.items()} == {
        "one": "one counted 4",
        "two": "two counted 4",
        "quiet": "quiet counted 4",
    }
    assert seen.reports == _steps("one", 4) and other.reports == _steps("two", 4)


async def raw_call(url: str, progress: bool, accept: str) -> tuple[str, str]:
    """A 2026-07-28 ``tools/call`` of ``count`` posted as is: its content type and body."""
    import httpx
    from mcp_types import (
        CLIENT_CAPABILITIES_META_KEY,
        CLIENT_INFO_META_KEY,
        PROTOCOL_VERSION_META_KEY,
    )
    from mcp_types.version import LATEST_MODERN_VERSION

    meta: dict[str, Any] = {
        PROTOCOL_VERSION_META_KEY: LATEST_MODERN_VERSION,
        CLIENT_INFO_META_KEY: {"name": "raw", "version": "1"},
        CLIENT_CAPABILITIES_META_KEY: {},
    }
    if progress:
        meta["progressToken"] = "p-1"
    params = {"name": "count", "arguments": {"label": "r", "steps": 2}, "_meta": meta}
    headers = {
        "Authorization": f"Bearer {TOKENS['acme']}",
        "Accept": accept,
        "MCP-Protocol-Version": LATEST_MODERN_VERSION,
        "Mcp-Method": "tools/call",
        "Mcp-Name": "count",
    }
    body = {"jsonrpc": "2.0", "id": 7, "method": "tools/call", "params": params}
    async with httpx.AsyncClient(timeout=60) as client:
        response = await client.post(url, json=body, headers=headers)
    assert response.status_code == 200, response.text
    return response.headers["content-type"].split(";")[0], response.text


@pytest.mark.slow
async def test_over_http_only_a_call_that_asks_for_progress_and_accepts_a_stream_gets_one(
    tmp_path: Path,
) -> None:
    path = write_config(tmp_path, UPSTREAM)
    async with http_gateway(path) as (url, _):
        streamed = await raw_call(url, True, "application/json, text/event-stream")
        plain = await raw_call(url, False, "application/json, text/event-stream")
        json_only = await raw_call(url, True, "application/json")
    kind, events = streamed
    assert kind == "text/event-stream"
    assert events.count('"notifications/progress"') == 2 and '"r counted 2"' in events
    assert plain[0] == json_only[0] == "application/json"
    for _, answer in (plain, json_only):
        assert json.loads(answer)["result"]["content"][0]["text"] == "r counted 2"
