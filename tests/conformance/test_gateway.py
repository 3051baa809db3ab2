"""The gateway held to the conformance table, over stdio and over streamable HTTP.

A real ``guardrails gateway`` process in front of the scenario's tools as an
MCP server (``bank.py``, its upstream over stdio), and a real ``mcp`` client
playing the model. The gateway's rules are its configuration: the tenant's
allow-list, the bound ``account_id`` from the tenant's values, and a policy
file whose rule on ``transfer.amount`` answers ``limit``. One gateway serves
every row of a transport (starting one per row would cost seconds each); each
row reads the audit rows, spans and bodies it added: the rows from the
gateway's SQLite store, the spans from the JSON lines ``spans/sitecustomize.py``
makes the gateway write, the bodies from the file the upstream appends to.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

import pytest
from mcp import Client

from guardrails.store import SQLiteStore
from tests.conformance import harness as hs
from tests.conformance import scenario as sc
from tests.conformance import table as tb
from tests.conformance.test_mcp import _calls, received
from tests.gateway.conftest import (
    PY,
    ROOT,
    TOKENS,
    command_toml,
    http_client,
    http_gateway,
    stdio_client,
    write_config,
)

ENTRY = "gateway"
HERE = Path(__file__).parent
BANK = [PY, str(HERE / "bank.py")]
POLICY = f"""
[tools.transfer.params.amount]
max = {sc.LIMIT}
outcome = "limit"
name = "over_limit"
"""


def _config(tmp_path: Path) -> Path:
    (tmp_path / "policy.toml").write_text(POLICY)
    ran = tmp_path / "ran.txt"
    body = f"""
[tenants.{sc.TENANT}]
tools = {json.dumps(list(sc.OFFERED))}
values = {{ account_id = "{sc.ACCOUNT}" }}

[upstreams.bank]
command = {command_toml(BANK)}
env = {{ BANK_RAN = "{ran}", PYTHONPATH = "{ROOT}" }}

[upstreams.bank.tools.balance]
bind = {{ account_id = "account_id" }}

[upstreams.bank.tools.transfer]
approval = "{sc.APPROVALS["transfer"]}"
"""
    gateway = f'max_result_chars = {sc.MAX_RESULT}\npolicy = "policy.toml"\n'
    return write_config(tmp_path, body, gateway=gateway)


def _env(tmp_path: Path) -> dict[str, str]:
    return {
        "CONFORMANCE_SPANS": str(tmp_path / "spans.jsonl"),
        "PYTHONPATH": f"{HERE / 'spans'}:{ROOT}",
    }


@asynccontextmanager
async def _client(transport: str, tmp_path: Path) -> AsyncIterator[Client]:
    config, env = _config(tmp_path), _env(tmp_path)
    if transport == "stdio":
        async with stdio_client(config, env) as client:
            yield client
        return
    async with (
        http_gateway(config, env) as (url, _),
        http_client(url, TOKENS[sc.TENANT], sc.SESSION) as client,
    ):
        yield client


class _Since:
    """What the gateway added since the last row: audit rows, spans, bodies run."""

    def __init__(self, tmp_path: Path) -> None:
        self.tmp_path = tmp_path
        self.audit_id = 0
        self.spans = 0
        self.ran = 0

    def _lines(self, name: str) -> list[str]:
        path = self.tmp_path / name
        return path.read_text().splitlines() if path.exists() else []

    def observed(self, answers: list[hs.Received]) -> hs.Observed:
        store = SQLiteStore(str(self.tmp_path / "audit.db"))
        try:
            rows = store.audit_rows(after_id=self.audit_id, limit=10_000)
        finally:
            store.close()
        spans = self._lines("spans.jsonl")[self.spans :]
        ran = self._lines("ran.txt")[self.ran :]
        self.audit_id = max([self.audit_id, *(r.id or 0 for r in rows)])
        self.spans += len(spans)
        self.ran += len(ran)
        lines = [json.loads(line) for line in spans]
        return hs.Observed(tuple(answers), tuple(ran), tuple(rows), hs.spans_of_lines(lines))


@pytest.mark.parametrize("transport", ["stdio", "http"])
@pytest.mark.slow
async def test_gateway_answers_as_the_table_says(transport: str, tmp_path: Path) -> None:
    failures: list[str] = []
    async with _client(transport, tmp_path) as client:
        listed = await client.list_tools()
        assert sorted(t.name for t in listed.tools) == sorted(sc.OFFERED)
        assert "account_id" not in next(
            t for t in listed.tools if t.name == "balance"
        ).input_schema.get("properties", {})
        since = _Since(tmp_path)
        since.observed([])  # the listing's rows
        for row in tb.ROWS:
            if not hs.applies(ENTRY, row):
                hs.check_not_applicable(ENTRY, row)
                continue
            answers = [received(r) for r in await _calls(client, row)]
            try:
                hs.check(ENTRY, row, since.observed(answers))
            except AssertionError as exc:
                failures.append(f"{row.id}: {exc}")
    assert not failures, "\n".join(failures)
