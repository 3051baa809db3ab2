"""Budgets: a tool's cost per call against a daily cap and a per-session cap, over MCP."""

from __future__ import annotations

import tomllib
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

import anyio
import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st
from mcp import Client

from guardrails import Guardrails
from guardrails.audit import AuditLog
from guardrails.errors import ConfigurationError
from guardrails.gateway import Gateway, parse_config
from guardrails.gateway.budgets import budgeted
from guardrails.gateway.config import ToolConfig
from guardrails.store import MemoryStore, SQLiteStore
from guardrails.tools import Tool
from guardrails.verdicts import Outcome, model_sentence
from tests._examples import examples

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


@pytest.mark.slow
async def test_the_daily_cap_holds_across_calls_and_sessions(tmp_path: Path) -> None:
    async with connected(tmp_path, "daily_cap = 0.75") as (_, client):
        answers = [await echo(client, session) for session in ("a", "b", "c", "d")]
    assert answers == [OK, OK, OK, LIMIT]
    assert paid_rows(tmp_path) == [("ok", None)] * 3 + [("limit", "daily_cap")]


@pytest.mark.slow
async def test_the_instance_cap_counts_each_session_apart(tmp_path: Path) -> None:
    async with connected(tmp_path, "instance_cap = 0.5\ndaily_cap = 1.0") as (_, client):
        first = [await echo(client, "a") for _ in range(3)]
        second = [await echo(client, "b") for _ in range(3)]
    assert first == [OK, OK, LIMIT]
    # b's second call would take the day past 1.0 (a spent 0.5, b 0.25 then 0.5).
    assert second == [OK, OK, LIMIT]
    outcomes = [row for row in paid_rows(tmp_path) if row[0] == "limit"]
    assert outcomes == [("limit", "instance_cap"), ("limit", "daily_cap")]


@pytest.mark.slow
async def test_a_refused_call_does_not_reach_the_upstream_and_costs_nothing(
    tmp_path: Path,
) -> None:
    async with connected(tmp_path, "daily_cap = 0.25") as (gateway, client):
        assert await echo(client) == OK
        assert await echo(client) == LIMIT
        assert gateway.store is not None
        spent = [row for row in gateway.store.audit_rows(kind="paid_call") if row.cost]
    assert [row.cost for row in spent] == [0.25]


@pytest.mark.slow
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


# The branches the model guards, reached for certain: the daily cap, a session's cap,
# and a failed call that leaves room for the next.
@example(cost=0.5, daily=1.0, instance=None, sessions=["a", "b", "c"], failing=set())
@example(cost=0.5, daily=None, instance=0.5, sessions=["a", "a", "b"], failing=set())
@example(cost=1.0, daily=1.0, instance=1.0, sessions=["a", "a", "a"], failing={0})
@settings(max_examples=examples(60), deadline=None)
@given(
    cost=st.sampled_from([0.25, 0.5, 1.0]),
    daily=st.one_of(st.none(), st.integers(1, 12).map(lambda n: n * 0.25)),
    instance=st.one_of(st.none(), st.integers(1, 8).map(lambda n: n * 0.25)),
    sessions=st.lists(st.sampled_from(["a", "b", "c"]), min_size=1, max_size=12),
    failing=st.sets(st.integers(0, 11), max_size=3),
)
def test_budgets_admit_exactly_the_calls_the_caps_allow(
    cost: float,
    daily: float | None,
    instance: float | None,
    sessions: list[str],
    failing: set[int],
) -> None:
    """The gateway's budgets against a model: admitted while both sums stay within their caps;
    a call the upstream fails costs nothing."""
    calls: list[int] = []

    async def forward(**arguments: object) -> str:
        calls.append(len(calls))
        if arguments["n"] in failing:
            raise RuntimeError("the upstream failed")
        return "ok"

    forward.__name__ = "t"
    store = MemoryStore()
    config = ToolConfig(cost=cost, daily_cap=daily, instance_cap=instance)
    tool = Tool.from_definition(
        {"name": "t", "inputSchema": {"type": "object", "properties": {"n": {"type": "integer"}}}},
        budgeted(forward, config, store, "u.t"),
    )
    audit = AuditLog(store)
    rails = Guardrails([tool], hooks=[audit], recorder=[audit])

    async def run() -> list[Outcome]:
        return [
            (await rails.turn(session=s).acall("t", {"n": n})).outcome
            for n, s in enumerate(sessions)
        ]

    outcomes = anyio.run(run)
    day, spent = 0.0, dict.fromkeys("abc", 0.0)
    expected = []
    for n, s in enumerate(sessions):
        if (daily is not None and day + cost > daily) or (
            instance is not None and spent[s] + cost > instance
        ):
            expected.append(Outcome.LIMIT)
            continue
        if n in failing:
            expected.append(Outcome.ERROR)
            continue
        day += cost
        spent[s] += cost
        expected.append(Outcome.OK)
    assert outcomes == expected, (outcomes, expected)
    assert len(calls) == sum(o is not Outcome.LIMIT for o in expected)
