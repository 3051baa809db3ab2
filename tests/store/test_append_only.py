"""Append-only against the store's own credentials: SQLite's connection, PostgreSQL's application role."""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator
from pathlib import Path

import pytest

from guardrails.store import AuditRow, PostgresStore, SQLiteStore, StoreUnavailable
from guardrails.store.verify import verify
from tests.store._pg_schema import grant, schema_of

_ROWS = [AuditRow("tool_call", float(n), f"c{n}", outcome="ok") for n in range(3)]

# Every way SQL can rewrite or remove a row, or switch off what stops it.
SQLITE_ATTACKS = [
    "UPDATE guardrails_audit SET outcome = 'error'",
    "DELETE FROM guardrails_audit",
    "DELETE FROM guardrails_audit WHERE id = 2",
    "INSERT OR REPLACE INTO guardrails_audit (id, kind, at) VALUES (2, 'forged', 0)",
    "REPLACE INTO guardrails_audit (id, kind, at) VALUES (2, 'forged', 0)",
    "INSERT INTO guardrails_audit (id, kind, at) VALUES (2, 'forged', 0) "
    "ON CONFLICT (id) DO UPDATE SET kind = excluded.kind",
    "UPDATE OR REPLACE guardrails_audit SET id = 1 WHERE id = 2",
    "DROP TRIGGER guardrails_audit_no_update",
    "DROP TRIGGER guardrails_audit_no_delete",
    "DROP TRIGGER guardrails_audit_no_replace",
    "DROP TABLE guardrails_audit",
    "ALTER TABLE guardrails_audit RENAME TO guardrails_old",
    "ALTER TABLE guardrails_audit DROP COLUMN outcome",
    "ALTER TABLE guardrails_audit RENAME COLUMN outcome TO was",
    "PRAGMA writable_schema = ON",
    "PRAGMA recursive_triggers = OFF",
    "CREATE TEMP TRIGGER t AFTER INSERT ON main.guardrails_audit BEGIN DELETE FROM main.guardrails_audit; END",
    "CREATE TRIGGER t AFTER INSERT ON guardrails_audit BEGIN DELETE FROM guardrails_audit; END",
    "CREATE TRIGGER t AFTER INSERT ON guardrails_kv BEGIN DELETE FROM guardrails_audit; END",
    "CREATE TEMP TRIGGER t AFTER INSERT ON guardrails_kv BEGIN UPDATE guardrails_audit SET tool = 'x'; END",
]


@pytest.fixture
def sqlite_store(tmp_path: Path) -> Iterator[SQLiteStore]:
    with SQLiteStore(tmp_path / "a.db") as store:
        for row in _ROWS:
            store.append(row)
        yield store


@pytest.mark.parametrize("statement", SQLITE_ATTACKS)
def test_the_sqlite_stores_own_connection_cannot_rewrite_or_remove_a_row(
    sqlite_store: SQLiteStore, statement: str
) -> None:
    conn = sqlite_store._conn()
    with pytest.raises(sqlite3.DatabaseError, match=r"not authorized|append-only"):
        conn.execute(statement)
    rows = sqlite_store.audit_rows()
    assert [(r.id, r.kind, r.call_id, r.outcome) for r in rows] == [
        (n + 1, "tool_call", f"c{n}", "ok") for n in range(3)
    ]
    assert verify(sqlite_store).ok


def test_an_attached_alias_of_the_same_file_is_refused_too(
    sqlite_store: SQLiteStore, tmp_path: Path
) -> None:
    conn = sqlite_store._conn()
    conn.execute(f"ATTACH DATABASE '{tmp_path / 'a.db'}' AS again")
    for statement in ("DELETE FROM again.guardrails_audit", "DROP TABLE again.guardrails_audit"):
        with pytest.raises(sqlite3.DatabaseError, match="not authorized"):
            conn.execute(statement)
    conn.execute("DETACH DATABASE again")
    assert len(sqlite_store.audit_rows()) == 3


