"""store.held: event rows held in a block are committed, in order, when the block ends."""

from __future__ import annotations

import time
from pathlib import Path

from guardrails.store import AuditRow, MemoryStore, SQLiteStore, offloop
from guardrails.store.held import held, hold


def _row(kind: str) -> AuditRow:
    return AuditRow(kind, time.time(), None, "t", "s", None, None, None)


async def test_rows_held_in_a_block_are_committed_in_order_when_it_ends(tmp_path: Path) -> None:
    store = SQLiteStore(str(tmp_path / "audit.db"))
    try:
        async with held():
            assert hold(store, _row("pre_turn"))
            await offloop.append(store, _row("tool_call"))
        assert [r.kind for r in store.audit_rows()] == ["pre_turn", "tool_call"]
    finally:
        store.close()


async def test_outside_a_block_or_on_a_store_that_never_blocks_nothing_is_held(
    tmp_path: Path,
) -> None:
    store = SQLiteStore(str(tmp_path / "audit.db"))
    try:
        assert not hold(store, _row("pre_turn"))
        async with held():
            assert not hold(MemoryStore(), _row("pre_turn"))
        assert store.audit_rows() == []
    finally:
        store.close()
