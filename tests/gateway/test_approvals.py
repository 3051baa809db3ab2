"""Approvals through the gateway: real processes, real ``mcp`` clients, decided from another process.

A call that needs approval never reaches the upstream until a person approves
it (``guardrails approvals`` against the gateway's store, or the HTTP
endpoint); then the same call runs once, with exactly the approved arguments.
The upstream writes each transfer that ran to a ledger file, so "ran once"
is counted where it happens.
"""

from __future__ import annotations

import json
import sqlite3
import subprocess
import tomllib
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import pytest
from mcp import Client

from guardrails.approvals import SENTENCES
from guardrails.errors import ConfigurationError
from guardrails.gateway import Gateway, parse_config
from guardrails.store import SQLiteStore
from guardrails.store.verify import verify
from guardrails.verdicts import Reason

from .conftest import (
    PY,
    ROOT,
    SERVERS,
    TOKENS,
    command_toml,
    gateway_client,
    http_client,
    http_gateway,
    text,
    write_config,
)
from .test_replicas import store_url

LEDGER_SERVER = [PY, str(SERVERS / "ledger.py")]
PENDING = SENTENCES[Reason.APPROVAL_PENDING]
DENIED = SENTENCES[Reason.APPROVAL_DENIED]
EXPIRED = SENTENCES[Reason.APPROVAL_EXPIRED]
APPROVERS = {"acme": ("alice@acme.example", "appr-acme-1111"), "globex": ("gus", "appr-gx-2222")}


def configure(tmp_path: Path, extra: str = "", store: str | None = None) -> Path:
    """A gateway whose ``transfer`` over 500 needs approval, and acme's ``balance`` of 'vault'."""
    (tmp_path / "ledger.jsonl").touch()
    (tmp_path / "approvers.txt").write_text(
        "".join(f"{tenant} {who} {token}\n" for tenant, (who, token) in APPROVERS.items())
    )
    body = f"""
[approvals]
approvers_file = "approvers.txt"
{extra}
[tenants.acme]
approvals = {{ balance = "account == 'vault'" }}

[tenants.globex]

[upstreams.ledger]
command = {command_toml(LEDGER_SERVER)}
env = {{ LEDGER = "{tmp_path / "ledger.jsonl"}" }}

[upstreams.ledger.tools.transfer]
approval = "amount > 500"
"""
    return write_config(tmp_path, body, store=store)


def ledger(tmp_path: Path) -> list[dict[str, Any]]:
    lines = (tmp_path / "ledger.jsonl").read_text().splitlines()
    return [json.loads(line) for line in lines]


async def transfer(client: Client, amount: int, to: str = "bob") -> tuple[bool, str]:
    result = await client.call_tool("transfer", {"amount": amount, "to": to})
    return bool(result.is_error), text(result)


def approvals_cli(
    tmp_path: Path, *args: str, store: str | None = None
) -> subprocess.CompletedProcess[str]:
    """``guardrails approvals ARGS --store <the gateway's store>`` in a process of its own."""
    url = store or str(tmp_path / "audit.db")
    return subprocess.run(
        [PY, "-m", "guardrails.cli", "approvals", *args, "--store", url],
        capture_output=True,
        text=True,
        cwd=ROOT,
        env={"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin"},
        timeout=60,
    )


def listed(
    tmp_path: Path, status: str = "pending", store: str | None = None
) -> list[dict[str, Any]]:
    done = approvals_cli(tmp_path, "list", "--status", status, "--json", store=store)
    assert done.returncode == 0, done.stderr
    return [json.loads(line) for line in done.stdout.splitlines()]


@pytest.mark.slow
async def test_an_approved_call_runs_once_with_exactly_its_arguments(
    tmp_path: Path, transport: str
) -> None:
    path = configure(tmp_path)
    async with gateway_client(transport, path, session="s-1") as client:
        assert await transfer(client, 900) == (True, PENDING)
        assert await transfer(client, 20) == (False, "sent 20 to bob")  # under the condition
        [request] = listed(tmp_path)
        assert (request["tenant"], request["tool"]) == ("acme", "transfer")
        assert json.loads(request["arguments"]) == {"amount": 900, "to": "bob"}
        done = approvals_cli(tmp_path, "approve", request["id"], "--by", "alice", "--reason", "ok")
        assert done.returncode == 0, done.stderr
        assert await transfer(client, 901) == (True, PENDING)  # another argument: a new request
        assert await transfer(client, 900, "eve") == (True, PENDING)
        assert await transfer(client, 900) == (False, "sent 900 to bob")
        assert await transfer(client, 900) == (True, PENDING)  # used: asked again
    assert ledger(tmp_path) == [{"amount": 20, "to": "bob"}, {"amount": 900, "to": "bob"}]
    statuses = sorted(r["status"] for r in listed(tmp_path, "all"))
    assert statuses == ["pending", "pending", "pending", "used"]


