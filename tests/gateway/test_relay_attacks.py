"""An upstream that says too much during a call or in its prompts and resources, and a
client that leaves mid-call: the upstream's key never reaches a client, its messages
are bounded, and the other clients' calls go on."""

from __future__ import annotations

import tomllib
from pathlib import Path
from typing import Any

import anyio
import pytest
from mcp import Client

from guardrails.gateway import Gateway, parse_config
from guardrails.gateway.relay import MAX_MESSAGE

from .conftest import PY, SECRET, SERVERS, command_toml, text

NOISY = [PY, str(SERVERS / "noisy.py")]
ERROR = (
    "The tool failed while running. No details are available; do not retry with the same arguments."
)
CONFIG = f"""
[gateway]
store = "audit.db"
max_result_chars = 2000

[upstreams.noisy]
command = {command_toml(NOISY)}
env = {{ NOISY_KEY = "${{PAY_KEY}}", NOISY_MARK = "MARK" }}
prompts = ["told"]
resources = ["file:///told.txt"]
"""


def _gateway(tmp_path: Path, timeout: float = 30) -> Gateway:
    body = CONFIG.replace('"MARK"', f'"{tmp_path / "hanging"}"') + f"timeout = {timeout}\n"
    config = parse_config(tomllib.loads(body), base=tmp_path)
    return Gateway(config, secrets={"PAY_KEY": SECRET}.get)


class Seen:
    def __init__(self, first: anyio.Event | None = None) -> None:
        self.reports: list[tuple[float, float | None, str | None]] = []
        self.first = first

    async def __call__(self, progress: float, total: float | None, message: str | None) -> None:
        self.reports.append((progress, total, message))
        if self.first is not None:
            self.first.set()


@pytest.mark.slow
async def test_progress_messages_lose_the_upstream_key_and_are_bounded(tmp_path: Path) -> None:
    seen = Seen()
    gateway = _gateway(tmp_path)
    async with gateway.running(), Client(gateway.server(), cache=None) as client:
        answer = await client.call_tool("leak_progress", {}, progress_callback=seen)
    assert text(answer) == "reported"
    assert [m for _, _, m in seen.reports] == [
        "using key [redacted]",
        "x" * (MAX_MESSAGE - 1) + "\u2026",
        "done",
    ]
    assert SECRET not in repr(seen.reports)


@pytest.mark.slow
async def test_a_flood_of_progress_reaches_its_caller_only_and_others_go_on(
    tmp_path: Path,
) -> None:
    flooded, quiet = Seen(), Seen()
    answers: dict[str, Any] = {}
    gateway = _gateway(tmp_path)
    async with (
        gateway.running(),
        Client(gateway.server(), cache=None) as one,
        Client(gateway.server(), cache=None) as two,
    ):

        async def flood() -> None:
            answers["flood"] = await one.call_tool(
                "flood", {"times": 2000}, progress_callback=flooded
            )

        async def echo() -> None:
            answers["echo"] = [
                text(await two.call_tool("echo", {"text": f"e{i}"}, progress_callback=quiet))
                for i in range(20)
            ]

        async with anyio.create_task_group() as tg:
            tg.start_soon(flood)
            tg.start_soon(echo)
    assert text(answers["flood"]) == "flooded 2000"
    assert answers["echo"] == [f"e{i}" for i in range(20)]
    assert quiet.reports == []
    steps = [p for p, _, _ in flooded.reports]
    assert 0 < len(steps) <= 2000 and all(m == f"step {int(p)}" for p, _, m in flooded.reports)


@pytest.mark.slow
async def test_a_call_that_never_answers_holds_no_other_call(tmp_path: Path) -> None:
    marker = tmp_path / "hanging"
    gateway = _gateway(tmp_path, timeout=10)
    answers: dict[str, Any] = {}
    async with (
        gateway.running(),
        Client(gateway.server(), cache=None) as waiting,
        Client(gateway.server(), cache=None) as other,
    ):

        async def hang() -> None:
            answers["hang"] = await waiting.call_tool("hang", {}, progress_callback=Seen())

        async with anyio.create_task_group() as tg:
            tg.start_soon(hang)
            with anyio.fail_after(60):  # a bound, not a pace: the upstream says when
                while not marker.exists():
                    await anyio.sleep(0.01)
            answers["echo"] = text(await other.call_tool("echo", {"text": "still here"}))
            answers["flood"] = text(await other.call_tool("flood", {"times": 3}))
            answers["hung yet"] = "hang" in answers
    assert (answers["echo"], answers["flood"]) == ("still here", "flooded 3")
    assert answers["hung yet"] is False  # they ran while it hung
    assert text(answers["hang"]) == ERROR and answers["hang"].is_error


@pytest.mark.slow
async def test_prompts_and_resources_lose_the_upstream_key_everywhere(tmp_path: Path) -> None:
    gateway = _gateway(tmp_path)
    async with gateway.running(), Client(gateway.server(), cache=None) as client:
        prompts = await client.list_prompts()
        prompt = await client.get_prompt("noisy__told", {})
        resources = await client.list_resources()
    assert [p.name for p in prompts.prompts] == ["noisy__told"]
    assert prompts.prompts[0].description == "a prompt described with the key [redacted]"
    assert prompt.messages[0].content.resource.text == "the key is [redacted]"  # type: ignore[union-attr]
    assert [r.description for r in resources.resources] == [
        "a resource described with the key [redacted]"
    ]
    for answer in (prompts, prompt, resources):
        assert SECRET not in answer.model_dump_json()
