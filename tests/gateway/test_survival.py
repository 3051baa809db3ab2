"""A misbehaving upstream: crashes, hangs, garbage and leaks become closed outcomes; restarts."""

from __future__ import annotations

from pathlib import Path

import anyio
import pytest

from guardrails.store import SQLiteStore
from guardrails.verdicts import Outcome, model_sentence

from .conftest import (
    MISBEHAVING,
    TOKENS,
    command_toml,
    gateway_client,
    http_client,
    http_gateway,
    scrape,
    text,
    write_config,
)

ERROR = model_sentence(Outcome.ERROR)
UNAVAILABLE = model_sentence(Outcome.UNAVAILABLE)


def upstream(*, backoff: float = 0.05, extra: list[str] | None = None, timeout: float = 1) -> str:
    return (
        f"[upstreams.bad]\ncommand = {command_toml([*MISBEHAVING, *(extra or [])])}\n"
        f"timeout = {timeout}\nbackoff_initial = {backoff}\nbackoff_max = {backoff}\n"
    )


async def until_answered(client: object) -> str:
    """Calls ``ok`` until the restarted upstream answers (bounded polling, no fixed sleep)."""
    with anyio.fail_after(30):
        while True:
            result = await client.call_tool("ok", {})  # type: ignore[attr-defined]
            if not result.is_error:
                return text(result)
            # While the gateway is finding out, a call times out; once it knows, unavailable.
            assert text(result) in (UNAVAILABLE, ERROR)
            await anyio.sleep(0.05)


@pytest.mark.slow
async def test_a_crash_is_an_error_then_unavailable_while_down(
    transport: str, tmp_path: Path
) -> None:
    # A long backoff keeps the upstream down after its crash.
    config = write_config(tmp_path, upstream(backoff=60))
    async with gateway_client(transport, config) as client:
        assert not (await client.call_tool("ok", {})).is_error
        crashed = await client.call_tool("crash", {})
        down = await client.call_tool("ok", {})
    assert text(crashed) == ERROR
    assert text(down) == UNAVAILABLE


@pytest.mark.slow
async def test_a_crashed_upstream_is_restarted_and_counted(tmp_path: Path) -> None:
    async with http_gateway(write_config(tmp_path, upstream())) as (url, _):
        async with http_client(url, TOKENS["acme"]) as client:
            before = text(await client.call_tool("ok", {}))
            assert text(await client.call_tool("crash", {})) == ERROR
            after = await until_answered(client)
        metrics = scrape(url)
    assert before != after  # a new process
    assert _sample(metrics, 'guardrails_gateway_upstream_restarts_total{upstream="bad"}') >= 1
    assert (
        _sample(
            metrics,
            'guardrails_gateway_upstream_failures_total{reason="disconnected",upstream="bad"}',
        )
        >= 1
    )
    assert _sample(metrics, 'guardrails_gateway_upstream_up{upstream="bad"}') == 1


@pytest.mark.slow
async def test_a_hung_upstream_times_out_and_is_restarted(transport: str, tmp_path: Path) -> None:
    config = write_config(tmp_path, upstream(extra=["--hang-all"]))
    async with gateway_client(transport, config) as client:
        before = text(await client.call_tool("ok", {}))
        hung = await client.call_tool("hang", {})
        after = await until_answered(client)
    assert text(hung) == ERROR
    assert before != after


@pytest.mark.slow
async def test_a_slow_call_is_bounded_but_a_healthy_upstream_stays(
    transport: str, tmp_path: Path
) -> None:
    # The health check that follows the timeout gets as long as the call had.
    config = write_config(tmp_path, upstream(timeout=3))
    async with gateway_client(transport, config) as client:
        before = text(await client.call_tool("ok", {}))
        slow = await client.call_tool("slow", {"seconds": 20})
        after = text(await client.call_tool("ok", {}))
    assert text(slow) == ERROR
    assert before == after  # it answered the health check: not restarted