@pytest.mark.postgres
@pytest.mark.slow
async def test_two_replicas_on_postgresql_run_an_approved_call_once(
    tmp_path: Path, pg_dsn: str
) -> None:
    url = store_url(pg_dsn)
    path = configure(tmp_path, store=url)
    token = TOKENS["acme"]
    async with (
        http_gateway(path) as (first, _),
        http_gateway(path) as (second, _),
        http_client(first, token, "s-1") as one,
        http_client(second, token, "s-1") as other,
    ):
        assert await transfer(one, 900) == (True, PENDING)
        assert await transfer(other, 900) == (True, PENDING)  # the same request, not a second
        [request] = listed(tmp_path, store=url)
        done = approvals_cli(tmp_path, "approve", request["id"], "--by", "alice", store=url)
        assert done.returncode == 0, done.stderr
        assert await transfer(other, 900) == (False, "sent 900 to bob")
        assert await transfer(one, 900) == (True, PENDING)
    assert ledger(tmp_path) == [{"amount": 900, "to": "bob"}]


@pytest.mark.slow
async def test_a_denied_call_never_runs_and_the_decision_is_audited(tmp_path: Path) -> None:
    path = configure(tmp_path)
    async with gateway_client("stdio", path) as client:
        assert await transfer(client, 700) == (True, PENDING)
        [request] = listed(tmp_path)
        done = approvals_cli(tmp_path, "deny", request["id"], "--by", "bo", "--reason", "no")
        assert done.returncode == 0, done.stderr
        assert await transfer(client, 700) == (True, DENIED)
        assert await transfer(client, 700) == (True, DENIED)
        again = approvals_cli(tmp_path, "approve", request["id"], "--by", "mallory")
        assert again.returncode == 1  # decided once
        assert await transfer(client, 700) == (True, DENIED)
    assert ledger(tmp_path) == []
    with SQLiteStore(str(tmp_path / "audit.db")) as store:
        [row] = store.audit_rows(kind="approval")
    assert (row.outcome, row.tool, json.loads(row.detail)["by"]) == ("denied", "transfer", "bo")


@pytest.mark.slow
async def test_an_approval_that_expired_unused_never_runs(tmp_path: Path) -> None:
    path = configure(tmp_path)
    async with gateway_client("stdio", path) as client:
        assert await transfer(client, 800) == (True, PENDING)
        [request] = listed(tmp_path)
        assert approvals_cli(tmp_path, "approve", request["id"], "--by", "a").returncode == 0
        # Its hour passes: the stored expiry is moved to the past rather than waited for.
        with sqlite3.connect(tmp_path / "audit.db") as db:
            db.execute(
                "UPDATE guardrails_approvals SET expires_at = requested_at WHERE id = ?",
                (request["id"],),
            )
        assert await transfer(client, 800) == (True, EXPIRED)
        assert await transfer(client, 800) == (True, PENDING)  # the new request waits
    assert ledger(tmp_path) == []
    assert [r["status"] for r in listed(tmp_path, "all")] == ["pending", "expired"]


@pytest.mark.slow
async def test_a_tenant_s_own_rule_holds_its_calls_only(tmp_path: Path) -> None:
    path = configure(tmp_path)
    async with http_gateway(path) as (url, _):
        async with http_client(url, TOKENS["acme"]) as acme:
            held = await acme.call_tool("balance", {"account": "vault"})
            mine = await acme.call_tool("balance", {"account": "mine"})
        async with http_client(url, TOKENS["globex"]) as globex:
            theirs = await globex.call_tool("balance", {"account": "vault"})
    assert (held.is_error, text(held)) == (True, PENDING)
    assert (mine.is_error, text(mine)) == (False, "mine: 100")
    assert (theirs.is_error, text(theirs)) == (False, "vault: 100")
    assert [(r["tenant"], r["tool"]) for r in listed(tmp_path)] == [("acme", "balance")]


# -- the HTTP endpoint ------------------------------------------------------------------


def _client(base: str, token: str | None) -> Any:
    import httpx

    headers = {} if token is None else {"Authorization": f"Bearer {token}"}
    return httpx.AsyncClient(base_url=base, headers=headers, timeout=30)


@asynccontextmanager
async def endpoint(tmp_path: Path) -> AsyncIterator[tuple[str, Client]]:
    """A gateway over HTTP: its base URL, and acme's connected MCP client (session s-1)."""
    async with (
        http_gateway(configure(tmp_path)) as (url, _),
        http_client(url, TOKENS["acme"], "s-1") as client,
    ):
        yield url.removesuffix("/mcp"), client


