"""What the approval tests of every framework adapter share.

A SQLite store file, an engine whose gate holds ``transfer`` for a person's
approval (its clock a ``FakeClock`` started at the real time, so that the CLI
in another process, which reads the real time, can still decide), the person
deciding through ``python -m guardrails approvals`` in a subprocess, and the
request as the store holds it.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from guardrails import Guardrails
from guardrails.approvals import SENTENCES, ApprovalGate, ApprovalRecord, Approvals
from guardrails.audit import AuditLog
from guardrails.store import MemoryStore, SQLiteStore
from guardrails.testing import FakeClock
from guardrails.verdicts import Reason

TTL = 600.0
PENDING = SENTENCES[Reason.APPROVAL_PENDING]
DENIED = SENTENCES[Reason.APPROVAL_DENIED]
EXPIRED = SENTENCES[Reason.APPROVAL_EXPIRED]
ARGS = {"amount": 900, "to": "bob"}
EDITED = {"amount": 9000, "to": "mallory"}


@dataclass
class Setup:
    """The store file, the gate's clock and the transfers that ran."""

    path: str
    clock: FakeClock = field(default_factory=lambda: FakeClock(time.time()))
    ran: list[dict[str, Any]] = field(default_factory=list)
    audit: AuditLog = field(default_factory=lambda: AuditLog(MemoryStore()))

    @property
    def url(self) -> str:
        return f"sqlite:///{self.path}"

    def rails(self, **engine: Any) -> Guardrails:
        """An engine whose gate holds every ``transfer`` (the framework's tool) for approval."""
        gate = ApprovalGate(
            SQLiteStore(self.path), ttl=TTL, rules={"transfer": "always"}, clock=self.clock
        )
        return Guardrails([], hooks=[gate, self.audit], recorder=[self.audit], **engine)

    def one_turn(self) -> None:
        """The audit shows one turn: one pre_turn, the call held then run, on one request."""
        rows = list(self.audit.rows())
        assert [r.kind for r in rows].count("pre_turn") == 1
        calls = [r for r in rows if r.kind == "tool_call"]
        assert [(r.outcome, r.reason) for r in calls] == [
            ("unavailable", "approval_pending"),
            ("ok", None),
        ]
        assert len({json.loads(r.detail or "{}").get("approval_request") for r in calls}) == 1

    def transfer(self) -> Callable[..., str]:
        """The tool's body: records each run with its arguments."""
        ran = self.ran

        def transfer(amount: int, to: str) -> str:
            """Send money."""
            ran.append({"amount": amount, "to": to})
            return f"sent {amount} to {to}"

        return transfer

    def requests(self, status: str | None = "pending") -> list[ApprovalRecord]:
        return Approvals(SQLiteStore(self.path)).list(status)

    def request(self) -> ApprovalRecord:
        """The one pending request."""
        [found] = self.requests()
        return found

    def decide(self, verb: str, request_id: str | None = None) -> None:
        """A person decides from another process, with the CLI."""
        decided = cli(verb, request_id or self.request().id, "--by", "alice", "--store", self.url)
        assert decided.returncode == 0, decided.stderr

    def expire(self) -> None:
        """Move the gate's clock past every request's expiry."""
        self.clock.advance(TTL + 1)


def cli(*args: str) -> subprocess.CompletedProcess[str]:
    """``python -m guardrails approvals ARGS`` in a process of its own."""
    return subprocess.run(
        [sys.executable, "-m", "guardrails", "approvals", *args],
        capture_output=True,
        text=True,
        timeout=120,
    )


def setup(tmp_path: Path) -> Setup:
    return Setup(str(tmp_path / "approvals.db"))
