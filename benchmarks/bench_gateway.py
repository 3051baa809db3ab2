"""The MCP gateway: latency added per ``tools/call``, and calls/s with 8 concurrent clients.

Every case is a real ``mcp`` client calling ``echo`` on ``_mcp_echo.py``, a
real MCP server in its own process. Groups:

- ``gateway.stdio``: the floor is a client of the server over stdio; the other
  case is a client of ``guardrails gateway --stdio`` in front of the same
  server over stdio (tool_call pipeline, SQLite audit row per call).
- ``gateway.http``: the floor is a client of the server over streamable HTTP;
  the other case is a client of ``guardrails gateway --http`` (bearer token,
  SQLite audit) in front of the same server over HTTP.
- ``gateway.concurrent``: calls per second in total with 8 clients calling at
  once, each on its own connection, directly and through the HTTP gateway.

Cases of a group are timed in interleaved rounds of ``CALLS`` calls each;
``median_us`` is the median over rounds of the time per call.

Run: ``python benchmarks/run.py --only gateway [--quick]``.
"""

from __future__ import annotations

import os
import re
import signal
import statistics
import sys
import tempfile
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import AsyncExitStack, asynccontextmanager
from pathlib import Path
from typing import Any

import anyio
from _harness import row
from mcp import Client, StdioServerParameters

from guardrails.gateway.upstream import _http

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
ECHO = [sys.executable, str(HERE / "_mcp_echo.py")]
GATEWAY = [sys.executable, "-m", "guardrails.cli", "gateway"]
TOKEN = "bench-token-0123456789"
CLIENTS = 8
CALLS = 20


@asynccontextmanager
async def _process(
    command: list[str], pattern: str, stderr: bool, pids: list[int] | None = None
) -> AsyncIterator[str]:
    """The process's first match of ``pattern`` on stderr or stdout; its pid into ``pids``."""
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    process = await anyio.open_process(command, env=env)
    if pids is not None:
        pids.append(process.pid)
    async with process, anyio.create_task_group() as tg:
        watched = process.stderr if stderr else process.stdout
        other = process.stdout if stderr else process.stderr
        tg.start_soon(_drain, other)
        seen = ""
        with anyio.fail_after(60):
            async for chunk in watched:  # type: ignore[union-attr]
                seen += chunk.decode(errors="replace")
                found = re.search(pattern, seen)
                if found:
                    break
        assert found, seen
        tg.start_soon(_drain, watched)
        try:
            yield found.group(1)
        finally:
            process.send_signal(signal.SIGTERM)
            with anyio.move_on_after(30):
                await process.wait()
            if process.returncode is None:
                process.kill()
            tg.cancel_scope.cancel()


async def _drain(stream: Any) -> None:
    try:
        async for _ in stream:
            pass
    except Exception:
        pass


def _config(directory: Path, upstream: str, tool: str = "", name: str = "gateway") -> Path:
    (directory / "tokens").write_text(f"bench {TOKEN}\n")
    path = directory / f"{name}.toml"
    path.write_text(
        f'[gateway]\nstore = "{name}.db"\nstdio_tenant = "bench"\n'
        f'[auth]\ntokens_file = "tokens"\n[upstreams.echo]\n{upstream}\n{tool}'
    )
    return path


# A budgeted echo: each call reserves and settles its cost against two caps
# (never reached) and writes a paid_call row.
BUDGET = "[upstreams.echo.tools.echo]\ncost = 0.001\ndaily_cap = 1e9\ninstance_cap = 1e9\n"


def _stdio(command: list[str]) -> Client:
    params = StdioServerParameters(
        command=command[0], args=command[1:], env={"PYTHONPATH": str(ROOT)}, cwd=str(ROOT)
    )
    return Client(params, cache=None)


def _http_client(url: str, token: str | None = None) -> Client:
    headers = {} if token is None else {"Authorization": f"Bearer {token}"}
    return Client(_http(url, headers), cache=None)


async def _call(client: Client) -> None:
    result = await client.call_tool("echo", {"text": "hello"})
    assert not result.is_error


