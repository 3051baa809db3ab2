"""Real processes: upstream servers, the gateway over stdio or HTTP, real ``mcp`` clients.

Readiness is read from what each process announces once its socket listens
(``listening <port>``, ``guardrails gateway: listening on <url>``): no sleeps.
"""

from __future__ import annotations

import os
import re
import signal
import sys
from collections.abc import AsyncIterator, Iterator, Mapping
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import anyio
import pytest
from anyio.abc import Process
from mcp import Client, StdioServerParameters

from guardrails.gateway.upstream import _http

PY = sys.executable
SERVERS = Path(__file__).parent / "servers"
ROOT = Path(__file__).parents[2]
BILLING = [PY, str(SERVERS / "billing.py")]
MISBEHAVING = [PY, str(SERVERS / "misbehaving.py")]
SECRET = "sk-live-9f8e7d6c5b4a"
TOKENS = {"acme": "tok-acme-0123456789", "globex": "tok-globex-9876543210", "nobody": "tok-x-5"}
GATEWAY_ENV = {"GW_PAY_KEY": SECRET, "GW_TOKENS": "", "PYTHONPATH": str(ROOT)}
STARTUP = 60.0


def command_toml(command: list[str]) -> str:
    return "[" + ", ".join(f'"{part}"' for part in command) + "]"


def write_config(tmp_path: Path, body: str, *, store: str | None = None, gateway: str = "") -> Path:
    """A gateway TOML file: ``[gateway]`` (the store, ``gateway`` lines), ``body``, auth, secrets.

    Over stdio the tenant is ``acme``.
    """
    tokens = tmp_path / "tokens.txt"
    tokens.write_text("".join(f"{tenant} {token}\n" for tenant, token in TOKENS.items()))
    path = tmp_path / "gateway.toml"
    path.write_text(
        f'[gateway]\nstore = "{store or "audit.db"}"\nstdio_tenant = "acme"\n'
        + gateway
        + "\n"
        + body
        + '\n[auth]\ntokens_file = "tokens.txt"\n'
        + '\n[secrets]\nprovider = "env"\nprefix = "GW_"\n'
    )
    return path


async def _drain(stream: Any, sink: list[str] | None = None) -> None:
    try:
        async for chunk in stream:
            if sink is not None:
                sink.append(chunk.decode(errors="replace"))
    except (anyio.EndOfStream, anyio.ClosedResourceError, anyio.BrokenResourceError):
        pass


async def _announced(
    process: Process, stream: Any, pattern: str, tg: Any, sink: list[str] | None = None
) -> str:
    """The first match of ``pattern`` in what the process writes; the rest is drained
    (into ``sink``, with what came before, when one is given)."""
    buffered = ""
    with anyio.fail_after(STARTUP):
        async for chunk in stream:
            buffered += chunk.decode(errors="replace")
            found = re.search(pattern, buffered)
            if found:
                if sink is not None:
                    sink.append(buffered)
                tg.start_soon(_drain, stream, sink)
                return found.group(1)
    raise AssertionError(f"process exited ({process.returncode}) before announcing: {buffered}")


async def _stop(process: Process) -> int:
    if process.returncode is None:
        process.send_signal(signal.SIGTERM)
    with anyio.move_on_after(30):
        return await process.wait()
    process.kill()
    return await process.wait()


@asynccontextmanager
async def started(
    command: list[str],
    pattern: str,
    *,
    stderr: bool,
    env: Mapping[str, str] | None = None,
    log: list[str] | None = None,
    cwd: Path | None = None,
) -> AsyncIterator[tuple[str, Process]]:
    """Starts ``command`` (in ``cwd``); yields what it announced and the process; SIGTERMs
    it at the end."""
    full_env = {**os.environ, **(env or {})}
    process = await anyio.open_process(command, env=full_env, stdin=None, cwd=cwd)
    async with process, anyio.create_task_group() as tg:
        try:
            watched = process.stderr if stderr else process.stdout
            other = process.stdout if stderr else process.stderr
            tg.start_soon(_drain, other)
            announced = await _announced(process, watched, pattern, tg, log)
            yield announced, process
        finally:
            await _stop(process)
            tg.cancel_scope.cancel()


@asynccontextmanager
async def billing_over_http() -> AsyncIterator[str]:
    """The billing upstream over streamable HTTP: its URL."""
    async with started([*BILLING, "--http"], r"listening (\d+)", stderr=False) as (port, _):
        yield f"http://127.0.0.1:{port}/mcp"


@asynccontextmanager
async def http_gateway(
    config: Path,
    env: Mapping[str, str] | None = None,
    *,
    log: list[str] | None = None,
    host: str = "127.0.0.1",
) -> AsyncIterator[tuple[str, Process]]:
    """A gateway over HTTP on a free port; what it writes on stderr goes to ``log``."""
    command = [PY, "-m", "guardrails.cli", "gateway", "--config", str(config)]
    async with started(
        [*command, "--http", f"{host}:0"],
        r"listening on (http://\S+/mcp)",
        stderr=True,
        env={**GATEWAY_ENV, **(env or {})},
        log=log,
    ) as found:
        yield found


def http_client(url: str, token: str | None, session: str | None = None) -> Client:
    headers = {} if token is None else {"Authorization": f"Bearer {token}"}
    if session is not None:
        headers["Guardrails-Session"] = session
    return Client(_http(url, headers), cache=None)


def stdio_client(config: Path, env: Mapping[str, str] | None = None) -> Client:
    params = StdioServerParameters(
        command=PY,
        args=["-m", "guardrails.cli", "gateway", "--config", str(config), "--stdio"],
        env={**GATEWAY_ENV, **(env or {})},
        cwd=str(ROOT),
    )
    return Client(params, cache=None)


@asynccontextmanager
async def gateway_client(
    transport: str, config: Path, tenant: str = "acme", session: str | None = None
) -> AsyncIterator[Client]:
    """A connected client of a gateway over ``transport`` ('stdio' or 'http')."""
    if transport == "stdio":
        async with stdio_client(config) as client:
            yield client
        return
    async with http_gateway(config) as (url, _), http_client(url, TOKENS[tenant], session) as c:
        yield c


@pytest.fixture(params=["stdio", "http"])
def transport(request: pytest.FixtureRequest) -> Iterator[str]:
    yield str(request.param)


def text(result: Any) -> str:
    return "\n".join(getattr(block, "text", "") for block in result.content)


def scrape(url: str) -> str:
    """The gateway's /metrics page."""
    import urllib.request

    with urllib.request.urlopen(url.replace("/mcp", "/metrics")) as response:
        return str(response.read().decode())
