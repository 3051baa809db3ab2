"""Snapshot before mutate: no snapshot, no mutation."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from guardrails import Guardrails, Outcome, tool
from guardrails.audit import AuditLog
from guardrails.effects import Snapshots
from guardrails.store import MemoryStore, SQLiteStore, Store

TABLES: dict[str, list[str]] = {}


def current_rows(args: Any) -> list[str]:
    return list(TABLES[args["table"]])


@tool(effect=True, options={"snapshot": current_rows, "snapshot_key": "table-{table}"})
def truncate(table: str) -> str:
    TABLES[table] = []
    return "truncated"


def _rails(store: Store, hook: Snapshots) -> tuple[Guardrails, AuditLog]:
    audit = AuditLog(store)
    return Guardrails([truncate], hooks=[audit, hook], recorder=[audit]), audit


def test_the_snapshot_is_stored_versioned_before_the_tool_runs(store: Store) -> None:
    TABLES["users"] = ["ann", "bob"]
    rails, audit = _rails(store, Snapshots(store))
    assert rails.call("truncate", {"table": "users"}).outcome is Outcome.OK
    TABLES["users"] = ["cid"]
    result = rails.call("truncate", {"table": "users"})
    first, second = store.snapshot("table-users", 1), store.snapshot("table-users", 2)
    assert first is not None and json.loads(first.data) == ["ann", "bob"]
    assert second is not None and json.loads(second.data) == ["cid"]
    (row,) = audit.rows(call_id=result.call_id, kind="tool_call")
    assert json.loads(row.detail or "{}")["snapshot"] == {"key": "table-users", "version": 2}


def test_a_snapshot_that_cannot_be_taken_stops_the_mutation_with_error() -> None:
    store = MemoryStore()
    rails, audit = _rails(store, Snapshots(store))
    TABLES.pop("ghosts", None)
    result = rails.call("truncate", {"table": "ghosts"})
    assert (result.outcome, result.reason) == (Outcome.ERROR, "snapshot_failed")
    assert "ghosts" not in TABLES
    (row,) = audit.rows(call_id=result.call_id, kind="tool_call")
    assert (row.reason, row.exception) == ("snapshot_failed", "KeyError")


def test_a_snapshot_that_cannot_be_stored_stops_the_mutation(tmp_path: Path) -> None:
    TABLES["users"] = ["ann"]
    broken = SQLiteStore(tmp_path / "missing" / "snap.db")
    rails, _ = _rails(MemoryStore(), Snapshots(broken))
    result = rails.call("truncate", {"table": "users"})
    assert (result.outcome, result.reason) == (Outcome.ERROR, "snapshot_failed")
    assert TABLES["users"] == ["ann"]


def test_a_user_callback_can_keep_the_snapshots() -> None:
    kept: list[tuple[str, bytes]] = []

    def save(key: str, data: bytes) -> int:
        kept.append((key, data))
        return len(kept)

    TABLES["users"] = ["ann"]
    rails, _ = _rails(MemoryStore(), Snapshots(save=save))
    rails.call("truncate", {"table": "users"})
    assert kept == [("table-users", b'["ann"]')]