async def _interleaved(clients: dict[str, Client], rounds: int) -> dict[str, list[float]]:
    """Per-call µs of each round, the cases' order rotating from round to round."""
    names = list(clients)
    samples: dict[str, list[float]] = {name: [] for name in names}
    for name in names:  # warm up
        for _ in range(3):
            await _call(clients[name])
    for r in range(rounds):
        for name in names[r % len(names) :] + names[: r % len(names)]:
            start = time.perf_counter_ns()
            for _ in range(CALLS):
                await _call(clients[name])
            samples[name].append((time.perf_counter_ns() - start) / CALLS / 1000)
    return samples


def _rows(group: str, samples: dict[str, list[float]], floor: str) -> list[dict[str, Any]]:
    floor_us = statistics.median(samples[floor])
    out = []
    for name, values in samples.items():
        median = statistics.median(values)
        out.append(
            row(
                group,
                name,
                median,
                ratio=round(median / floor_us, 2),
                added_us=round(median - floor_us, 1),
                best_us=round(min(values), 1),
                rounds=len(values),
                floor=floor,
            )
        )
    return out


async def _throughput(connect: Callable[[], Client], calls: int) -> tuple[float, float]:
    """(calls/s in total, median per-call µs) with ``CLIENTS`` clients calling at once."""
    latencies: list[float] = []
    async with AsyncExitStack() as stack:
        clients = [await stack.enter_async_context(connect()) for _ in range(CLIENTS)]
        for client in clients:
            await _call(client)

        async def work(client: Client) -> None:
            for _ in range(calls):
                start = time.perf_counter_ns()
                await _call(client)
                latencies.append((time.perf_counter_ns() - start) / 1000)

        start = time.perf_counter()
        async with anyio.create_task_group() as tg:
            for client in clients:
                tg.start_soon(work, client)
        elapsed = time.perf_counter() - start
    return CLIENTS * calls / elapsed, statistics.median(latencies)


async def _run(quick: bool) -> list[dict[str, Any]]:
    rounds = 5 if quick else 31
    calls = 10 if quick else 100
    rows: list[dict[str, Any]] = []
    with tempfile.TemporaryDirectory() as tmp:
        directory = Path(tmp)
        stdio_config = _config(directory, f"command = {_toml(ECHO)}")
        paid_config = _config(directory, f"command = {_toml(ECHO)}", BUDGET, "budgeted")
        async with (
            _stdio(ECHO) as direct,
            _stdio([*GATEWAY, "--config", str(stdio_config)]) as gw,
            _stdio([*GATEWAY, "--config", str(paid_config)]) as paid,
        ):
            cases = {"direct": direct, "through gateway": gw, "through gateway, budgeted": paid}
            samples = await _interleaved(cases, rounds)
        rows += _rows("gateway.stdio", samples, "direct")
        async with _process([*ECHO, "--http"], r"listening (\d+)", stderr=False) as port:
            upstream = f"http://127.0.0.1:{port}/mcp"
            http_config = _config(directory, f'url = "{upstream}"')
            command = [*GATEWAY, "--config", str(http_config), "--http", "127.0.0.1:0"]
            async with _process(command, r"listening on (http://\S+/mcp)", stderr=True) as url:
                async with _http_client(upstream) as direct, _http_client(url, TOKEN) as gw:
                    samples = await _interleaved({"direct": direct, "through gateway": gw}, rounds)
                rows += _rows("gateway.http", samples, "direct")
                for name, connect in (
                    ("direct", lambda: _http_client(upstream)),
                    ("through gateway", lambda: _http_client(url, TOKEN)),
                ):
                    per_s, median = await _throughput(connect, calls)
                    rows.append(
                        row(
                            "gateway.concurrent",
                            f"{name}, {CLIENTS} clients",
                            median,
                            ops_per_s=round(per_s, 1),
                            load=round(os.getloadavg()[0], 2),
                        )
                    )
    return rows


def _toml(command: list[str]) -> str:
    return "[" + ", ".join(f'"{part}"' for part in command) + "]"


def run(quick: bool = False) -> list[dict[str, Any]]:
    runner: Callable[[bool], Awaitable[list[dict[str, Any]]]] = _run
    return anyio.run(runner, quick)