@pytest.mark.parametrize(
    "statement",
    [
        "INSERT OR REPLACE INTO guardrails_audit (id, kind, at) VALUES (2, 'forged', 0)",
        "REPLACE INTO guardrails_audit (id, kind, at) VALUES (2, 'forged', 0)",
        "INSERT INTO guardrails_audit (id, kind, at) VALUES (2, 'x', 0) "
        "ON CONFLICT (id) DO UPDATE SET kind = 'forged'",
    ],
)
def test_replace_and_upsert_are_refused_on_any_connection_by_the_schema(
    sqlite_store: SQLiteStore, tmp_path: Path, statement: str
) -> None:
    # A connection without the store's authorizer still meets the triggers.
    other = sqlite3.connect(tmp_path / "a.db")
    with pytest.raises(sqlite3.IntegrityError, match="append-only"):
        other.execute(statement)
    other.close()
    assert [r.kind for r in sqlite_store.audit_rows()] == ["tool_call"] * 3


def test_the_store_keeps_writing_after_refusing(sqlite_store: SQLiteStore) -> None:
    with pytest.raises(sqlite3.DatabaseError):
        sqlite_store._conn().execute("DELETE FROM guardrails_audit")
    sqlite_store.append(AuditRow("tool_call", 9.0))
    sqlite_store.reserve_leased("k", "h", 1, 10, 0.0, 1.0)
    assert len(sqlite_store.audit_rows()) == 4 and verify(sqlite_store).ok


# Another program opens the file: what it does to the triggers is undone at the next open.
OUTSIDE_TRIGGER_EDITS = {
    "dropped": [
        "DROP TRIGGER guardrails_audit_no_update",
        "DROP TRIGGER guardrails_audit_no_delete",
        "DROP TRIGGER guardrails_audit_no_replace",
    ],
    "emptied": [
        "DROP TRIGGER guardrails_audit_no_delete",
        "CREATE TRIGGER guardrails_audit_no_delete BEFORE DELETE ON guardrails_audit "
        "BEGIN SELECT 1; END",
    ],
    "swallows_inserts": [
        'CREATE TRIGGER "odd ""name" BEFORE INSERT ON guardrails_audit '
        "BEGIN SELECT RAISE(IGNORE); END"
    ],
    "elsewhere": [
        "CREATE TRIGGER t AFTER INSERT ON guardrails_kv BEGIN DELETE FROM guardrails_audit; END"
    ],
}


@pytest.mark.parametrize("edit", sorted(OUTSIDE_TRIGGER_EDITS))
def test_triggers_changed_by_another_connection_are_restored_when_the_store_opens(
    tmp_path: Path, edit: str, caplog: pytest.LogCaptureFixture
) -> None:
    path = tmp_path / "a.db"
    with SQLiteStore(path) as store:
        store.append(_ROWS[0])
    before = _triggers(path)
    outside = sqlite3.connect(path, isolation_level=None)
    for statement in OUTSIDE_TRIGGER_EDITS[edit]:
        outside.execute(statement)
    assert _triggers(path) != before
    with SQLiteStore(path) as store:
        store.append(_ROWS[1])
        assert store.compare_and_set("k", None, "v")  # fires a trigger on guardrails_kv, if any
        assert [r.call_id for r in store.audit_rows()] == ["c0", "c1"]
        assert verify(store).ok
    assert _triggers(path) == before
    assert "restored from the migrations" in caplog.text
    for attack in ("UPDATE guardrails_audit SET outcome = 'x'", "DELETE FROM guardrails_audit"):
        with pytest.raises(sqlite3.IntegrityError, match="append-only"):
            outside.execute(attack)
    outside.close()


