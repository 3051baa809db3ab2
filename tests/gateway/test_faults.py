"""Upstream faults, in-process with real upstream processes: what the client sees and what is logged.

Each test attacks one row of the fault table in docs/gateway.md.
"""

from __future__ import annotations

import base64
import logging
import tomllib
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import anyio
import pytest
from mcp import Client

from guardrails.gateway import Gateway, parse_config
from guardrails.gateway.stderr import StderrLog
from guardrails.verdicts import Outcome, model_sentence

from .conftest import BILLING, MISBEHAVING, PY, SECRET, SERVERS, command_toml, text

ERROR = model_sentence(Outcome.ERROR)
UNAVAILABLE = model_sentence(Outcome.UNAVAILABLE)


def bad(options: str = "") -> str:
    return f"[upstreams.bad]\ncommand = {command_toml(MISBEHAVING)}\ntimeout = 10\n{options}\n"


@asynccontextmanager
async def connected(tmp_path: Path, body: str) -> AsyncIterator[tuple[Gateway, Client]]:
    config = parse_config(tomllib.loads('[gateway]\nstore = "memory:"\n' + body), base=tmp_path)
    gateway = Gateway(config, secrets={"PAY_KEY": SECRET}.get)
    async with gateway.running(), Client(gateway.server(), cache=None) as client:
        yield gateway, client


async def until(predicate: Any) -> None:
    """Polls ``predicate`` (bounded; no fixed sleep)."""
    with anyio.fail_after(30):
        while not predicate():
            await anyio.sleep(0.02)


async def test_a_minus_32000_error_is_the_upstreams_answer_not_a_broken_connection(
    tmp_path: Path,
) -> None:
    async with connected(tmp_path, bad()) as (gateway, client):
        before = text(await client.call_tool("ok", {}))
        async with anyio.create_task_group() as tg:
            slow: list[Any] = []

            async def in_flight() -> None:
                slow.append(await client.call_tool("slow", {"seconds": 1}))

            tg.start_soon(in_flight)
            refused = await client.call_tool("refuse", {})
        after = text(await client.call_tool("ok", {}))
        restarts = gateway.counters.restarts["bad"]
    assert text(refused) == ERROR
    assert text(slow[0]) == "slow done"  # the call the upstream had accepted ends well
    assert before == after and restarts == 0  # the same process: never restarted