@pytest.mark.slow
async def test_garbage_and_leaked_error_text_never_reach_the_client(
    transport: str, tmp_path: Path
) -> None:
    async with gateway_client(transport, write_config(tmp_path, upstream())) as client:
        garbage = await client.call_tool("garbage", {})
        await until_answered(client)  # a result that is not one: the upstream was restarted
        leak = await client.call_tool("leak", {})
    assert text(garbage) == ERROR and text(leak) == ERROR
    assert "hunter2" not in leak.model_dump_json() and "JSON" not in garbage.model_dump_json()


@pytest.mark.slow
async def test_sigterm_lets_calls_in_flight_finish_and_keeps_their_audit_rows(
    tmp_path: Path,
) -> None:
    marker = tmp_path / "received"
    # An upstream started over stdio gets the SDK's minimal environment plus its `env`.
    body = upstream(timeout=20) + f'env = {{ MISBEHAVING_MARKER = "{marker}" }}\n'
    async with http_gateway(write_config(tmp_path, body)) as (url, process):
        async with http_client(url, TOKENS["acme"]) as client:
            for _ in range(3):
                await client.call_tool("ok", {})
            async with anyio.create_task_group() as tg:
                tg.start_soon(client.call_tool, "slow", {"seconds": 1})
                with anyio.fail_after(30):
                    while not marker.exists():  # the slow call reached the upstream
                        await anyio.sleep(0.02)
                process.terminate()
        with anyio.fail_after(30):
            code = await process.wait()
    assert code == 0
    store = SQLiteStore(str(tmp_path / "audit.db"))
    try:
        rows = store.audit_rows(kind="tool_call")
    finally:
        store.close()
    assert sorted((r.tool, r.outcome) for r in rows) == [
        ("ok", "ok"), ("ok", "ok"), ("ok", "ok"), ("slow", "ok"),
    ]  # fmt: skip


def _sample(metrics: str, series: str) -> float:
    for line in metrics.splitlines():
        if line.startswith(series + " "):
            return float(line.split()[-1])
    raise AssertionError(f"no sample {series} in:\n{metrics}")


@pytest.mark.slow
async def test_sigterm_over_stdio_finishes_the_call_in_flight(tmp_path: Path) -> None:
    import json
    import os

    from mcp_types.version import HANDSHAKE_PROTOCOL_VERSIONS

    from .conftest import GATEWAY_ENV, PY

    marker = tmp_path / "received"
    body = upstream(timeout=20) + f'env = {{ MISBEHAVING_MARKER = "{marker}" }}\n'
    config = write_config(tmp_path, body)
    command = [PY, "-m", "guardrails.cli", "gateway", "--config", str(config), "--stdio"]
    process = await anyio.open_process(command, env={**os.environ, **GATEWAY_ENV})
    assert process.stdin is not None and process.stdout is not None

    async def send(message: dict[str, object]) -> None:
        await process.stdin.send((json.dumps({"jsonrpc": "2.0", **message}) + "\n").encode())  # type: ignore[union-attr]

    async with process:
        version = HANDSHAKE_PROTOCOL_VERSIONS[-1]
        client = {"name": "raw", "version": "0"}
        await send({"id": 1, "method": "initialize", "params": {
            "protocolVersion": version, "capabilities": {}, "clientInfo": client}})  # fmt: skip
        with anyio.fail_after(60):
            first = await process.stdout.receive()
        assert b'"id":1' in first.replace(b" ", b"")
        await send({"method": "notifications/initialized"})
        await send({"id": 2, "method": "tools/call", "params": {
            "name": "slow", "arguments": {"seconds": 1}}})  # fmt: skip
        with anyio.fail_after(30):
            while not marker.exists():  # the call reached the upstream
                await anyio.sleep(0.02)
        process.terminate()
        with anyio.fail_after(30):
            code = await process.wait()
    assert code == 0
    store = SQLiteStore(str(tmp_path / "audit.db"))
    try:
        rows = store.audit_rows(kind="tool_call")
    finally:
        store.close()
    assert [(r.tool, r.outcome) for r in rows] == [("slow", "ok")]


