"""Progress: a client's ``progressToken`` reaches the upstream, and the upstream's
``notifications/progress`` reach the client that made that call, no other."""

from __future__ import annotations

import tomllib
from pathlib import Path
from typing import Any

import anyio
import pytest
from mcp import Client

from guardrails.gateway import Gateway, parse_config

from .conftest import PY, SERVERS, command_toml, stdio_client, text, write_config

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
async def test_over_stdio_progress_reaches_the_caller(mode: str, tmp_path: Path) -> None:
    seen = Seen()
    params = stdio_client(write_config(tmp_path, UPSTREAM)).server
    async with Client(params, cache=None, mode=mode) as client:  # type: ignore[arg-type]
        answer = await client.call_tool("count", {"label": "s", "steps": 3}, progress_callback=seen)
    assert text(answer) == "s counted 3"
    assert seen.reports == _steps("s", 3)
