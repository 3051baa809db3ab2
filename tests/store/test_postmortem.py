"""Every query of docs/postmortem.md runs on SQLite and PostgreSQL and finds what it should."""

from __future__ import annotations

import re
import sqlite3
from pathlib import Path
from typing import Any

import pytest
from opentelemetry.sdk.trace import TracerProvider

from guardrails import Guardrails, GuardResult, Invocation, Verdict, guard, tool
from guardrails.audit import AuditLog
from guardrails.effects import Idempotency, PaidCall, Snapshots, Usage
from guardrails.observe.telemetry import OpenTelemetryRecorder
from guardrails.store import AuditRow, PostgresStore, SQLiteStore, Store

PAGE = Path(__file__).resolve().parents[2] / "docs" / "postmortem.md"
QUERIES = re.findall(r"```sql\n(.*?)```", PAGE.read_text(), re.S)


def _for(dialect: str) -> list[str]:
    other = "-- postgresql" if dialect == "sqlite" else "-- sqlite"
    return [q for q in QUERIES if not q.startswith(other)]


@guard
def flaky(call: Invocation) -> Verdict:
    raise TimeoutError("slow")


@guard(outcome="invalid_args")
def no_drafts(call: Invocation) -> GuardResult | Verdict:
    return (
        GuardResult.rejected("draft") if call.arguments.get("brief_id") == "draft" else Verdict.PASS
    )


def _populate(store: Store) -> None:
    paid = PaidCall(store, usage=lambda _: Usage(100, 50, 0.4), instance_cap=1.0)

    @tool(
        effect=True,
        options={"idempotency_key": "publish-{brief_id}", "snapshot": lambda a: {"was": "draft"}},
    )
    def publish(brief_id: str) -> str:
        return str(paid(lambda: "published"))

    audit = AuditLog(store)
    spans = OpenTelemetryRecorder(TracerProvider())  # rows keep their span's ids
    rails = Guardrails(
        [publish],
        [flaky, no_drafts],
        hooks=[audit, spans.hook(), Idempotency(store), Snapshots(store)],
        recorder=[audit, spans],
    )
    turn = rails.turn(tenant="acme", session="s-1", agent="writer", workflow="wf-1")
    for brief in ["b-1", "b-1", "b-2", "b-3", "draft"]:
        turn.call("publish", {"brief_id": brief})
    store.append(AuditRow("call_started", 1.0, "crashed-call", session="s-1", tool="publish"))
    store.append(AuditRow("tool_call", 2.0, "probe-\udc80", session="s-1", tool="publish"))


def _check(rows_per_query: list[list[Any]]) -> None:
    assert len(rows_per_query) == len(_for("sqlite"))
    assert all(rows_per_query), [QUERIES[i][:60] for i, r in enumerate(rows_per_query) if not r]


def test_the_page_has_queries_for_both_dialects() -> None:
    assert len(QUERIES) >= 10
    assert len(_for("sqlite")) == len(_for("postgresql"))


def test_every_query_runs_on_sqlite(tmp_path: Path) -> None:
    with SQLiteStore(tmp_path / "audit.db") as store:
        _populate(store)
    conn = sqlite3.connect(tmp_path / "audit.db")
    _check([conn.execute(q).fetchall() for q in _for("sqlite")])
    conn.close()


@pytest.mark.postgres
def test_every_query_runs_on_postgresql(pg_dsn: str) -> None:
    import psycopg

    with PostgresStore(pg_dsn) as store:
        _populate(store)
    with psycopg.connect(pg_dsn) as conn:
        _check([conn.execute(q).fetchall() for q in _for("postgresql")])
