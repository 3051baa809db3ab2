"""The hash chain: one valid chain under concurrent writers; verify names the first row tampered with."""

from __future__ import annotations

import multiprocessing
import sqlite3
from pathlib import Path
from typing import Any
from urllib.parse import quote

import pytest
from hypothesis import find, given
from hypothesis import strategies as st

from guardrails.cli import main
from guardrails.store import (
    AUDIT_COLUMNS,
    AuditRow,
    MemoryStore,
    PostgresStore,
    SQLiteStore,
    Store,
    _chain,
)
from guardrails.store._chain import GENESIS, content, content_py, link
from guardrails.store._pg_sql import Head
from guardrails.store.testing import postgres_dsn
from guardrails.store.verify import Verified, verify
from tests.store._pg_schema import at_version

_ctx = multiprocessing.get_context("fork")


def _row(n: int) -> AuditRow:
    return AuditRow("tool_call", 1000.0 + n, f"c{n}", "acme", tool="t", outcome="ok", cost=0.5)


def test_every_store_chains_rows_the_same_way(store: Store) -> None:
    store.append(_row(0))
    store.append_many([_row(1), _row(2)])
    store.append(_row(3))
    memory = MemoryStore()
    for n in range(4):
        memory.append(_row(n))
    assert [h for _, h in store.audit_chain()] == [h for _, h in memory.audit_chain()]
    found = verify(store)
    assert found.ok and found.rows == 4 and found.head == memory.audit_chain()[-1][1]


def test_each_hash_covers_the_previous_hash_the_id_and_the_content(store: Store) -> None:
    for n in range(3):
        store.append(_row(n))
    previous = GENESIS
    for row, stored in store.audit_chain():
        assert stored == link(previous, row.id or 0, content(row))
        previous = stored


def test_an_empty_log_verifies() -> None:
    found = verify(MemoryStore())
    assert found.ok and found.rows == 0
    assert found.line() == "ok: 0 rows, chain head (empty)"


def test_rows_made_storable_chain_and_verify(store: Store) -> None:
    store.append(AuditRow("tool_call", 1.0, "id\udc80\x00", tenant="t" * 5000, reason=object()))  # type: ignore[arg-type]
    assert verify(store).ok


# -- a SQLite file edited by hand -------------------------------------------------------


@pytest.fixture
def sqlite_file(tmp_path: Path) -> str:
    path = str(tmp_path / "audit.db")
    with SQLiteStore(path) as store:
        for n in range(6):
            store.append(_row(n))
    return path


def _by_hand(path: str, *statements: str) -> None:
    conn = sqlite3.connect(path)
    for trigger in ("no_update", "no_delete", "no_replace"):
        conn.execute(f"DROP TRIGGER IF EXISTS guardrails_audit_{trigger}")
    for statement in statements:
        conn.execute(statement)
    conn.commit()
    conn.close()


def _verify_cli(path: str, capsys: pytest.CaptureFixture[str]) -> tuple[int, str]:
    code = main(["audit", "verify", path])
    return code, capsys.readouterr().out


