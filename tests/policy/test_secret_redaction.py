"""A bound secret that a tool echoes in its result never reaches the model, in any integration."""

from __future__ import annotations

import json
from typing import Any

import pytest
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from guardrails import Guardrails, Outcome, Secret, Tool
from guardrails.audit import AuditLog
from guardrails.integrations.anthropic import tool_result_block
from guardrails.integrations.mcp import call_tool_result
from guardrails.integrations.openai import tool_message
from guardrails.middleware._render import FLAG_SECRET_REDACTED, REDACTED
from guardrails.observe.telemetry import ATTR_SECRET_REDACTED, OpenTelemetryRecorder
from guardrails.store import MemoryStore

SECRET = 'sk-live-"QUOTED"-7f3a'
SCHEMA = {"type": "object", "properties": {"mode": {"type": "string"}, "key": {"type": "string"}}}


def leaky(mode: str, key: str) -> Any:
    if mode == "text":
        return f"debug: authorised with {key} ok"
    if mode == "dict":
        return {"headers": {"Authorization": f"Bearer {key}"}, "items": [key, 1], key: "as a key"}
    if mode == "url":
        from urllib.parse import quote

        return f"GET https://api.example/v1?key={quote(key, safe='')}&q=1"
    if mode == "long":
        return "x" * 90 + key + "y" * 500  # the secret straddles the cut
    if mode == "pydantic":
        from pydantic import BaseModel

        class Echo(BaseModel):
            token: str

        return Echo(token=key)
    return "nothing to hide"


async def aleaky(mode: str, key: str) -> Any:
    return leaky(mode, key)


def _rails(fn: Any, **kw: Any) -> Guardrails:
    tool = Tool("leaky", fn, SCHEMA, bind={"key": Secret("api")}, effect=True)
    return Guardrails([tool], secrets=lambda name: SECRET, max_result_chars=100, **kw)


MODES = ["text", "dict", "long", "pydantic", "url"]


def _clean(text: str) -> None:
    from urllib.parse import quote

    assert quote(SECRET, safe="") not in text
    assert SECRET not in text
    assert json.dumps(SECRET)[1:-1] not in text
    assert "QUOTED" not in text


@pytest.mark.parametrize("mode", MODES)
def test_the_secret_is_replaced_in_what_the_model_sees(mode: str) -> None:
    result = _rails(leaky).call("leaky", {"mode": mode})
    assert result.outcome is Outcome.OK
    _clean(result.content)
    _clean(repr(result.value))
    assert REDACTED in result.content or result.truncated
    assert FLAG_SECRET_REDACTED in result.flags
    for shown in (
        json.dumps(tool_result_block(result, "tu_1")),
        json.dumps(tool_message(result, "call_1")),
        call_tool_result(result).model_dump_json(),
    ):
        _clean(shown)


@pytest.mark.parametrize("mode", MODES)
async def test_the_async_path_redacts_the_same(mode: str) -> None:
    result = await _rails(aleaky).acall("leaky", {"mode": mode})
    _clean(result.content)
    assert FLAG_SECRET_REDACTED in result.flags


def test_a_result_without_the_secret_is_untouched() -> None:
    result = _rails(leaky).call("leaky", {"mode": "none"})
    assert result.content == "nothing to hide" and result.flags == ()


def test_the_audit_row_and_span_record_that_it_happened_not_the_value() -> None:
    store = MemoryStore()
    audit = AuditLog(store)
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    rails = _rails(leaky, hooks=[audit], recorder=[audit, OpenTelemetryRecorder(provider)])
    rails.call("leaky", {"mode": "dict"})
    rows = store.audit_rows()
    detail = json.loads(rows[-1].detail or "{}")
    assert FLAG_SECRET_REDACTED in detail["flags"]
    assert all("QUOTED" not in repr(r) for r in rows)
    (span,) = exporter.get_finished_spans()
    assert span.attributes is not None and span.attributes[ATTR_SECRET_REDACTED] is True
    assert "QUOTED" not in repr(dict(span.attributes))
    provider.shutdown()


def test_the_public_strings_match_the_docs() -> None:
    from pathlib import Path

    doc = (Path(__file__).resolve().parents[2] / "docs" / "policy.md").read_text()
    assert f"`{REDACTED}`" in doc and f"`{FLAG_SECRET_REDACTED}`" in doc
    assert f"`{ATTR_SECRET_REDACTED}`" in doc


def test_a_value_that_cannot_be_rendered_again_shows_the_error_sentence() -> None:
    from guardrails.verdicts import model_sentence

    class Flaky:
        """Renders once (with the secret), then fails."""

        calls = 0

        def model_dump_json(self) -> str:
            Flaky.calls += 1
            if Flaky.calls > 1:
                raise RuntimeError("no more")
            return "x" * 95 + SECRET + "y" * 200

    def flaky(mode: str, key: str) -> Any:
        return Flaky()

    result = _rails(flaky).call("leaky", {"mode": "x"})
    assert result.outcome is Outcome.ERROR
    assert result.content == model_sentence(Outcome.ERROR)
    _clean(result.content)


def test_a_structured_value_that_cannot_be_walked_keeps_only_what_the_model_saw() -> None:
    class Odd(dict[str, Any]):
        def items(self) -> Any:
            raise RuntimeError("no items")

    def odd(mode: str, key: str) -> Any:
        return Odd(token=key)

    result = _rails(odd).call("leaky", {"mode": "x"})
    if result.outcome is Outcome.OK:
        _clean(result.content)
        _clean(repr(result.value))