def _typed(response: Any, status: int, error: str) -> None:
    assert response.status_code == status, response.text
    assert response.json()["error"] == error
    assert "Traceback" not in response.text


@pytest.mark.slow
async def test_an_approver_decides_over_http_and_the_call_runs_once(tmp_path: Path) -> None:
    alice, token = APPROVERS["acme"]
    async with endpoint(tmp_path) as (base, client), _client(base, token) as http:
        assert await transfer(client, 900) == (True, PENDING)
        [request] = (await http.get("/approvals")).json()["requests"]
        assert request["arguments"] == {"amount": 900, "to": "bob"}
        shown = await http.get(f"/approvals/{request['id']}")
        assert shown.json()["request"]["status"] == "pending"
        decided = await http.post(f"/approvals/{request['id']}/approve", json={"reason": "inv 7"})
        assert decided.status_code == 200, decided.text
        record = decided.json()["request"]
        assert (record["status"], record["decided_by"], record["reason"]) == (
            "approved",
            alice,
            "inv 7",
        )
        assert await transfer(client, 900) == (False, "sent 900 to bob")
        assert await transfer(client, 900) == (True, PENDING)
        used = await http.get("/approvals", params={"status": "used"})
        assert [r["id"] for r in used.json()["requests"]] == [request["id"]]
    assert ledger(tmp_path) == [{"amount": 900, "to": "bob"}]
    with SQLiteStore(str(tmp_path / "audit.db")) as store:
        [row] = store.audit_rows(kind="approval")
        assert verify(store).ok  # the decision is a link of the hash chain
    detail = json.loads(row.detail)
    assert (row.outcome, detail["by"], detail["request"]) == ("approved", alice, request["id"])


@pytest.mark.slow
async def test_a_denial_or_an_expiry_over_http_never_runs_the_call(tmp_path: Path) -> None:
    alice, token = APPROVERS["acme"]
    async with endpoint(tmp_path) as (base, client), _client(base, token) as http:
        assert await transfer(client, 900) == (True, PENDING)
        assert await transfer(client, 950) == (True, PENDING)
        [late, denied] = (await http.get("/approvals")).json()["requests"]
        refused = await http.post(f"/approvals/{denied['id']}/deny", json={"reason": "no"})
        assert refused.json()["request"]["decided_by"] == alice
        assert await transfer(client, 900) == (True, DENIED)
        with sqlite3.connect(tmp_path / "audit.db") as db:  # its hour passes
            db.execute(
                "UPDATE guardrails_approvals SET expires_at = requested_at WHERE id = ?",
                (late["id"],),
            )
        too_late = await http.post(f"/approvals/{late['id']}/approve", json={})
        _typed(too_late, 409, "not_pending")
        assert too_late.json()["status"] == "expired"
        assert await transfer(client, 950) == (True, EXPIRED)
    assert ledger(tmp_path) == []


@pytest.mark.slow
async def test_only_an_approver_of_the_tenant_sees_or_decides(tmp_path: Path) -> None:
    _, acme_token = APPROVERS["acme"]
    _, globex_token = APPROVERS["globex"]
    async with endpoint(tmp_path) as (base, client):
        assert await transfer(client, 900) == (True, PENDING)
        [request] = listed(tmp_path)
        at = f"/approvals/{request['id']}"
        for token in (None, TOKENS["acme"], TOKENS["globex"], "garbage", acme_token + "x"):
            async with _client(base, token) as stranger:
                for response in (
                    await stranger.get("/approvals"),
                    await stranger.get(at),
                    await stranger.post(f"{at}/approve", json={}),
                ):
                    _typed(response, 401, "unauthorized")
                    assert response.headers["www-authenticate"].startswith("Bearer")
        async with _client(base, globex_token) as other:
            assert (await other.get("/approvals", params={"status": "all"})).json() == {
                "requests": []
            }
            _typed(await other.get(at), 404, "not_found")
            _typed(await other.post(f"{at}/approve", json={}), 404, "not_found")
            _typed(await other.post(f"{at}/deny", json={}), 404, "not_found")
        async with _client(base, acme_token) as mine:
            basic = await mine.get("/approvals", headers={"Authorization": f"Basic {acme_token}"})
            _typed(basic, 401, "unauthorized")
        assert await transfer(client, 900) == (True, PENDING)
    assert [r["status"] for r in listed(tmp_path, "all")] == ["pending"]
    assert ledger(tmp_path) == []