def test_verify_passes_an_untouched_file(
    sqlite_file: str, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out = _verify_cli(sqlite_file, capsys)
    assert code == 0 and out.startswith("ok: 6 rows, chain head ")
    assert out.count("\n") == 1


@pytest.mark.parametrize(
    ("statements", "line"),
    [
        (
            ["UPDATE guardrails_audit SET outcome = 'error' WHERE id = 3"],
            "tampered: row 3 was changed or inserted out of order: its hash does not match the chain",
        ),
        (
            ["UPDATE guardrails_audit SET cost = 0.25 WHERE id = 1"],
            "tampered: row 1 was changed or inserted out of order: its hash does not match the chain",
        ),
        (["DELETE FROM guardrails_audit WHERE id = 4"], "tampered: row 4 was removed"),
        (
            ["DELETE FROM guardrails_audit WHERE id IN (2, 3)"],
            "tampered: row 2 was removed (rows 2 to 3)",
        ),
        (["DELETE FROM guardrails_audit WHERE id = 1"], "tampered: row 1 was removed"),
        (
            [
                "INSERT INTO guardrails_audit (id, kind, at, hash) "
                "SELECT 7, 'tool_call', 1.0, hash FROM guardrails_audit WHERE id = 6"
            ],
            "tampered: row 7 was changed or inserted out of order: its hash does not match the chain",
        ),
        (
            ["INSERT INTO guardrails_audit (id, kind, at) VALUES (7, 'tool_call', 1.0)"],
            "tampered: row 7 has no hash: it was written outside the store",
        ),
        (
            # two rows swapped, hashes and all
            [
                "UPDATE guardrails_audit SET id = 100 WHERE id = 2",
                "UPDATE guardrails_audit SET id = 2 WHERE id = 3",
                "UPDATE guardrails_audit SET id = 3 WHERE id = 100",
            ],
            "tampered: row 2 was changed or inserted out of order: its hash does not match the chain",
        ),
        (
            ["UPDATE guardrails_audit SET tool = x'00ff' WHERE id = 5"],
            "tampered: row 5 was changed: it holds a value the store never writes",
        ),
    ],
)
def test_verify_names_the_first_row_edited_by_hand(
    sqlite_file: str,
    capsys: pytest.CaptureFixture[str],
    statements: list[str],
    line: str,
) -> None:
    _by_hand(sqlite_file, *statements)
    code, out = _verify_cli(sqlite_file, capsys)
    assert (code, out) == (1, line + "\n")


def test_the_lines_in_the_docs_are_the_lines_verify_prints() -> None:
    from guardrails.store.verify import Verified

    page = (Path(__file__).resolve().parents[2] / "docs" / "store.md").read_text()
    changed = Verified(False, 16, 0, "h", 17, _CHANGED).line()
    assert f"\n{changed}\n" in page
    assert "\nok: 18342 rows, chain head 5c51" in page
    assert Verified(True, 18342, 0, "5c51").line() == "ok: 18342 rows, chain head 5c51"
    assert "(`row 4 was removed`)" in page


_CHANGED = "was changed or inserted out of order: its hash does not match the chain"


def test_a_rehashed_row_is_found_at_the_next_row(sqlite_file: str) -> None:
    # Whoever recomputes the hash of the row they changed breaks the link to the next one.
    with SQLiteStore(sqlite_file) as store:
        (rows := store.audit_chain())
    changed = rows[2][0]._replace(outcome="error")
    forged = link(rows[1][1] or "", 3, content(changed))
    _by_hand(
        sqlite_file,
        f"UPDATE guardrails_audit SET outcome = 'error', hash = '{forged}' WHERE id = 3",
    )
    with SQLiteStore(sqlite_file) as store:
        assert verify(store).bad == 4


def test_verify_of_a_missing_file_says_so_and_creates_nothing(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["audit", "verify", str(tmp_path / "none.db")]) == 2
    assert "no store at" in capsys.readouterr().err
    assert not (tmp_path / "none.db").exists()


def test_verify_takes_a_sqlite_url(sqlite_file: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["audit", "verify", f"sqlite:///{sqlite_file}"]) == 0


# -- PostgreSQL, changed by a superuser ---------------------------------------------------


@pytest.mark.postgres
def test_verify_finds_a_row_a_superuser_changed(
    pg_dsn: str, capsys: pytest.CaptureFixture[str]
) -> None:
    import psycopg

    with PostgresStore(pg_dsn) as store:
        store.append_many([_row(n) for n in range(5)])
    with psycopg.connect(pg_dsn, autocommit=True) as conn:
        conn.execute("ALTER TABLE guardrails_audit DISABLE TRIGGER USER")
        conn.execute("UPDATE guardrails_audit SET tenant = 'other' WHERE id = 2")
    dsn, schema = postgres_dsn() or "", pg_dsn.split("search_path=")[1].rstrip("'")
    url = dsn + ("&" if "?" in dsn else "?") + "options=" + quote(f"-c search_path={schema}")
    code = main(["audit", "verify", url])
    assert code == 1
    assert capsys.readouterr().out.startswith("tampered: row 2 was changed")


# -- 8 writer processes, one chain -----------------------------------------------------------


def _open(url: str) -> Store:
    return SQLiteStore(url) if url.endswith(".db") else PostgresStore(url, max_size=2)


def _write(url: str, barrier: Any, queue: Any, worker: int) -> None:
    store = _open(url)
    barrier.wait()
    for n in range(40):
        if n % 4 == 3:
            store.append_many([_row(worker * 1000 + n), _row(worker * 1000 + n + 500)])
        else:
            store.append(_row(worker * 1000 + n))
    store.close()
    queue.put(worker)


@pytest.mark.slow
def test_eight_processes_appending_at_once_keep_one_valid_chain(shared_url: str) -> None:
    with _open(shared_url) as store:
        store.incr("migrated", 0)
    barrier, queue = _ctx.Barrier(8), _ctx.Queue()
    procs = [_ctx.Process(target=_write, args=(shared_url, barrier, queue, w)) for w in range(8)]
    for p in procs:
        p.start()
    assert sorted(queue.get(timeout=120) for _ in procs) == list(range(8))
    for p in procs:
        p.join(timeout=60)
        assert p.exitcode == 0
    with _open(shared_url) as store:
        found = verify(store)
        assert found.ok, found.line()
        assert found.rows == 8 * 50


# -- a store written before the chain existed ---------------------------------------------------


def _version_one_sqlite(path: str) -> None:
    from guardrails.store._migrations import migrations, split_statements

    conn = sqlite3.connect(path)
    conn.execute("CREATE TABLE guardrails_schema (version INTEGER PRIMARY KEY, applied_at REAL)")
    for statement in split_statements(migrations("sqlite")[0][1]):
        conn.execute(statement)
    conn.execute("INSERT INTO guardrails_schema VALUES (1, 0)")
    conn.executemany(
        "INSERT INTO guardrails_audit (kind, at) VALUES ('tool_call', ?)", [(1.0,), (2.0,)]
    )
    conn.commit()
    conn.close()


def test_an_upgraded_sqlite_file_chains_after_its_old_rows(tmp_path: Path) -> None:
    path = str(tmp_path / "old.db")
    _version_one_sqlite(path)
    with SQLiteStore(path) as store:
        store.append(_row(0))
        store.append_many([_row(1)])
        found = verify(store)
        assert [r.id for r in store.audit_rows()] == [1, 2, 3, 4]
    assert (found.ok, found.rows, found.unhashed) == (True, 2, 2)
    assert found.line().endswith("; 2 older rows have no hash")


@pytest.mark.postgres
def test_an_upgraded_postgresql_schema_chains_after_its_old_rows(pg_dsn: str) -> None:
    import psycopg

    with psycopg.connect(pg_dsn, autocommit=True) as conn:
        at_version(conn, 1)
        conn.execute(
            "INSERT INTO guardrails_audit (kind, at) VALUES ('tool_call', 1.0), ('tool_call', 2.0)"
        )
    with PostgresStore(pg_dsn) as store:
        store.append(_row(0))
        store.append_many([_row(1)])
        assert [r.id for r in store.audit_rows()] == [1, 2, 3, 4]
        found = verify(store)
    assert (found.ok, found.rows, found.unhashed) == (True, 2, 2)
    with (
        psycopg.connect(pg_dsn, autocommit=True) as conn,
        pytest.raises(psycopg.errors.NotNullViolation),
    ):
        conn.execute("INSERT INTO guardrails_audit (kind, at) VALUES ('forged', 1.0)")


# -- content, compiled per row shape ------------------------------------------------------

_COLUMN_VALUES = st.one_of(
    st.none(),
    st.text(max_size=12),
    st.integers(min_value=-(2**63), max_value=2**63 - 1),
    st.floats(allow_nan=False, allow_infinity=False),
)
_ROWS = st.lists(_COLUMN_VALUES, min_size=len(AUDIT_COLUMNS), max_size=len(AUDIT_COLUMNS)).map(
    lambda values: AuditRow._make([*values, None])
)


def _column_loop(row: AuditRow) -> str:
    return "|".join([_chain._encode(value) for value in row.values()])


@given(_ROWS)
def test_the_compiled_content_is_the_column_by_column_text(row: AuditRow) -> None:
    assert content_py(row) == _column_loop(row)
    assert content_py(row) == _column_loop(row)  # the second call runs the compiled shape
    assert content(row) == _column_loop(row)  # in C for a storable row, else the same


@pytest.mark.slow
def test_the_generated_rows_mix_every_kind_of_column() -> None:
    kinds = {type(None), str, int, float}
    assert find(_ROWS, lambda row: {type(v) for v in row.values()} == kinds) is not None


def test_past_the_table_of_shapes_the_column_loop_gives_the_same_text(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(_chain, "_compiled", {})
    monkeypatch.setattr(_chain, "_SHAPES_KEPT", 1)
    rows = [_row(1), _row(2)._replace(tool=None), _row(3)._replace(cost=None, tenant=None)]
    assert [content_py(r) for r in rows] == [_column_loop(r) for r in rows]
    assert len(_chain._compiled) == 1


@pytest.mark.parametrize(
    "value", [b"x", True, 1j, object()], ids=["bytes", "bool", "complex", "object"]
)
def test_a_value_the_store_never_writes_has_no_content(value: object) -> None:
    with pytest.raises(TypeError, match="not a storable column value"):
        content(AuditRow("tool_call", 1.0, value))  # type: ignore[arg-type]


# -- each store's hint of the chain head ------------------------------------------------------


_HOSTILE = AuditRow("tool_call", 1.0, "id\udc80\x00é", tenant="t" * 5000, reason=object())  # type: ignore[arg-type]


def test_two_stores_taking_turns_on_one_log_keep_one_chain(shared_url: str) -> None:
    first, second = _open(shared_url), _open(shared_url)
    rows = [_row(n) if n % 3 else _HOSTILE for n in range(15)]
    ids = [s.append(row) for row in rows for s in (first, second)]
    first.append_many([_row(100), _row(101)])
    ids += [second.append(_row(102)), first.append(_row(103)), first.append(_row(104))]
    assert ids == [*range(1, 31), 33, 34, 35]
    found = verify(first)
    assert found.ok and found.rows == 35, found.line()
    first.close()
    second.close()


def _append_after_hint(store: Any, hint: str) -> Verified:
    store.append(_row(0))
    behind = store._head
    store.append(_row(1))
    last, stored = store._head[:2]
    store._head = {
        "behind": behind,
        "wrong hash": Head(last, "0" * 64),
        "past the head": Head(last + 5, stored),
    }[hint]
    assert store.append(_row(2)) == 3
    assert store.append(_row(3)) == 4
    return verify(store)


def test_a_head_hint_left_behind_by_another_writer_keeps_one_chain(shared_url: str) -> None:
    with _open(shared_url) as store:
        found = _append_after_hint(store, "behind")
    assert found.ok and found.rows == 4, found.line()


@pytest.mark.postgres
@pytest.mark.parametrize("hint", ["wrong hash", "past the head"])
def test_postgres_checks_the_whole_hint_against_the_head_it_locks(pg_dsn: str, hint: str) -> None:
    # On SQLite only rows rewritten or removed behind the store make such a hint.
    with PostgresStore(pg_dsn, max_size=2) as store:
        found = _append_after_hint(store, hint)
    assert found.ok and found.rows == 4, found.line()
