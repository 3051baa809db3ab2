"""What only the SQLite store does: WAL, migrations, the append-only triggers."""

from __future__ import annotations

import multiprocessing
import sqlite3
from pathlib import Path
from typing import Any

import pytest

from guardrails.store import AuditRow, SQLiteStore, StoreUnavailable, open_store
from guardrails.store._migrations import migrations
from guardrails.store.verify import verify

LATEST = migrations("sqlite")[-1][0]


def test_a_new_file_gets_the_schema_in_wal_mode(tmp_path: Path) -> None:
    store = SQLiteStore(tmp_path / "a.db")
    store.append(AuditRow("tool_call", 1.0))
    conn = sqlite3.connect(tmp_path / "a.db")
    assert conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    assert conn.execute("SELECT MAX(version) FROM guardrails_schema").fetchone()[0] == LATEST
    conn.close()
    store.close()


def test_reopening_keeps_rows_and_does_not_migrate_twice(tmp_path: Path) -> None:
    with SQLiteStore(tmp_path / "a.db") as first:
        first.append(AuditRow("tool_call", 1.0))
    with SQLiteStore(tmp_path / "a.db") as second:
        second.append(AuditRow("tool_call", 2.0))
        assert [r.at for r in second.audit_rows()] == [1.0, 2.0]
    conn = sqlite3.connect(tmp_path / "a.db")
    assert conn.execute("SELECT COUNT(*) FROM guardrails_schema").fetchone()[0] == LATEST
    conn.close()


@pytest.mark.parametrize(
    "statement",
    ["UPDATE guardrails_audit SET outcome = 'ok'", "DELETE FROM guardrails_audit"],
)
def test_audit_rows_cannot_be_changed_even_with_raw_sql(tmp_path: Path, statement: str) -> None:
    with SQLiteStore(tmp_path / "a.db") as store:
        store.append(AuditRow("tool_call", 1.0, outcome="error"))
    conn = sqlite3.connect(tmp_path / "a.db")
    with pytest.raises(sqlite3.IntegrityError, match="append-only"):
        conn.execute(statement)
    conn.close()


def test_a_file_in_a_missing_directory_is_store_unavailable_on_first_use(tmp_path: Path) -> None:
    store = SQLiteStore(tmp_path / "missing" / "a.db")
    with pytest.raises(StoreUnavailable):
        store.append(AuditRow("tool_call", 1.0))


def test_in_memory_sqlite_is_refused_at_construction() -> None:
    with pytest.raises(ValueError, match="MemoryStore"):
        SQLiteStore(":memory:")


def test_open_store_picks_the_implementation_from_the_url(tmp_path: Path) -> None:
    assert type(open_store("memory:")).__name__ == "MemoryStore"
    assert type(open_store(f"sqlite:///{tmp_path}/x.db")).__name__ == "SQLiteStore"
    assert type(open_store(str(tmp_path / "y.db"))).__name__ == "SQLiteStore"


def _open_and_append(path: str, barrier: Any, queue: Any) -> None:
    store = SQLiteStore(path)
    barrier.wait()
    try:
        store.append(AuditRow("tool_call", 1.0))
        queue.put("ok")
    except StoreUnavailable as exc:
        queue.put(repr(exc))
    store.close()


@pytest.mark.slow
def test_eight_processes_opening_a_new_file_at_once_all_get_the_schema(tmp_path: Path) -> None:
    ctx = multiprocessing.get_context("fork")
    for attempt in range(12):
        path = str(tmp_path / f"new-{attempt}.db")
        barrier, queue = ctx.Barrier(8), ctx.Queue()
        procs = [
            ctx.Process(target=_open_and_append, args=(path, barrier, queue)) for _ in range(8)
        ]
        for p in procs:
            p.start()
        assert [queue.get(timeout=60) for _ in procs] == ["ok"] * 8
        for p in procs:
            p.join(timeout=30)
        with SQLiteStore(path) as store:
            assert len(store.audit_rows()) == 8


# -- the append path: a plain INSERT after the head this store last wrote --------------


def _statements(store: SQLiteStore) -> list[str]:
    # The trace repeats a statement's text for each trigger it runs (no_replace).
    seen: list[str] = []
    store._conn().set_trace_callback(seen.append)
    return seen


def test_an_append_after_the_first_is_one_insert_and_no_transaction_around_it(
    tmp_path: Path,
) -> None:
    store = SQLiteStore(tmp_path / "a.db")
    store.append(AuditRow("tool_call", 1.0))  # the first reads the head in SQL
    seen = _statements(store)
    assert store.append(AuditRow("tool_call", 2.0)) == 2
    assert len(set(seen)) == 1 and seen[0].startswith("INSERT INTO guardrails_audit (id, ")
    store.close()


