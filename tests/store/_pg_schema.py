"""PostgreSQL schemas as the tests need them: at an older version, or granted to the
application role of ``two_roles``."""

from __future__ import annotations

from typing import Any

from guardrails.store._migrations import migrations
from guardrails.store.roles import application_grants


def at_version(conn: Any, version: int) -> None:
    """Apply the migrations up to ``version`` on ``conn`` (autocommit), as a release
    that stopped there left the schema."""
    conn.execute(
        "CREATE TABLE guardrails_schema (version INTEGER PRIMARY KEY, applied_at DOUBLE PRECISION)"
    )
    for number, script in migrations("postgres")[:version]:
        conn.execute(script.encode())
        conn.execute("INSERT INTO guardrails_schema VALUES (%s, 0)", (number,))


def schema_of(dsn: str) -> str:
    """The schema a ``two_roles`` DSN puts first on its search path."""
    return dsn.split("search_path=")[1].split()[0].strip("'")


def grant(owner_dsn: str, app_dsn: str) -> None:
    """Run ``application_grants`` as the owner, for the role of ``app_dsn``."""
    import psycopg

    role = app_dsn.split("user=")[1].split()[0]
    with psycopg.connect(owner_dsn, autocommit=True) as conn:
        for statement in application_grants(role, schema_of(owner_dsn)):
            conn.execute(statement)
