"""What the gateway adds to a ``tools/call``: p50 and p99, direct and through it, in one run.

A real ``mcp`` client calls ``echo`` on ``_mcp_echo.py`` over streamable HTTP,
either directly or through ``guardrails gateway --http`` (bearer token, audit
on SQLite) in front of the same upstream process. Both paths are timed in the
same run, their rounds interleaved (direct, gateway, then gateway, direct,
...), so a burst of load from elsewhere falls on both alike. Groups:

- ``gateway.cost.sequence``: one session per path, calling in sequence
  (``CALLS`` calls a round).
- ``gateway.cost.sessions``: ``SESSIONS`` sessions per path, all open at
  once, each its own MCP session and connection; in a round every session
  calls once at a random moment of ``WINDOW_S`` seconds (``SESSIONS /
  WINDOW_S`` calls/s offered), so the figure is a call's cost with 200
  sessions held, not a queue.
- ``gateway.cost.saturated``: the same sessions calling back to back, all at
  once: calls/s in total, and the latency of a call in that queue.

Each latency row has ``p50_us`` and ``p99_us`` over every call of its rounds,
``added_p50_us`` / ``added_p99_us`` over direct, the ratio of the p50s, and the
median over rounds of each round's own p50 ratio. The client, the gateway and
the upstream share the machine's cores: each row also has the CPU time per
call of each process over its rounds (``cpu_*_us``, from ``/proc``; ticks of
10 ms summed over thousands of calls), and the load average around the run.

Run: ``python benchmarks/bench_gateway_cost.py [--quick]`` (about 8 minutes
on a loaded 2-core machine, most of it opening 400 sessions; ``--quick``
about 3), or ``python benchmarks/run.py --only gateway_cost``.
"""

from __future__ import annotations

import os
import random
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
from bench_gateway import ECHO, GATEWAY, TOKEN, _call, _config, _process
from mcp import Client

SESSIONS = int(os.environ.get("SESSIONS", "200"))
WINDOW_S = 10.0
CALLS = 50
_TICK = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100


def _note(text: str) -> None:
    print(f"[gateway_cost {time.strftime('%H:%M:%S')}] {text}", file=sys.stderr, flush=True)


