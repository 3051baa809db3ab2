"""``guardrails coverage --audit``: the same coverage from the audit log as from the metrics."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any
from urllib.parse import quote

import pytest
from prometheus_client import CollectorRegistry

from guardrails import Guardrails, GuardResult, NotConfigured, Verdict, guard, tool
from guardrails.audit import AuditLog
from guardrails.cli import main as cli
from guardrails.observe.coverage import from_exposition, load_audit
from guardrails.observe.metrics import PrometheusRecorder
from guardrails.rules.effects import Perform
from guardrails.store import open_store
from guardrails.store.testing import postgres_dsn, postgres_required, temporary_schema


@tool
def lookup(key: str) -> str:
    """Look a key up."""
    if key == "crash":
        raise RuntimeError("backend down")
    return key


@guard(tools=["lookup"], outcome="invalid_args")
def short_key(call: Any) -> Verdict:
    return Verdict.PASS if len(call.arguments["key"]) < 6 else Verdict.REJECT


@guard(tools=["lookup"])
def configured(call: Any) -> Verdict:
    if call.arguments["key"] == "new":
        raise NotConfigured("no rule")
    return Verdict.PASS


@guard(at="pre_turn")
def no_weather(request: Any) -> GuardResult | Verdict:
    return GuardResult.rejected("weather") if "weather" in request.text.raw else Verdict.PASS


@guard(at="post_run")
def promised_call(run: Any) -> GuardResult | Verdict:
    if run.text and "we will call you" in run.text and not run.called_ok("lookup"):
        return GuardResult.rejected("promise", evidence=Perform("lookup", {"key": "cb"}))
    return Verdict.PASS


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def location(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    """A store URL as a user would type it: sqlite:///path, or postgresql://..."""
    if request.param == "sqlite":
        yield f"sqlite:///{tmp_path / 'audit.db'}"
        return
    dsn = postgres_dsn()
    if dsn is None:
        if postgres_required():
            pytest.fail("GUARDRAILS_REQUIRE_POSTGRES=1 but GUARDRAILS_POSTGRES_DSN is not set")
        pytest.skip("no PostgreSQL server: set GUARDRAILS_POSTGRES_DSN")
    from psycopg.conninfo import conninfo_to_dict

    with temporary_schema(dsn) as scoped:
        # The same schema, as a postgresql:// URL with its search_path.
        options = conninfo_to_dict(scoped)["options"]
        yield f"{dsn}{'&' if '?' in dsn else '?'}options={quote(str(options))}"


@pytest.fixture
def store_url(
    location: str, registry: CollectorRegistry, scrape: Callable[[], str]
) -> tuple[str, str]:
    url = location
    store = open_store(url)
    audit = AuditLog(store)
    metrics = PrometheusRecorder(registry)
    rails = Guardrails(
        [lookup],
        [short_key, configured, no_weather, promised_call],
        hooks=[audit],
        recorder=[audit, metrics],
    )
    for i in range(40):
        turn = rails.turn(tenant="acme", session=f"s-{i}")
        turn.pre_turn("what is the weather" if i % 5 == 0 else "hello", ["lookup"])
        for key in ("ab", "abcdefgh", "new", "crash"):
            turn.call("lookup", {"key": key})
        turn.call("invented_tool", {})
        turn.post_run("we will call you" if i % 4 == 0 else "done")
    store.close()
    return url, scrape()


def test_the_audit_log_gives_the_same_coverage_as_the_metrics(store_url: tuple[str, str]) -> None:
    url, exposition = store_url
    audit = load_audit(url)
    metrics = from_exposition(exposition)
    assert [g.to_json() | {"registered": False} for g in audit.guards] == [
        g.to_json() | {"registered": False} for g in metrics.guards
    ]
    assert audit.tools == metrics.tools
    assert audit.tools["_unknown"] == {
        "error": 0,
        "invalid_args": 0,
        "limit": 0,
        "ok": 0,
        "unavailable": 40,
    }
    # Promised a call (i % 4 == 0) in a turn where lookup never ran (refused: i % 5 == 0).
    assert metrics.backstop == {("promised_call", "lookup"): 2}
    assert audit.backstop == metrics.backstop


def test_the_command_reads_an_audit_store(
    store_url: tuple[str, str], capsys: pytest.CaptureFixture[str]
) -> None:
    url, _ = store_url
    assert cli(["coverage", "--audit", url, "--format", "json"]) == 0
    guards = {g["guard"]: g for g in json.loads(capsys.readouterr().out)["guards"]}
    # 8 of the 40 turns were refused at pre_turn: nothing was offered, no guard ran.
    assert guards["configured"]["escapes"] == {"not_configured": 32}
    assert guards["no_weather"]["reject"] == 8


def test_a_missing_store_or_no_source_exits_2(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    missing = tmp_path / "nothing.db"
    assert cli(["coverage", "--audit", f"sqlite:///{missing}"]) == 2
    assert not missing.exists()
    assert cli(["coverage"]) == 2
    assert "either an exposition" in capsys.readouterr().err