def test_an_audited_read_only_call_commits_once(tmp_path: Path) -> None:
    from guardrails import Guardrails, tool
    from guardrails.audit import AuditLog

    @tool
    def lookup(order_id: str) -> str:
        return order_id

    store = SQLiteStore(tmp_path / "a.db")
    audit = AuditLog(store)
    turn = Guardrails([lookup], hooks=[audit], recorder=[audit]).turn(tenant="t", session="s")
    turn.call("lookup", {"order_id": "o-1"})
    seen = _statements(store)
    assert turn.call("lookup", {"order_id": "o-2"}).content == "o-2"
    assert len(set(seen)) == 1 and seen[0].startswith("INSERT INTO guardrails_audit (id, ")
    store.close()


def test_appends_from_two_stores_taking_turns_form_one_chain(tmp_path: Path) -> None:
    from guardrails.store.verify import verify

    first, second = SQLiteStore(tmp_path / "a.db"), SQLiteStore(tmp_path / "a.db")
    ids = [s.append(AuditRow("tool_call", float(n))) for n in range(20) for s in (first, second)]
    assert ids == list(range(1, 41))
    found = verify(first)
    assert found.ok and found.rows == 40, found.line()
    first.close()
    second.close()


def test_after_another_writer_appends_each_append_is_still_one_statement(
    tmp_path: Path,
) -> None:
    first, second = SQLiteStore(tmp_path / "a.db"), SQLiteStore(tmp_path / "a.db")
    first.append(AuditRow("tool_call", 1.0))
    second.append(AuditRow("tool_call", 2.0))
    seen = _statements(first)
    assert first.append(AuditRow("tool_call", 3.0)) == 3  # the plain INSERT fails: id 2 is taken
    assert first.append(AuditRow("tool_call", 4.0)) == 4  # the head is where it was left
    assert first.append(AuditRow("tool_call", 5.0)) == 5  # so the plain INSERT again
    assert not [s for s in seen if s.startswith(("BEGIN", "COMMIT", "SELECT"))]
    inserts = [s for i, s in enumerate(seen) if i == 0 or s != seen[i - 1]]
    assert ["RETURNING" in s for s in inserts] == [False, True, True, False]
    first.close()
    second.close()


def test_a_head_hint_that_is_behind_is_caught_under_the_write_lock(tmp_path: Path) -> None:
    from guardrails.store.verify import verify

    store = SQLiteStore(tmp_path / "a.db")
    store.append(AuditRow("tool_call", 1.0))
    behind = store._head
    store.append(AuditRow("tool_call", 2.0))
    store._head = behind  # as if another writer had appended since
    assert store.append(AuditRow("tool_call", 3.0)) == 3
    found = verify(store)
    assert found.ok and found.rows == 3, found.line()
    store.close()


def _append_in_child(store: SQLiteStore, barrier: Any, queue: Any) -> None:
    barrier.wait()
    queue.put([store.append(AuditRow("tool_call", 1.0)) for _ in range(25)])
    store.close()


@pytest.mark.slow
def test_children_forked_with_the_parents_head_hint_keep_one_chain(tmp_path: Path) -> None:
    from guardrails.store.verify import verify

    store = SQLiteStore(tmp_path / "a.db")
    store.append(AuditRow("tool_call", 0.0))  # every child starts with this hint
    ctx = multiprocessing.get_context("fork")
    barrier, queue = ctx.Barrier(4), ctx.Queue()
    procs = [ctx.Process(target=_append_in_child, args=(store, barrier, queue)) for _ in range(4)]
    for p in procs:
        p.start()
    ids = sorted(i for _ in procs for i in queue.get(timeout=120))
    for p in procs:
        p.join(timeout=60)
        assert p.exitcode == 0
    assert store.append(AuditRow("tool_call", 9.0)) == 102
    assert ids == list(range(2, 102))
    found = verify(store)
    assert found.ok and found.rows == 102, found.line()
    store.close()


# -- a forked child opens its own connections (os.register_at_fork, not a getpid per call) --


def _report_connection(store: SQLiteStore, parents: list[int], queue: Any) -> None:
    try:
        store.append(AuditRow("tool_call", 2.0))
        queue.put(("ok", id(store._local.conn) not in parents, store._local.parked is None))
    except BaseException as exc:  # the parent fails the test on anything but "ok"
        queue.put((repr(exc), False, False))