@pytest.mark.slow
async def test_forged_ids_bad_bodies_and_replays_get_typed_answers(tmp_path: Path) -> None:
    _, token = APPROVERS["acme"]
    async with endpoint(tmp_path) as (base, client), _client(base, token) as http:
        assert await transfer(client, 900) == (True, PENDING)
        [request] = listed(tmp_path)
        at = f"/approvals/{request['id']}"
        for forged in ("0" * 32, request["id"][:-1] + "0", "x" * 500, "%00", "..%2f.."):
            _typed(await http.get(f"/approvals/{forged}"), 404, "not_found")
            _typed(await http.post(f"/approvals/{forged}/approve", json={}), 404, "not_found")
        for body in (b"", b"{", b"\xff\xfe", b"[]", b'"yes"', b"null"):
            _typed(await http.post(f"{at}/approve", content=body), 400, "invalid_json")
        _typed(await http.post(f"{at}/approve", json={"by": "mallory"}), 400, "unknown_field")
        _typed(await http.post(f"{at}/approve", json={"reason": 5}), 400, "invalid_reason")
        _typed(await http.post(f"{at}/approve", json={"reason": "x" * 2001}), 400, "invalid_reason")
        _typed(await http.post(f"{at}/approve", content=b" " * 20_000), 413, "too_large")
        _typed(await http.get("/approvals", params={"status": "alwyas"}), 400, "invalid_status")
        _typed(await http.get("/approvals", params={"limit": "0"}), 400, "invalid_limit")
        _typed(await http.get("/approvals", params={"limit": "9" * 5000}), 400, "invalid_limit")
        assert (await http.get(at)).json()["request"]["status"] == "pending"  # none decided it
        assert (await http.post(f"{at}/approve", json={})).status_code == 200
        replay = await http.post(f"{at}/approve", json={})
        _typed(replay, 409, "not_pending")
        assert replay.json()["status"] == "approved"
        _typed(await http.post(f"{at}/deny", json={}), 409, "not_pending")
        assert await transfer(client, 900) == (False, "sent 900 to bob")
        used = await http.post(f"{at}/approve", json={})
        _typed(used, 409, "not_pending")
        assert used.json()["status"] == "used"
        assert await transfer(client, 900) == (True, PENDING)
    assert ledger(tmp_path) == [{"amount": 900, "to": "bob"}]


# -- configuration -------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("table", "key"),
    [
        ('approval = "alwyas"', "upstreams.ledger.tools.transfer.approval"),
        ('approval = "amount >"', "upstreams.ledger.tools.transfer.approval"),
        ("approval = true", "upstreams.ledger.tools.transfer.approval"),
        ('aproval = "always"', "upstreams.ledger.tools.transfer.aproval"),
    ],
)
def test_a_misspelled_approval_setting_is_a_load_time_error(table: str, key: str) -> None:
    text_ = f'[upstreams.ledger]\ncommand = ["x"]\n[upstreams.ledger.tools.transfer]\n{table}\n'
    with pytest.raises(ConfigurationError, match=rf"^gw\.toml: {key}: "):
        parse_config(tomllib.loads(text_), source="gw.toml")


@pytest.mark.parametrize(
    ("table", "key"),
    [
        ('[tenants.acme]\napprovals = { transfer = "nevr" }', "tenants.acme.approvals.transfer"),
        ("[approvals]\nttl = 0", "approvals.ttl"),
        ('[approvals]\napprovers = "a.txt"', "approvals.approvers"),
    ],
)
def test_tenant_and_endpoint_settings_are_checked_when_loaded(table: str, key: str) -> None:
    text_ = f'[upstreams.ledger]\ncommand = ["x"]\n{table}\n'
    with pytest.raises(ConfigurationError, match=rf"^gw\.toml: {key}: "):
        parse_config(tomllib.loads(text_), source="gw.toml")


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        ('[tenants.acme]\napprovals = { refund = "always" }', "tenants.acme.approvals.refund: no"),
        (
            '[tenants.acme]\napprovals = { transfer = "sum > 5" }',
            "tenants.acme.approvals.transfer: approval condition 'sum > 5' reads 'sum'",
        ),
        (
            '[upstreams.ledger.tools.transfer]\napproval = "sum > 5"',
            "upstreams.ledger.tools.transfer: tool 'transfer': approval condition",
        ),
    ],
)
@pytest.mark.slow
async def test_approval_rules_that_do_not_fit_the_tools_fail_at_start(
    tmp_path: Path, extra: str, message: str
) -> None:
    text_ = (
        f'[gateway]\nstore = "memory:"\n[upstreams.ledger]\ncommand = {command_toml(LEDGER_SERVER)}\n'
        f'env = {{ LEDGER = "{tmp_path / "l"}" }}\n{extra}\n'
    )
    with pytest.raises(ConfigurationError, match=message):
        async with Gateway(parse_config(tomllib.loads(text_))).running():
            pass


