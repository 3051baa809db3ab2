"""The model-facing sentences and the reasons are the literal text of docs/approvals.md."""

from __future__ import annotations

import re
from pathlib import Path

from guardrails import Guardrails, tool
from guardrails.approvals import ApprovalGate, Approvals
from guardrails.store import MemoryStore

PAGE = (Path(__file__).resolve().parents[2] / "docs" / "approvals.md").read_text()
ROW = re.compile(r"^\| `(approval_\w+)` \| (.+?) \|$", re.M)


def documented() -> dict[str, str]:
    rows = dict(ROW.findall(PAGE))
    assert set(rows) == {"approval_pending", "approval_denied", "approval_expired"}
    return rows


def test_the_model_reads_exactly_the_documented_sentence_for_each_reason() -> None:
    sentences = documented()
    store = MemoryStore()
    clock = [0.0]

    @tool(approval="always", effect=True)
    def wipe(disk: str) -> str:
        return "wiped"

    engine = Guardrails([wipe], hooks=[ApprovalGate(store, ttl=10, clock=lambda: clock[0])])
    people = Approvals(store, clock=lambda: clock[0])

    def call(disk: str) -> tuple[str, str, str]:
        result = engine.turn(session="s").call("wipe", {"disk": disk})
        return result.outcome.value, str(result.reason), result.content

    pending = call("a")
    assert pending == ("unavailable", "approval_pending", sentences["approval_pending"])
    people.deny(people.list()[0].id, by="p")
    assert call("a") == ("unavailable", "approval_denied", sentences["approval_denied"])
    call("b")
    clock[0] = 10.0
    assert call("b") == ("unavailable", "approval_expired", sentences["approval_expired"])
