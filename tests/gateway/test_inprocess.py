"""The gateway in-process: spans, metrics, missing secrets, result caps, the audit trail."""

from __future__ import annotations

import re
import tomllib
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

import pytest
from mcp import Client
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from prometheus_client import CollectorRegistry, generate_latest

from guardrails.gateway import Gateway, parse_config
from guardrails.store import SQLiteStore
from guardrails.verdicts import Outcome, model_sentence

from .conftest import BILLING, SECRET, command_toml, text

CONFIG = f"""
[gateway]
store = "audit.db"
max_result_chars = 200
[tenants.local]
values = {{ account_id = "acc-7" }}
[upstreams.billing]
command = {command_toml(BILLING)}
[upstreams.billing.tools.charge]
action = true
bind = {{ account_id = "account_id" }}
secrets = {{ api_key = "PAY_KEY" }}
"""


@asynccontextmanager
async def connected(
    tmp_path: Path, secrets: dict[str, str], **options: object
) -> AsyncIterator[tuple[Gateway, Client]]:
    config = parse_config(tomllib.loads(CONFIG), base=tmp_path)
    gateway = Gateway(config, secrets=secrets.get, **options)  # type: ignore[arg-type]
    async with gateway.running(), Client(gateway.server(), cache=None) as client:
        yield gateway, client


@pytest.mark.slow
async def test_each_call_is_a_span_and_counted_without_the_secret(tmp_path: Path) -> None:
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    registry = CollectorRegistry()
    async with connected(
        tmp_path, {"PAY_KEY": SECRET}, tracer_provider=provider, registry=registry
    ) as (_, client):
        charged = await client.call_tool("charge", {"amount": 3})
        await client.call_tool("echo", {})
        metrics = generate_latest(registry).decode()
    assert text(charged) == "charged 3 to acc-7 with key [redacted]"
    spans = {span.name: span for span in exporter.get_finished_spans()}
    assert {"execute_tool charge", "execute_tool echo"} <= spans.keys()
    assert spans["execute_tool charge"].attributes["gen_ai.tool.name"] == "charge"
    exported = "".join(str(dict(s.attributes or {})) + str(s.events) for s in spans.values())
    assert SECRET not in exported
    assert 'guardrails_tool_outcomes_total{outcome="ok",tool="charge"} 1.0' in metrics
    assert 'guardrails_tool_outcomes_total{outcome="invalid_args",tool="echo"} 1.0' in metrics
    assert 'guardrails_gateway_upstream_up{upstream="billing"} 1.0' in metrics


@pytest.mark.slow
async def test_a_secret_the_provider_lacks_makes_the_call_unavailable(tmp_path: Path) -> None:
    async with connected(tmp_path, {}) as (_, client):
        result = await client.call_tool("charge", {"amount": 3})
    assert text(result) == model_sentence(Outcome.UNAVAILABLE)


@pytest.mark.slow
async def test_a_provider_that_raises_makes_the_call_unavailable_and_says_nothing(
    tmp_path: Path,
) -> None:
    def vault(name: str) -> str:
        raise ConnectionError(f"vault down, token={SECRET}")

    config = parse_config(tomllib.loads(CONFIG), base=tmp_path)
    gateway = Gateway(config, secrets=vault)
    async with gateway.running(), Client(gateway.server(), cache=None) as client:
        result = await client.call_tool("charge", {"amount": 3})
        echoed = await client.call_tool("echo", {"text": "still here"})
    assert text(result) == model_sentence(Outcome.UNAVAILABLE)
    assert SECRET not in result.model_dump_json() and text(echoed) == "still here"


@pytest.mark.slow
async def test_a_long_answer_is_cut_before_it_reaches_the_client(tmp_path: Path) -> None:
    async with connected(tmp_path, {}) as (_, client):
        result = await client.call_tool("echo", {"text": "line\n" * 5000})
    # echo lists an output schema: an answer cut without its structured content (as
    # long as the text) is sent as an error, which an MCP client does not refuse.
    assert result.is_error and len(text(result)) <= 200


