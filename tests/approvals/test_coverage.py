"""``guardrails coverage --audit`` counts approvals per tool from the audit log."""

from __future__ import annotations

import io
import json
from pathlib import Path

from guardrails import Guardrails, tool
from guardrails.approvals import ApprovalGate, Approvals
from guardrails.audit import AuditLog
from guardrails.observe.coverage import load_audit
from guardrails.store import SQLiteStore


def test_coverage_counts_answers_decisions_and_approved_runs_per_tool(tmp_path: Path) -> None:
    path = tmp_path / "g.db"
    store = SQLiteStore(str(path))
    now = [0.0]

    @tool(approval="always", effect=True)
    def wipe(disk: str) -> str:
        return "wiped"

    engine = Guardrails(
        [wipe], hooks=[AuditLog(store), ApprovalGate(store, ttl=10, clock=lambda: now[0])]
    )
    people = Approvals(store, clock=lambda: now[0])

    def call(disk: str) -> str:
        return str(engine.turn(session="s").call("wipe", {"disk": disk}).reason)

    call("a")
    people.approve(people.list()[0].id, by="alice")
    call("a")  # runs
    call("b")
    people.deny(people.list()[0].id, by="bob")
    call("b")  # denied
    call("c")
    now[0] = 10.0
    call("c")  # expired, and a new request
    store.close()
    report = load_audit(f"sqlite:///{path}")
    assert report.approvals == {
        "wipe": {
            "approval_pending": 3,
            "approval_denied": 1,
            "approval_expired": 1,
            "approved": 1,
            "denied": 1,
            "ran_approved": 1,
        }
    }
    assert json.loads(json.dumps(report.to_json()))["approvals"] == [
        {"tool": "wipe", **report.approvals["wipe"]}
    ]
    table = io.StringIO()
    report.render_table(table)
    assert "TOOL (APPROVALS)  APPROVAL_PENDING" in table.getvalue()
