"""Budgets: a tool's cost per call against a daily cap and a per-session cap, over MCP."""

from __future__ import annotations

import tomllib
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

import pytest
from mcp import Client

from guardrails.errors import ConfigurationError
from guardrails.gateway import Gateway, parse_config
from guardrails.store import SQLiteStore
from guardrails.verdicts import Outcome, model_sentence

from .conftest import BILLING, command_toml, text

OK = "x"
LIMIT = model_sentence(Outcome.LIMIT)
UNAVAILABLE = model_sentence(Outcome.UNAVAILABLE)


def config_text(caps: str) -> str:
    return f"""
[gateway]
store = "audit.db"
[upstreams.billing]
command = {command_toml(BILLING)}
[upstreams.billing.tools.echo]
cost = 0.25
{caps}
"""


@asynccontextmanager
async def connected(tmp_path: Path, caps: str) -> AsyncIterator[tuple[Gateway, Client]]:
    config = parse_config(tomllib.loads(config_text(caps)), base=tmp_path)
    gateway = Gateway(config, secrets={}.get)
    async with gateway.running(), Client(gateway.server(), cache=None) as client:
        yield gateway, client


async def echo(client: Client, session: str | None = None) -> str:
    meta = None if session is None else {"guardrails/session": session}
    return text(await client.call_tool("echo", {"text": OK}, meta=meta))  # type: ignore[arg-type]


def paid_rows(tmp_path: Path) -> list[tuple[str, str | None]]:
    store = SQLiteStore(str(tmp_path / "audit.db"))
    try:
        return [(r.outcome, r.reason) for r in store.audit_rows(kind="paid_call")]
    finally:
        store.close()


async def test_the_daily_cap_holds_across_calls_and_sessions(tmp_path: Path) -> None:
    async with connected(tmp_path, "daily_cap = 0.75") as (_, client):
        answers = [await echo(client, session) for session in ("a", "b", "c", "d")]
    assert answers == [OK, OK, OK, LIMIT]
    assert paid_rows(tmp_path) == [("ok", None)] * 3 + [("limit", "daily_cap")]


async def test_the_instance_cap_counts_each_session_apart(tmp_path: Path) -> None:
    async with connected(tmp_path, "instance_cap = 0.5\ndaily_cap = 1.0") as (_, client):
        first = [await echo(client, "a") for _ in range(3)]
        second = [await echo(client, "b") for _ in range(3)]
    assert first == [OK, OK, LIMIT]
    # b's second call would take the day past 1.0 (a spent 0.5, b 0.25 then 0.5).
    assert second == [OK, OK, LIMIT]
    outcomes = [row for row in paid_rows(tmp_path) if row[0] == "limit"]
    assert outcomes == [("limit", "instance_cap"), ("limit", "daily_cap")]


async def test_a_refused_call_does_not_reach_the_upstream_and_costs_nothing(
    tmp_path: Path,
) -> None:
    async with connected(tmp_path, "daily_cap = 0.25") as (gateway, client):
        assert await echo(client) == OK
        assert await echo(client) == LIMIT
        assert gateway.store is not None
        spent = [row for row in gateway.store.audit_rows(kind="paid_call") if row.cost]
    assert [row.cost for row in spent] == [0.25]


async def test_a_per_session_cap_without_a_session_answers_unavailable(tmp_path: Path) -> None:
    async with connected(tmp_path, "instance_cap = 1.0") as (gateway, _):
        assert gateway.rails is not None
        turn = gateway.rails.turn()  # a stateless HTTP request without a key: no session
        result = await turn.acall("echo", {"text": OK})
    assert result.outcome is Outcome.UNAVAILABLE
    assert result.content == UNAVAILABLE


@pytest.mark.parametrize(
    ("table", "key", "message"),
    [
        ("cost = -1", "cost", "must be non-negative and finite"),
        ('cost = "one"', "cost", "must be a number"),
        ("cost = true", "cost", "must be a number"),
        ("cost = inf", "cost", "must be non-negative and finite"),
        ("cost = 0\ndaily_cap = 1", "daily_cap", "a cap needs a positive cost"),
        ("instance_cap = 2", "instance_cap", "a cap needs a positive cost"),
        ("cost = 1\ndaily_cap = 0", "daily_cap", "must be positive and finite"),
        ("cost = 1\ninstance_cap = -2", "instance_cap", "must be positive and finite"),
    ],
)
def test_budget_keys_are_checked_with_the_file_and_key(table: str, key: str, message: str) -> None:
    body = config_text("").replace("cost = 0.25", table)
    with pytest.raises(ConfigurationError) as caught:
        parse_config(tomllib.loads(body), source="gw.toml")
    assert str(caught.value).startswith(f"gw.toml: upstreams.billing.tools.echo.{key}: ")
    assert message in str(caught.value)