def test_a_forked_child_opens_its_own_connection_and_the_chain_holds(tmp_path: Path) -> None:
    ctx = multiprocessing.get_context("fork")
    store = SQLiteStore(tmp_path / "a.db")
    store.append(AuditRow("tool_call", 1.0))
    opened = store._local.conn
    assert opened is not None
    for _ in range(2):
        queue = ctx.Queue()
        child = ctx.Process(target=_report_connection, args=(store, [id(opened)], queue))
        child.start()
        assert queue.get(timeout=60) == ("ok", True, True)
        child.join(timeout=30)
        assert child.exitcode == 0
        assert store._local.conn is opened  # the parent's thread keeps its own
        store.append(AuditRow("tool_call", 3.0))  # after the head the child moved
    assert [r.at for r in store.audit_rows()] == [1.0, 2.0, 3.0, 2.0, 3.0]
    assert verify(store).ok
    store.close()


def test_a_child_forked_in_a_refused_pass_forgets_the_parked_connection(tmp_path: Path) -> None:
    ctx = multiprocessing.get_context("fork")
    store = SQLiteStore(tmp_path / "a.db")
    store.append(AuditRow("tool_call", 1.0))
    opened = store._local.conn
    queue = ctx.Queue()
    with store.one_pass():
        store._refuse("locked")  # as a wait for the lock that ran out parks the connection
        child = ctx.Process(target=_resume_and_append, args=(store, [id(opened)], queue))
        child.start()
        assert queue.get(timeout=60) == ("ok", True, True)
        child.join(timeout=30)
    assert store._local.conn is opened
    store.close()


def _resume_and_append(store: SQLiteStore, parents: list[int], queue: Any) -> None:
    store._resume()  # the inherited pass ends: its parked connection was the parent's
    _report_connection(store, parents, queue)


def test_the_fork_hook_holds_no_store_alive(tmp_path: Path) -> None:
    import gc

    from guardrails.store import sqlite as module

    store = SQLiteStore(tmp_path / "a.db")
    store.append(AuditRow("tool_call", 1.0))
    assert store in module._STORES
    store.close()
    del store
    gc.collect()
    assert not any(s.path == str(tmp_path / "a.db") for s in module._STORES)


# -- budgets: the row is made by the first reservation or settlement only -------------


def _kinds(seen: list[str]) -> list[str]:
    return [" ".join(s.split()[:2]) for s in seen]


def test_a_reservation_and_its_settlement_on_a_known_key_make_no_row(tmp_path: Path) -> None:
    store = SQLiteStore(tmp_path / "a.db")
    assert store.reserve_leased("k", "h0", 1, 10, 0.0, 60.0)  # the first: makes the row
    seen = _statements(store)
    assert store.reserve_leased("k", "h1", 2, 10, 0.0, 60.0)
    # Admitted: the key's leases are not read.
    assert _kinds(seen) == ["BEGIN IMMEDIATE", "UPDATE guardrails_budgets", "INSERT INTO", "COMMIT"]
    seen.clear()
    assert store.settle_leased("k", "h1", 1) == 1
    assert _kinds(seen) == ["BEGIN IMMEDIATE", "DELETE FROM", "UPDATE guardrails_budgets", "COMMIT"]
    assert store.budget("k") == (1, 1)
    seen.clear()  # refused with h0's lease (expired at 60): given back, then admitted
    assert store.reserve_leased("k", "h2", 9, 10, 61.0, 120.0)
    assert _kinds(seen) == [
        "BEGIN IMMEDIATE", "UPDATE guardrails_budgets", "INSERT OR",
        "DELETE FROM", "UPDATE guardrails_budgets",
        "UPDATE guardrails_budgets", "INSERT INTO", "COMMIT",
    ]  # fmt: skip
    assert store.budget("k") == (1, 9)
    store.close()


def test_the_first_reservation_or_settlement_of_a_key_makes_its_row_and_a_refusal_none(
    tmp_path: Path,
) -> None:
    store = SQLiteStore(tmp_path / "a.db")
    seen = _statements(store)
    assert not store.reserve("new", 11, 10)  # refused: the row is made (as before), empty
    assert "INSERT OR" in seen[2] and store.budget("new") == (0, 0)
    assert store.reserve("new", 10, 10) and not store.reserve("new", 1, 10)
    assert store.budget("new") == (0, 10)
    refused = len(seen)
    assert not store.reserve("new", 1, 10)  # a refusal on a known key: asks, inserts nothing
    assert [s for s in seen[refused:] if "guardrails_budgets (key)" in s] == [
        "INSERT OR IGNORE INTO guardrails_budgets (key) VALUES ('new')"
    ] and store.budget("new") == (0, 10)
    assert store.settle("other", 0, 4) == 4  # a settlement with no reservation before it
    assert store.settle_leased("third", "h", 3) == 3
    assert (store.budget("other"), store.budget("third")) == ((4, 0), (3, 0))
    store.close()
