"""A policy file at the gateway: intent gates from ``_meta["guardrails/user"]``, ceilings
across calls of a session, ``max_per_turn`` reported at start."""

from __future__ import annotations

import logging
import tomllib
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st
from mcp import Client

from guardrails.gateway import Gateway, parse_config
from guardrails.gateway.turns import MAX_USER_CHARS, USER_KEY, user_text
from guardrails.verdicts import Outcome, model_sentence

from .conftest import BILLING, command_toml, text

CONFIG = f"""
[gateway]
store = "audit.db"
policy = "policy.toml"
[upstreams.billing]
command = {command_toml(BILLING)}
"""

POLICY = """
[tools.pid]
intent = ["process", "pid"]

[tools.echo]
max_per_session = 2
"""

UNAVAILABLE = model_sentence(Outcome.UNAVAILABLE)
LIMIT = model_sentence(Outcome.LIMIT)


@asynccontextmanager
async def connected(tmp_path: Path, policy: str = POLICY) -> AsyncIterator[Client]:
    (tmp_path / "policy.toml").write_text(policy)
    config = parse_config(tomllib.loads(CONFIG), base=tmp_path)
    gateway = Gateway(config, secrets={}.get)
    async with gateway.running(), Client(gateway.server(), cache=None) as client:
        yield client


def meta(user: str | None = None, session: str | None = None) -> Any:
    found = {}
    if user is not None:
        found[USER_KEY] = user
    if session is not None:
        found["guardrails/session"] = session
    return found or None


async def listed(client: Client, user: str | None = None) -> set[str]:
    return {tool.name for tool in (await client.list_tools(meta=meta(user))).tools}


@pytest.mark.slow
async def test_intent_gated_tools_need_the_users_words_in_the_request(tmp_path: Path) -> None:
    async with connected(tmp_path) as client:
        without = await listed(client)
        asked = await listed(client, "What is the server's process id?")
        other = await listed(client, "Summarise my invoices")
        refused = await client.call_tool("pid", {})
        wrong = await client.call_tool("pid", {}, meta=meta("summarise my invoices"))
        allowed = await client.call_tool("pid", {}, meta=meta("show the PID please"))
    assert "echo" in without and "pid" not in without and "pid" not in other
    assert "pid" in asked
    assert text(refused) == UNAVAILABLE and text(wrong) == UNAVAILABLE
    assert not allowed.is_error and text(allowed).isdigit()


@pytest.mark.slow
async def test_a_per_session_ceiling_holds_across_calls_over_mcp(tmp_path: Path) -> None:
    async with connected(tmp_path) as client:

        async def echo(session: str | None = None) -> str:
            return text(await client.call_tool("echo", {"text": "x"}, meta=meta(None, session)))

        connection = [await echo() for _ in range(3)]
        keyed = [await echo("k") for _ in range(3)]
    # Each call is its own turn; the session (the stdio connection, or a
    # client-chosen key) carries the count from one call to the next.
    assert connection == ["x", "x", LIMIT]
    assert keyed == ["x", "x", LIMIT]


@pytest.mark.slow
async def test_max_per_turn_is_reported_at_start_and_zero_still_closes_a_tool(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    policy = "[tools.echo]\nmax_per_turn = 1\n[tools.pid]\nmax_per_turn = 0\n"
    with caplog.at_level(logging.WARNING, logger="guardrails.gateway"):
        async with connected(tmp_path, policy) as client:
            echoed = [text(await client.call_tool("echo", {"text": "x"})) for _ in range(2)]
            closed = await client.call_tool("pid", {})
    warnings = [r.getMessage() for r in caplog.records if "max_per_turn" in r.getMessage()]
    assert warnings == [
        "gateway.policy: tools.echo.max_per_turn limits nothing here (each MCP request "
        "is its own turn); use max_per_session"
    ]
    assert echoed == ["x", "x"]
    assert closed.is_error


GROUNDED = """
[tools.echo.params.text]
kind = "email"
grounded_in = ["user"]
"""


@pytest.mark.slow
async def test_a_value_grounded_in_user_is_admitted_once_the_user_said_it(
    tmp_path: Path,
) -> None:
    address = {"text": "bob@example.com"}
    async with connected(tmp_path, GROUNDED) as client:
        unsaid = await client.call_tool("echo", address)
        said = await client.call_tool("echo", address, meta=meta("Mail it to Bob@Example.com"))
        later = await client.call_tool("echo", address)  # the same session: seen before
        other = await client.call_tool("echo", address, meta=meta(None, "another session"))
    assert text(unsaid) == model_sentence(Outcome.INVALID_ARGS, ["text"])
    assert text(said) == "bob@example.com" and text(later) == "bob@example.com"
    assert text(other) == model_sentence(Outcome.INVALID_ARGS, ["text"])


@given(st.one_of(st.none(), st.integers(), st.text(), st.binary(), st.lists(st.text())))
def test_user_text_is_a_non_empty_bounded_string_or_nothing(value: Any) -> None:
    found = user_text({USER_KEY: value})
    if isinstance(value, str) and 0 < len(value) <= MAX_USER_CHARS:
        assert found == value
    else:
        assert found is None


class HostileStr(str):
    def __len__(self) -> int:
        raise RuntimeError("hostile")


def test_user_text_refuses_look_alikes_and_oversized_text() -> None:
    assert user_text({USER_KEY: HostileStr("pay")}) is None
    assert user_text({USER_KEY: "x" * (MAX_USER_CHARS + 1)}) is None
    assert user_text(["not", "a", "mapping"]) is None
    assert user_text(None) is None