@pytest.mark.slow
def test_a_typo_stops_the_command_with_one_line_and_status_2(tmp_path: Path) -> None:
    path = configure(tmp_path)
    path.write_text(path.read_text().replace('approval = "amount > 500"', 'approval = "alwys"'))
    done = subprocess.run(
        [PY, "-m", "guardrails.cli", "gateway", "--config", str(path), "--stdio"],
        capture_output=True,
        text=True,
        cwd=ROOT,
        env={"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin"},
        timeout=60,
        stdin=subprocess.DEVNULL,
    )
    assert done.returncode == 2
    [line] = done.stderr.splitlines()
    assert line.startswith(f"guardrails gateway: {path}: upstreams.ledger.tools.transfer.approval:")


@pytest.mark.slow
def test_an_approver_token_that_is_also_a_client_token_stops_the_start(tmp_path: Path) -> None:
    path = configure(tmp_path)
    (tmp_path / "approvers.txt").write_text(f"acme alice {TOKENS['acme']}\n")
    done = subprocess.run(
        [PY, "-m", "guardrails.cli", "gateway", "--config", str(path), "--http", "127.0.0.1:0"],
        capture_output=True,
        text=True,
        cwd=ROOT,
        env={"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin", "GW_TOKENS": ""},
        timeout=60,
        stdin=subprocess.DEVNULL,
    )
    assert done.returncode == 2
    [line] = done.stderr.splitlines()
    assert "approvals.approvers_file: a token is also an MCP client token" in line


def test_the_documented_error_codes_are_the_endpoint_s() -> None:
    import re

    from guardrails.gateway.approvals_http import ERRORS

    page = (ROOT / "docs" / "approvals.md").read_text()
    section = page.split("## The HTTP API", 1)[1].split("\n## ", 1)[0]
    rows = re.findall(r"^\| (\d{3}) \| `(\w+)` \|", section, re.M)
    assert {code: int(status) for status, code in rows} == ERRORS


@pytest.mark.slow
async def test_the_gateway_s_call_spans_carry_the_approval_events(tmp_path: Path) -> None:
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
    from prometheus_client import generate_latest

    from guardrails.approvals import Approvals
    from guardrails.observe import telemetry

    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    path = configure(tmp_path)
    config = parse_config(tomllib.loads(path.read_text()), base=tmp_path, source=str(path))
    gateway = Gateway(config, secrets={}.get, tracer_provider=provider)
    async with gateway.running(), Client(gateway.server(), cache=None) as client:
        assert await transfer(client, 900) == (True, PENDING)
        waiting = generate_latest(gateway.registry).decode()
        [request] = Approvals(gateway.store).list()
        Approvals(gateway.store).approve(request.id, by="alice")
        assert await transfer(client, 900) == (False, "sent 900 to bob")
        counted = generate_latest(gateway.registry).decode()
    assert 'guardrails_approval_oldest_pending_seconds{tool="transfer"}' in waiting
    for event in ("requested", "granted"):
        assert f'guardrails_approval_events_total{{event="{event}",tool="transfer"}} 1.0' in counted
    spans = [s for s in exporter.get_finished_spans() if s.name == "execute_tool transfer"]
    events = [
        [e.name for e in s.events if e.name.startswith("guardrails.approval.")] for s in spans
    ]
    assert events == [[telemetry.EVENT_APPROVAL_REQUESTED], [telemetry.EVENT_APPROVAL_GRANTED]]
    granted = [e for e in spans[1].events if e.name == telemetry.EVENT_APPROVAL_GRANTED]
    assert granted[0].attributes[telemetry.ATTR_APPROVAL_REQUEST] == request.id  # type: ignore[index]


@pytest.mark.slow
async def test_the_policy_file_s_approval_holds_in_the_gateway(tmp_path: Path) -> None:
    (tmp_path / "policy.toml").write_text('[tools.balance]\napproval = "always"\n')
    path = configure(tmp_path)
    path.write_text(path.read_text().replace("[gateway]\n", '[gateway]\npolicy = "policy.toml"\n'))
    config = parse_config(tomllib.loads(path.read_text()), base=tmp_path, source=str(path))
    gateway = Gateway(config, secrets={}.get)
    async with gateway.running(), Client(gateway.server(), cache=None) as client:
        held = await client.call_tool("balance", {"account": "mine"})
    assert (held.is_error, text(held)) == (True, PENDING)