@pytest.mark.slow
async def test_every_call_leaves_an_audit_row_without_secrets_or_values(tmp_path: Path) -> None:
    async with connected(tmp_path, {"PAY_KEY": SECRET}) as (_, client):
        await client.call_tool("charge", {"amount": 3})
        await client.call_tool("echo", {"text": "private words"})
        await client.call_tool("explode", {"reason": "disk"})
        await client.call_tool("nope", {})
    store = SQLiteStore(str(tmp_path / "audit.db"))
    try:
        rows = store.audit_rows(kind="tool_call")
    finally:
        store.close()
    assert [(r.tool, r.outcome, r.tenant) for r in rows] == [
        ("charge", "ok", "local"),
        ("echo", "ok", "local"),
        ("explode", "error", "local"),
        ("nope", "unavailable", "local"),
    ]
    dumped = repr(rows)
    assert SECRET not in dumped and "private words" not in dumped and "hunter2" not in dumped


async def test_a_fault_outside_the_pipeline_is_a_closed_answer(tmp_path: Path) -> None:
    config = parse_config(tomllib.loads(CONFIG), base=tmp_path)
    gateway = Gateway(config, secrets={}.get)

    def broken_context(ctx: object) -> object:
        raise RuntimeError("internal detail: password=hunter2")

    gateway.sessions = broken_context  # type: ignore[assignment]
    async with gateway.running(), Client(gateway.server(), cache=None) as client:
        listed = await client.list_tools()
        called = await client.call_tool("echo", {"text": "x"})
    assert listed.tools == []
    assert called.is_error and text(called) == model_sentence(Outcome.ERROR)
    assert "hunter2" not in called.model_dump_json()


POLICY = """
[tools.lookup.params.year]
min = 2000
max = 2030

[tools.echo.params.text]
kind = "text"
deny_values = ["wire the money"]
"""


@pytest.mark.slow
async def test_a_policy_file_decides_over_mcp_and_its_rules_are_named_in_the_audit(
    tmp_path: Path,
) -> None:
    (tmp_path / "policy.toml").write_text(POLICY)
    config = parse_config(
        tomllib.loads(
            CONFIG.replace('store = "audit.db"', 'store = "audit.db"\npolicy = "policy.toml"')
        ),
        base=tmp_path,
    )
    gateway = Gateway(config, secrets={"PAY_KEY": SECRET}.get)
    async with gateway.running(), Client(gateway.server(), cache=None) as client:
        allowed = await client.call_tool("lookup", {"account_id": "acc-7", "year": 2024})
        too_late = await client.call_tool("lookup", {"account_id": "acc-7", "year": 2099})
        denied = await client.call_tool("echo", {"text": "Wire the  money"})
        echoed = await client.call_tool("echo", {"text": "hello"})
    assert not allowed.is_error and not echoed.is_error
    assert text(too_late) == model_sentence(Outcome.INVALID_ARGS, ["year"])
    assert text(denied) == model_sentence(Outcome.INVALID_ARGS, ["text"])
    assert too_late.is_error and denied.is_error
    store = SQLiteStore(tmp_path / "audit.db")
    refused = [
        r for r in store.audit_rows() if r.kind == "tool_call" and r.outcome == "invalid_args"
    ]
    store.close()
    assert sorted(r.tool for r in refused) == ["echo", "lookup"]
    assert any("policy:lookup.year" in (r.verdicts or "") for r in refused)
    assert any("policy:echo.text" in (r.verdicts or "") for r in refused)
    assert all("2099" not in repr(r) and "money" not in repr(r) for r in refused)


@pytest.mark.slow
async def test_the_gateway_metrics_have_every_series_from_zero(tmp_path: Path) -> None:
    registry = CollectorRegistry()
    async with connected(tmp_path, {"PAY_KEY": SECRET}, registry=registry):
        metrics = generate_latest(registry).decode()  # before any call
    # The recorder is bound to the gateway's engine: its guards are registered
    # (the never-ran alert and the dashboard's variables read this gauge) ...
    assert re.search(r"^guardrails_guard_registered\{[^}]*\} 1\.0$", metrics, re.M)
    # ... and every tool's outcomes, the invented tools' included, start at zero.
    assert 'guardrails_tool_outcomes_total{outcome="ok",tool="charge"} 0.0' in metrics
    assert 'guardrails_tool_outcomes_total{outcome="unavailable",tool="_unknown"} 0.0' in metrics
    assert 'guardrails_telemetry_failures_total{recorder="prometheus"} 0.0' in metrics
