"""PostgreSQL schema migrations, applied once under an advisory lock."""

from __future__ import annotations

import time
from typing import Any

from ._base import StoreUnavailable
from ._migrations import migrations

__all__ = ["migrate"]

_MIGRATION_LOCK = 0x6775617264  # pg_advisory_xact_lock key for schema changes


def migrate(conn: Any) -> None:
    wanted = migrations("postgres")
    # Read the version first, without DDL: a role that may only read and write
    # (the application role of a two-role set-up) opens an up-to-date store.
    if _version(conn) >= wanted[-1][0]:
        return
    try:
        with conn.transaction():
            conn.execute("SELECT pg_advisory_xact_lock(%s)", (_MIGRATION_LOCK,))
            conn.execute(
                "CREATE TABLE IF NOT EXISTS guardrails_schema "
                "(version INTEGER PRIMARY KEY, applied_at DOUBLE PRECISION NOT NULL)"
            )
            current = _version(conn)
            for version, sql in wanted:
                if version > current:
                    conn.execute(sql.encode())
                    conn.execute(
                        "INSERT INTO guardrails_schema VALUES (%s, %s)", (version, time.time())
                    )
    except Exception as exc:
        if type(exc).__name__ in ("InsufficientPrivilege", "InvalidSchemaName"):
            raise StoreUnavailable(
                f"PostgreSQL store: the schema needs migrations up to version {wanted[-1][0]} "
                "and this role may not run them; run PostgresStore(owner_dsn).migrate() "
                "as the owner role (docs/store.md, two roles)"
            ) from exc
        raise


def _version(conn: Any) -> int:
    row = conn.execute("SELECT to_regclass('guardrails_schema') IS NOT NULL").fetchone()
    if not row[0]:
        return 0
    return int(
        conn.execute("SELECT COALESCE(MAX(version), 0) FROM guardrails_schema").fetchone()[0]
    )
