"""Two gateway replicas sharing PostgreSQL: one session ceiling, one idempotency key, one
budget, one log."""

from __future__ import annotations

from pathlib import Path
from urllib.parse import quote

import pytest
from psycopg.conninfo import conninfo_to_dict

from guardrails.store import PostgresStore
from guardrails.store.testing import postgres_dsn
from guardrails.verdicts import Outcome, model_sentence

from .conftest import BILLING, TOKENS, command_toml, http_client, http_gateway, text, write_config

pytestmark = pytest.mark.postgres

BODY = f"""
[tenants.acme]
values = {{ account_id = "acc-7" }}

[upstreams.billing]
command = {command_toml(BILLING)}

[upstreams.billing.tools.charge]
action = true
bind = {{ account_id = "account_id" }}
secrets = {{ api_key = "PAY_KEY" }}
idempotency_key = ["amount"]

[upstreams.billing.tools.pid]
cost = 1
daily_cap = 3
instance_cap = 2
"""


def store_url(scoped: str) -> str:
    """The fixture's schema as a postgresql:// URL (what the gateway's ``store`` takes)."""
    base = postgres_dsn()
    assert base is not None and base.startswith(("postgresql://", "postgres://"))
    options = conninfo_to_dict(scoped)["options"]
    return f"{base}{'&' if '?' in base else '?'}options={quote(str(options))}"


@pytest.mark.slow
async def test_two_replicas_share_ceilings_idempotency_and_the_audit_log(
    tmp_path: Path, pg_dsn: str
) -> None:
    url = store_url(pg_dsn)
    config = write_config(tmp_path, BODY, store=url, gateway="max_calls_per_session = 3")
    token = TOKENS["acme"]
    async with http_gateway(config) as (one, _), http_gateway(config) as (two, _):
        assert one != two
        echoed = []
        for replica in (one, two, one, two):
            async with http_client(replica, token, "shared") as client:
                echoed.append(text(await client.call_tool("echo", {"text": "x"})))
        charged = []
        for replica in (one, two):
            async with http_client(replica, token, "payments") as client:
                charged.append(text(await client.call_tool("charge", {"amount": 5})))
        paid = []
        for replica, session in ((one, "b1"), (two, "b1"), (one, "b1"), (two, "b2"), (one, "b2")):
            async with http_client(replica, token, session) as client:
                paid.append((await client.call_tool("pid", {})).is_error)
    assert echoed == ["x", "x", "x", model_sentence(Outcome.LIMIT)]
    assert charged == ["charged 5 to acc-7 with key [redacted]"] * 2
    store = PostgresStore(pg_dsn)
    try:
        rows = store.audit_rows(kind="tool_call", tool="charge")
    finally:
        store.close()
    assert sorted(str(r.reason) for r in rows) == ["None", "replayed"]
    # b1: two calls, then its instance cap (2); b2: one call, then the daily cap (3).
    assert paid == [False, False, True, False, True]
    store = PostgresStore(pg_dsn)
    try:
        refusals = [r.reason for r in store.audit_rows(kind="paid_call") if r.outcome == "limit"]
    finally:
        store.close()
    assert refusals == ["instance_cap", "daily_cap"]