def _cpu_s(pid: int) -> float:
    """User and system CPU seconds of process ``pid`` so far (0 where /proc is absent)."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return 0.0
    return (int(fields[11]) + int(fields[12])) / _TICK


class Meter:
    """Latencies and CPU time of one path, summed over its rounds."""

    def __init__(self, pids: dict[str, int]) -> None:
        self.pids = pids
        self.latencies: list[float] = []
        self.round_p50: list[float] = []
        self.cpu = dict.fromkeys(pids, 0.0)
        self.seconds = 0.0

    async def round(self, calls: Callable[[list[float]], Awaitable[None]]) -> None:
        before = {name: _cpu_s(pid) for name, pid in self.pids.items()}
        client_before = time.process_time()
        start = time.perf_counter()
        latencies: list[float] = []
        await calls(latencies)
        self.seconds += time.perf_counter() - start
        for name, pid in self.pids.items():
            self.cpu[name] += _cpu_s(pid) - before[name]
        self.cpu["client"] = self.cpu.get("client", 0.0) + time.process_time() - client_before
        self.latencies += latencies
        self.round_p50.append(statistics.median(latencies))


@asynccontextmanager
async def _transport(url: str, token: str | None) -> AsyncIterator[Any]:
    """Streamable HTTP whose idle connections close after 1 s, before the server's 5 s do:
    a request is never sent on a connection the server is closing (a ReadError)."""
    import httpx2
    from mcp.client.streamable_http import streamable_http_client

    headers = {} if token is None else {"Authorization": f"Bearer {token}"}
    http = httpx2.AsyncClient(
        headers=headers,
        timeout=httpx2.Timeout(30, read=300),
        limits=httpx2.Limits(keepalive_expiry=1.0),
    )
    async with http, streamable_http_client(url, http_client=http) as streams:
        yield streams


def _http_client(url: str, token: str | None = None) -> Client:
    return Client(_transport(url, token), cache=None)


ERRORS: dict[str, int] = {}


async def _timed(client: Client, out: list[float]) -> None:
    start = time.perf_counter_ns()
    try:
        result = await client.call_tool("echo", {"text": "hello"})
    except Exception as exc:  # counted and reported, never timed
        kind = f"{type(exc).__name__}: {str(exc)[:80]}"
    else:
        if not result.is_error:
            out.append((time.perf_counter_ns() - start) / 1000)
            return
        kind = f"isError: {result.content[0].text[:80]}"  # type: ignore[union-attr]
    ERRORS[kind] = ERRORS.get(kind, 0) + 1
    if sum(ERRORS.values()) == 1:
        print(f"[gateway_cost] a call failed: {kind}", file=sys.stderr, flush=True)


def _sequence(client: Client) -> Callable[[list[float]], Awaitable[None]]:
    async def calls(out: list[float]) -> None:
        for _ in range(CALLS):
            await _timed(client, out)

    return calls


def _spread(clients: list[Client]) -> Callable[[list[float]], Awaitable[None]]:
    """Every session calls once, at a random moment of the window."""

    async def one(client: Client, delay: float, out: list[float]) -> None:
        await anyio.sleep(delay)
        await _timed(client, out)

    async def calls(out: list[float]) -> None:
        async with anyio.create_task_group() as tg:
            for client in clients:
                tg.start_soon(one, client, random.uniform(0, WINDOW_S), out)

    return calls


def _saturate(clients: list[Client], each: int) -> Callable[[list[float]], Awaitable[None]]:
    """Every session calls ``each`` times back to back, all at once."""

    async def loop(client: Client, out: list[float]) -> None:
        for _ in range(each):
            await _timed(client, out)

    async def calls(out: list[float]) -> None:
        async with anyio.create_task_group() as tg:
            for client in clients:
                tg.start_soon(loop, client, out)

    return calls


async def _interleave(
    meters: dict[str, Meter], work: dict[str, Callable[[list[float]], Awaitable[None]]], rounds: int
) -> None:
    names = list(meters)
    for r in range(rounds):
        _note(f"round {r + 1} of {rounds}")
        for name in names if r % 2 == 0 else names[::-1]:
            await meters[name].round(work[name])


def _pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def _rows(group: str, meters: dict[str, Meter], load: tuple[float, float]) -> list[dict[str, Any]]:
    direct = meters["direct"]
    d50, d99 = _pct(direct.latencies, 0.5), _pct(direct.latencies, 0.99)
    out = []
    for name, meter in meters.items():
        calls = len(meter.latencies)
        p50, p99 = _pct(meter.latencies, 0.5), _pct(meter.latencies, 0.99)
        ratios = [a / b for a, b in zip(meter.round_p50, direct.round_p50, strict=True)]
        cpu = {f"cpu_{k}_us": round(v / calls * 1e6, 1) for k, v in meter.cpu.items()}
        out.append(
            row(
                group,
                name,
                statistics.median(meter.round_p50),
                p50_us=round(p50, 1),
                p99_us=round(p99, 1),
                added_p50_us=round(p50 - d50, 1),
                added_p99_us=round(p99 - d99, 1),
                ratio=round(p50 / d50, 2),
                round_ratio=round(statistics.median(ratios), 2),
                calls=calls,
                ops_per_s=round(calls / meter.seconds, 1),
                load=f"{load[0]:.2f}-{load[1]:.2f}",
                **cpu,
            )
        )
    return out


async def _open(stack: AsyncExitStack, connect: Callable[[], Client], n: int) -> list[Client]:
    _note(f"opening {n} sessions")
    clients = [await stack.enter_async_context(connect()) for _ in range(n)]
    for client in clients:
        await _call(client)  # warm: the session is initialised and has called once
    return clients


async def _measure(upstream: str, url: str, pids: dict[str, int], quick: bool) -> list[Any]:
    rows: list[dict[str, Any]] = []
    direct_pids = {"upstream": pids["upstream"]}

    async def group(name: str, work: dict[str, Any], rounds: int) -> None:
        meters = {"direct": Meter(direct_pids), "through gateway": Meter(pids)}
        load = os.getloadavg()[0]
        await _interleave(meters, work, rounds)
        found = _rows(name, meters, (load, os.getloadavg()[0]))
        _print(found)
        rows.extend(found)

    try:
        async with AsyncExitStack() as stack:
            one = {
                "direct": (await _open(stack, lambda: _http_client(upstream), 1))[0],
                "through gateway": (await _open(stack, lambda: _http_client(url, TOKEN), 1))[0],
            }
            sequence = {k: _sequence(c) for k, c in one.items()}
            await group("gateway.cost.sequence", sequence, 6 if quick else 30)
            many = {
                "direct": await _open(stack, lambda: _http_client(upstream), SESSIONS),
                "through gateway": await _open(stack, lambda: _http_client(url, TOKEN), SESSIONS),
            }
            spread = {k: _spread(c) for k, c in many.items()}
            await group("gateway.cost.sessions", spread, 2 if quick else 10)
            each = 2 if quick else 3
            saturate = {k: _saturate(c, each) for k, c in many.items()}
            await group("gateway.cost.saturated", saturate, 2 if quick else 3)
    except Exception:
        # Closing hundreds of sessions, a server may already have closed an idle
        # connection: the figures are taken by then.
        if len(rows) < 6:
            raise
    return rows


async def _run(quick: bool) -> list[dict[str, Any]]:
    with tempfile.TemporaryDirectory() as tmp:
        directory = Path(tmp)
        pids: list[int] = []
        async with _process([*ECHO, "--http"], r"listening (\d+)", False, pids) as port:
            upstream = f"http://127.0.0.1:{port}/mcp"
            # The tenant's in-flight bound (64 by default) would refuse the saturated rounds.
            config = _config(directory, f'url = "{upstream}"\n[limits]\nmax_in_flight = 1000')
            command = [*GATEWAY, "--config", str(config), "--http", "127.0.0.1:0"]
            async with _process(command, r"listening on (http://\S+/mcp)", True, pids) as url:
                named = {"upstream": pids[0], "gateway": pids[1]}
                return await _measure(upstream, url, named, quick)


def run(quick: bool = False) -> list[dict[str, Any]]:
    runner: Callable[[bool], Awaitable[list[dict[str, Any]]]] = _run
    return anyio.run(runner, quick)


def _print(rows: list[dict[str, Any]], out: Any = sys.stderr) -> None:
    keys = ("p50_us", "p99_us", "added_p50_us", "added_p99_us", "ratio", "round_ratio")
    for r in rows:
        cpu = {k[4:-3]: v for k, v in r.items() if k.startswith("cpu_")}
        figures = " ".join(f"{k}={r[k]}" for k in keys)
        print(
            f"{r['group']:24} {r['name']:16} {figures} calls={r['calls']} "
            f"ops/s={r['ops_per_s']} cpu_us/call={cpu} load={r['load']}",
            file=out,
            flush=True,
        )


if __name__ == "__main__":
    _print(run("--quick" in sys.argv), sys.stdout)