def test_an_untouched_store_opens_without_a_repair(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    with SQLiteStore(tmp_path / "a.db") as store:
        store.append(_ROWS[0])
    with SQLiteStore(tmp_path / "a.db") as store:
        store.append(_ROWS[1])
    assert "restored" not in caplog.text


def _triggers(path: Path) -> list[tuple[str, str]]:
    conn = sqlite3.connect(path)
    try:
        found = conn.execute(
            "SELECT name, sql FROM sqlite_master WHERE type = 'trigger' ORDER BY name"
        ).fetchall()
    finally:
        conn.close()
    return [(str(name), str(sql)) for name, sql in found]


# -- PostgreSQL: truncation, and a role that is not the owner ------------------------


@pytest.mark.postgres
def test_truncate_is_refused_even_to_the_owner(pg_dsn: str) -> None:
    import psycopg

    with PostgresStore(pg_dsn) as store:
        store.append(_ROWS[0])
    with (
        psycopg.connect(pg_dsn, autocommit=True) as conn,
        pytest.raises(psycopg.errors.RaiseException),
    ):
        conn.execute("TRUNCATE guardrails_audit")
    with PostgresStore(pg_dsn) as store:
        assert len(store.audit_rows()) == 1


PG_ATTACKS = [
    "UPDATE guardrails_audit SET outcome = 'error'",
    "DELETE FROM guardrails_audit",
    "TRUNCATE guardrails_audit",
    "ALTER TABLE guardrails_audit DISABLE TRIGGER guardrails_audit_no_change",
    "ALTER TABLE guardrails_audit DISABLE TRIGGER ALL",
    "DROP TRIGGER guardrails_audit_no_change ON guardrails_audit",
    "DROP TRIGGER guardrails_audit_no_truncate ON guardrails_audit",
    "DROP TABLE guardrails_audit",
    "DROP FUNCTION guardrails_audit_append_only() CASCADE",
    "ALTER TABLE guardrails_audit RENAME TO guardrails_old",
    "INSERT INTO guardrails_audit (id, kind, at) VALUES (1, 'forged', 0) "
    "ON CONFLICT (id) DO UPDATE SET kind = 'forged'",
]


@pytest.mark.postgres
def test_the_application_role_works_where_public_may_execute_no_function(
    two_roles: tuple[str, str],
) -> None:
    """A database whose defaults keep functions from PUBLIC: the grants name them."""
    import psycopg

    owner_dsn, app_dsn = two_roles
    owner = PostgresStore(owner_dsn)
    owner.migrate()
    owner.close()
    with psycopg.connect(owner_dsn, autocommit=True) as conn:
        conn.execute(
            f'REVOKE EXECUTE ON ALL FUNCTIONS IN SCHEMA "{schema_of(owner_dsn)}" FROM PUBLIC'
        )
    with PostgresStore(app_dsn) as app, pytest.raises(StoreUnavailable):
        app.reserve_leased("k", "h", 5, 10, 0.0, 1.0)  # no grant yet: refused
    grant(owner_dsn, app_dsn)
    with PostgresStore(app_dsn) as app:
        assert app.reserve_leased("k", "h", 5, 10, 0.0, 1.0)
        assert app.put_snapshot("s", b"x", 1.0) == 1
        app.append_many(_ROWS)
        assert verify(app).ok


@pytest.mark.postgres
def test_the_application_role_cannot_rewrite_remove_or_unprotect_rows(
    two_roles: tuple[str, str],
) -> None:
    import psycopg

    owner_dsn, app_dsn = two_roles
    owner = PostgresStore(owner_dsn)
    owner.migrate()
    grant(owner_dsn, app_dsn)
    owner.close()
    with PostgresStore(app_dsn) as app:  # opens without migrating: the schema is current
        for row in _ROWS:
            app.append(row)
        app.append_many(_ROWS)
        assert app.reserve_leased("k", "h", 5, 10, 0.0, 1.0)
        assert app.renew_leases("h", 2.0) == 1
        assert app.renew_leases_of(["h", "other"], 3.0) == 1  # FOR UPDATE: its grants suffice
        assert app.settle_leased("k", "h", 3) == 3
        assert app.incr("n") == 1 and app.compare_and_set("p", None, "one")
        assert app.claim("key", "o", 0.0, 9.0).state == "new"
        assert app.complete("key", "o", "1", 99.0)
        assert app.put_snapshot("s", b"x", 1.0) == 1
    for statement in PG_ATTACKS:
        with (
            psycopg.connect(app_dsn, autocommit=True) as conn,
            pytest.raises(psycopg.errors.InsufficientPrivilege),
        ):
            conn.execute(statement)
    with PostgresStore(app_dsn) as app:
        assert len(app.audit_rows()) == 6
        assert verify(app).ok


@pytest.mark.postgres
def test_the_application_role_cannot_migrate_and_is_told_who_can(
    two_roles: tuple[str, str],
) -> None:
    from guardrails.store import StoreUnavailable

    _, app_dsn = two_roles
    with PostgresStore(app_dsn) as app, pytest.raises(StoreUnavailable, match="owner role"):
        app.incr("n")