@pytest.mark.slow
async def test_tools_that_cannot_be_checked_are_left_out_and_other_blocks_forwarded(
    tmp_path: Path,
) -> None:
    async with gateway_client("stdio", write_config(tmp_path, upstream())) as client:
        listed = await client.list_tools()
        image = await client.call_tool("image", {})
        unlisted = await client.call_tool("broken_schema", {"x": 1})
    names = {t.name for t in listed.tools}
    assert names == {
        "ok", "crash", "hang", "slow", "garbage", "leak", "image", "key_digest",
        "refuse", "huge", "stderr", "shout", "open", "exit_idle", "misshapen",
    }  # fmt: skip
    # An image block reaches the client as the upstream sent it.
    assert not image.is_error
    assert [(b.type, getattr(b, "mime_type", None)) for b in image.content] == [
        ("image", "image/png")
    ]
    assert text(unlisted) == UNAVAILABLE


@pytest.mark.slow
async def test_hostile_calls_get_closed_outcomes(tmp_path: Path) -> None:
    deep: object = "x"
    for _ in range(200):
        deep = [deep]
    async with gateway_client("http", write_config(tmp_path, upstream())) as client:
        results = [
            await client.call_tool("ok", {"deep": deep}),
            await client.call_tool("ok", {"big": "x" * 2_000_000}),
            await client.call_tool("\u202eko\u0000" * 1000, {}),
            await client.call_tool("slow", {"seconds": float("nan")}),
            await client.call_tool("ok", {}),
        ]
    sentences = {model_sentence(o) for o in Outcome if o is not Outcome.OK}
    # Too deep and too big are refused before any upstream sees them.
    assert text(results[0]).startswith(model_sentence(Outcome.INVALID_ARGS))
    assert text(results[1]).startswith(model_sentence(Outcome.INVALID_ARGS))
    assert text(results[2]) == UNAVAILABLE
    assert text(results[3]) in sentences or text(results[3]).startswith(
        model_sentence(Outcome.INVALID_ARGS)
    )
    assert not results[4].is_error  # and the gateway still answers


@pytest.mark.slow
async def test_an_upstreams_own_credentials_come_from_the_secret_provider(tmp_path: Path) -> None:
    import hashlib

    from .conftest import SECRET

    body = upstream() + 'env = { UPSTREAM_KEY = "${PAY_KEY}" }\n'
    async with gateway_client("stdio", write_config(tmp_path, body)) as client:
        digest = await client.call_tool("key_digest", {})
    assert text(digest) == hashlib.sha256(SECRET.encode()).hexdigest()


@pytest.mark.slow
async def test_an_http_upstream_that_goes_away_is_reconnected_when_it_returns(
    tmp_path: Path,
) -> None:
    from .conftest import BILLING, started

    async with started([*BILLING, "--http"], r"listening (\d+)", stderr=False) as (port, first):
        url = f"http://127.0.0.1:{port}/mcp"
        body = f'[upstreams.billing]\nurl = "{url}"\ntimeout = 5\nbackoff_initial = 0.05\n'
        body += "backoff_max = 0.2\n"
        async with (
            http_gateway(write_config(tmp_path, body)) as (gateway_url, _),
            http_client(gateway_url, TOKENS["acme"]) as client,
        ):
            before = text(await client.call_tool("pid", {}))
            first.terminate()
            await first.wait()
            gone = await client.call_tool("pid", {})
            # The same port again: the gateway reconnects on its own.
            again = [*BILLING, "--http", port]
            async with started(again, r"listening (\d+)", stderr=False):
                with anyio.fail_after(30):
                    while True:
                        result = await client.call_tool("pid", {})
                        if not result.is_error:
                            break
                        await anyio.sleep(0.05)
                after = text(result)
    assert text(gone) in (ERROR, UNAVAILABLE)
    assert before != after