async def test_an_answer_its_output_schema_refuses_fails_that_call_only(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    async with connected(tmp_path, bad()) as (gateway, client):
        before = text(await client.call_tool("ok", {}))
        async with anyio.create_task_group() as tg:
            slow: list[Any] = []

            async def in_flight() -> None:
                slow.append(await client.call_tool("slow", {"seconds": 1}))

            tg.start_soon(in_flight)
            misshapen = await client.call_tool("misshapen", {})
        garbage = await client.call_tool("garbage", {})  # a result of the wrong shape
        after = text(await client.call_tool("ok", {}))
        restarts = gateway.counters.restarts["bad"]
        failures = dict(gateway.counters.failures)
    assert text(garbage) == ERROR
    assert text(misshapen) == ERROR  # the fixed sentence: nothing of the upstream's text
    assert "not a number" not in misshapen.model_dump_json()
    assert text(slow[0]) == "slow done"  # the other call on the upstream ends well
    assert before == after and restarts == 0  # the same process: never restarted
    assert not any(n for (name, _), n in failures.items() if name == "bad")  # not a failure
    assert not [m for m in caplog.messages if "restart" in m or "connection" in m]


async def test_an_upstream_that_dies_idle_is_unavailable_at_once_and_its_restart_logged(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.WARNING, "guardrails.gateway")
    body = bad("backoff_initial = 60\nbackoff_max = 60\nhealth_interval = 600\n")
    async with connected(tmp_path, body) as (gateway, client):
        assert text(await client.call_tool("exit_idle", {})) == "bye"
        await until(lambda: gateway.counters.up["bad"] == 0)
        down = await client.call_tool("ok", {})
    assert text(down) == UNAVAILABLE
    assert "upstream 'bad': exited with status 4; restarting in 60s" in caplog.messages


async def test_a_crash_during_a_call_is_logged_with_its_status(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.WARNING, "guardrails.gateway")
    async with connected(tmp_path, bad("backoff_initial = 60\nbackoff_max = 60\n")) as (_, c):
        crashed = await c.call_tool("crash", {})
    assert text(crashed) == ERROR
    assert "upstream 'bad': exited with status 3; restarting in 60s" in caplog.messages


@pytest.mark.parametrize(("size", "outcome"), [(3000, "ok"), (6000, "error")])
async def test_an_answer_past_the_byte_bound_is_an_error_and_the_upstream_stays(
    tmp_path: Path, size: int, outcome: str
) -> None:
    # The message holds the text plus about 80 bytes of JSON-RPC around it.
    body = "[limits]\nmax_result_bytes = 5000\n" + bad()
    async with connected(tmp_path, body) as (gateway, client):
        before = text(await client.call_tool("ok", {}))
        answer = await client.call_tool("huge", {"size": size})
        after = text(await client.call_tool("ok", {}))
        too_large = gateway.counters.failures["bad", "too_large"]
    assert (text(answer) == ERROR) == (outcome == "error")
    assert too_large == (outcome == "error")
    assert before == after


async def test_a_50_mb_answer_is_cut_unread(tmp_path: Path) -> None:
    import tracemalloc

    async with connected(tmp_path, bad()) as (_, client):
        tracemalloc.start()
        try:
            answer = await client.call_tool("huge", {"size": 50_000_000})
            _, peak = tracemalloc.get_traced_memory()
        finally:
            tracemalloc.stop()
        still = await client.call_tool("ok", {})
    assert text(answer) == ERROR and not still.is_error
    assert peak < 20_000_000  # the 50 MB never held whole (4 MiB is the default bound)


async def test_stderr_is_redacted_and_logged_under_the_upstreams_name(
    tmp_path: Path, caplog: pytest.LogCaptureFixture, capfd: pytest.CaptureFixture[str]
) -> None:
    caplog.set_level(logging.WARNING, "guardrails.gateway")
    body = bad('env = { UPSTREAM_KEY = "${PAY_KEY}" }')
    async with connected(tmp_path, body) as (_, client):
        assert text(await client.call_tool("stderr", {})) == "logged"
        await until(lambda: any("Traceback" in m for m in caplog.messages))
    line = next(m for m in caplog.messages if "Traceback" in m)
    assert line == (
        "upstream 'bad': Traceback: auth failed with key=[redacted] KEY=[redacted] b64=[redacted]"
    )
    encoded = base64.b64encode(SECRET.encode()).decode()
    for spelling in (SECRET, SECRET.upper(), encoded):
        assert spelling not in "\n".join(caplog.messages)
    assert "Traceback" not in capfd.readouterr().err  # not inherited by the gateway's stderr


def test_stderr_lines_are_logged_at_a_bounded_rate(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.WARNING, "guardrails.gateway")
    now = [0.0]
    stderr = StderrLog("bad", rate=2.0, burst=3, clock=lambda: now[0])
    for number in range(4):  # the burst, and one past it
        stderr(f"line {number}")
    assert caplog.messages == ["upstream 'bad': line 0", "upstream 'bad': line 1",
                               "upstream 'bad': line 2"]  # fmt: skip
    now[0] = 0.5  # one line's worth of time later
    stderr("line 4")
    stderr("line 5")
    assert caplog.messages[3:] == ["upstream 'bad': 1 stderr lines not logged",
                                   "upstream 'bad': line 4"]  # fmt: skip
    assert stderr.dropped == 1


async def test_an_upper_cased_secret_never_reaches_the_client(tmp_path: Path) -> None:
    body = bad('[upstreams.bad.tools.shout]\naction = true\nsecrets = { api_key = "PAY_KEY" }\n')
    async with connected(tmp_path, body) as (_, client):
        shouted = await client.call_tool("shout", {})
    assert text(shouted) == "[redacted]"
    assert SECRET.upper() not in shouted.model_dump_json()


@pytest.mark.parametrize(
    ("extra", "answer"), [("", None), ('extra = "allow"', "a,b"), ('extra = "drop"', "a")]
)
async def test_undeclared_arguments_are_refused_unless_the_upstream_says_otherwise(
    tmp_path: Path, extra: str, answer: str | None
) -> None:
    async with connected(tmp_path, bad(extra)) as (_, client):
        result = await client.call_tool("open", {"a": "x", "b": "model-chosen"})
    if answer is None:
        assert text(result) == (
            "The arguments were not accepted. Send only the parameters that the tool declares."
        )
    else:
        assert text(result) == answer


@pytest.mark.slow
async def test_an_upstream_cannot_take_another_upstreams_name_at_start_or_at_a_relist(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.WARNING, "guardrails.gateway")
    names = tmp_path / "names"
    names.write_text("billing__charge\n")
    body = (
        bad(f'env = {{ MISBEHAVING_TOOLS_FILE = "{names}" }}\nhealth_interval = 0.1')
        + f"[upstreams.billing]\ncommand = {command_toml(BILLING)}\nprefix = true\n"
        + '[upstreams.billing.tools.charge]\naction = true\nsecrets = { api_key = "PAY_KEY" }\n'
    )
    async with connected(tmp_path, body) as (gateway, client):
        charged = await client.call_tool("billing__charge", {"account_id": "a", "amount": 1})
        names.write_text("billing__charge\nbilling__lookup\nfresh\n")  # a later listing
        await until(lambda: "fresh" in gateway.owners)
        looked = await client.call_tool("billing__lookup", {"account_id": "a", "year": 2024})
        listed = {t.name for t in (await client.list_tools()).tools}
        clashes = gateway.counters.clashes["bad"]
    assert text(charged) == "charged 1 to a with key [redacted]"
    assert text(looked) == "invoices of a for 2024: 2"
    assert {"billing__charge", "billing__lookup", "fresh"} <= listed
    assert gateway.owners["billing__charge"] == gateway.owners["billing__lookup"] == "billing"
    assert clashes == 2
    assert (
        "upstream 'bad': tool 'billing__charge' is not published: the name 'billing__charge' "
        "is upstream 'billing''s"
    ) in caplog.messages


# The answer holds the text twice (a text block and structured content).
@pytest.mark.parametrize(("size", "outcome"), [(2000, "ok"), (6000, "error")])
@pytest.mark.slow
async def test_an_http_upstreams_answer_past_the_byte_bound_is_an_error(
    tmp_path: Path, size: int, outcome: str
) -> None:
    from .conftest import billing_over_http

    async with billing_over_http() as url:
        body = f'[limits]\nmax_result_bytes = 5000\n[upstreams.billing]\nurl = "{url}"\n'
        async with connected(tmp_path, body) as (gateway, client):
            answer = await client.call_tool("echo", {"text": "y" * size})
            still = await client.call_tool("echo", {"text": "small"})
            too_large = gateway.counters.failures["billing", "too_large"]
    assert (text(answer) == ERROR) == (outcome == "error")
    assert text(still) == "small" and too_large == (outcome == "error")


@pytest.mark.parametrize(("capacity", "answers"), [(0, [UNAVAILABLE] * 3), (1, ["flooded 1"] * 3)])
async def test_an_http_upstreams_bounds_end_with_their_calls_and_a_full_table_refuses(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capacity: int, answers: list[str]
) -> None:
    # Answers that never reach the size check (an event stream) leave no bound
    # behind: at a table of one, call after call is bounded. A full table refuses
    # the call (`unavailable`) instead of lending it the transport's bound.
    from guardrails.gateway import bounds

    from .conftest import started

    async def ignore(*_: object) -> None:
        pass

    monkeypatch.setattr(bounds, "CAPACITY", capacity)
    noisy = [PY, str(SERVERS / "noisy.py"), "--http"]
    async with started(noisy, r"listening (\d+)", stderr=False) as (port, _):
        url = f"http://127.0.0.1:{port}/mcp"
        body = f'[limits]\nmax_result_bytes = 5000\n[upstreams.noisy]\nurl = "{url}"\n'
        async with connected(tmp_path, body) as (gateway, client):
            got = []
            for _ in range(3):  # progress asked for: the upstream answers an event stream
                answer = await client.call_tool("flood", {"times": 1}, progress_callback=ignore)
                got.append(text(answer))
            restarts = gateway.counters.restarts["noisy"]
            failures = gateway.counters.failures
            refused, broken = failures["noisy", "unavailable"], failures["noisy", "disconnected"]
    assert got == answers
    assert (restarts, broken) == (0, 0) and refused == answers.count(UNAVAILABLE)


async def test_a_bound_is_held_while_its_call_lasts_and_a_full_table_refuses() -> None:
    from mcp.shared.message import SessionMessage
    from mcp_types import JSONRPCRequest

    from guardrails.gateway.bounds import BoundedWriter, Bounds, BoundsFull, bounded, release

    class Sent:
        def __init__(self) -> None:
            self.ids: list[int] = []

        async def send(self, item: Any) -> None:
            self.ids.append(item.message.id)

    def request(rid: int) -> Any:
        return SessionMessage(JSONRPCRequest(jsonrpc="2.0", id=rid, method="tools/call"))

    sent = Sent()
    table = Bounds(5000, capacity=2)
    writer = BoundedWriter(sent, table)
    for rid in range(5):  # answered by an event stream: `of` is never asked
        token = bounded(100)
        await writer.send(request(rid))
        release(token)
    assert table.by_id == {}
    first = bounded(100)
    await writer.send(request(10))
    second = bounded(9000)
    await writer.send(request(11))  # at the bound: both held, each its own
    assert table.by_id == {10: 100, 11: 5000}
    third = bounded(200)
    with pytest.raises(BoundsFull):  # one past it: refused, not sent
        await writer.send(request(12))
    release(third)
    release(second)
    release(first)
    assert table.by_id == {} and sent.ids == [0, 1, 2, 3, 4, 10, 11]


@pytest.mark.parametrize(
    ("headers", "passed_on"),
    [
        ({"content-length": "5000"}, True),
        ({"content-length": "5001"}, False),
        ({}, False),  # no declared length: read here, up to the bound
        ({"content-length": "10", "content-encoding": "gzip"}, False),  # longer once decoded
        ({"content-length": "10, 10"}, False),
    ],
)
def test_only_an_answer_declaring_a_plain_length_within_its_bound_is_passed_on_unread(
    headers: dict[str, str], passed_on: bool
) -> None:
    import httpx2

    from guardrails.gateway.http_upstream import _declared_within

    assert _declared_within(httpx2.Headers(headers), 5000) is passed_on


async def test_a_restart_lets_the_calls_the_upstream_accepted_end_first(tmp_path: Path) -> None:
    # `hang` stops the upstream answering anything new: the health check after
    # its timeout fails and the upstream is restarted, while `slow` (accepted
    # before, answered by the upstream 2 s later) is still running.
    marker = tmp_path / "received"
    body = (
        f"[upstreams.bad]\ncommand = {command_toml([*MISBEHAVING, '--hang-all'])}\n"
        f'timeout = 0.5\nbackoff_initial = 0.05\nenv = {{ MISBEHAVING_MARKER = "{marker}" }}\n'
        "[upstreams.bad.tools.slow]\ntimeout = 20\n"
    )
    async with connected(tmp_path, body) as (gateway, client):
        slow: list[Any] = []
        async with anyio.create_task_group() as tg:

            async def in_flight() -> None:
                slow.append(await client.call_tool("slow", {"seconds": 2}))

            tg.start_soon(in_flight)
            await until(marker.exists)
            hung = await client.call_tool("hang", {})
        # Restarted and listed again (never left while a child is being started).
        await until(lambda: gateway.counters.restarts["bad"] >= 1 and gateway.counters.up["bad"])
    assert text(hung) == ERROR
    assert text(slow[0]) == "slow done"


@pytest.mark.slow
async def test_a_name_never_moves_between_gateways_sharing_a_store(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    # Gateway one sees `first` publish beta. Later `first` no longer lists it and `bad`
    # does: a gateway started then on the same store still refuses it to `bad`, unless
    # its configuration has no upstream `first` any more.
    caplog.set_level(logging.WARNING, "guardrails.gateway")
    generation, names = tmp_path / "generation", tmp_path / "names"
    generation.write_text("1")
    names.write_text("")
    first = command_toml([PY, str(SERVERS / "changing.py"), str(generation)])
    hostile = bad(f'env = {{ MISBEHAVING_TOOLS_FILE = "{names}" }}')
    store = f'[gateway]\nstore = "{tmp_path / "shared.db"}"\n'

    async def beta(body: str, arguments: dict[str, str]) -> tuple[set[str], str]:
        config = parse_config(tomllib.loads(store + body), base=tmp_path)
        gateway = Gateway(config, secrets={}.get)
        async with gateway.running(), Client(gateway.server(), cache=None) as client:
            listed = {t.name for t in (await client.list_tools()).tools}
            return listed, text(await client.call_tool("beta", arguments))

    with_first = f'[upstreams.first]\ncommand = {first}\npin = "auto"\n{hostile}'
    one = await beta(with_first, {"text": "x"})
    generation.write_text("2")
    names.write_text("beta\n")
    two = await beta(with_first, {})
    three = await beta(hostile, {})  # `first` is gone from the configuration: beta is free
    assert "beta" in one[0] and one[1] == "beta 1 x"
    assert "beta" not in two[0] and two[1] == UNAVAILABLE
    assert "beta" in three[0] and three[1] == "impostor beta"
    assert (
        "upstream 'bad': tool 'beta' is not published: the name 'beta' is upstream 'first''s"
    ) in caplog.messages
