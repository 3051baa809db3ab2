"""Helpers for testing against a real PostgreSQL server without touching its data.

``temporary_schema(dsn)`` creates an empty schema, yields a connection string
whose ``search_path`` points at it, and drops it afterwards, so each test gets
fresh tables in a shared server.
"""

from __future__ import annotations

import os
import uuid
from collections.abc import Iterator
from contextlib import contextmanager

__all__ = ["postgres_dsn", "postgres_required", "temporary_schema"]


def postgres_dsn() -> str | None:
    """The server to test against: ``GUARDRAILS_POSTGRES_DSN``, or None."""
    return os.environ.get("GUARDRAILS_POSTGRES_DSN") or None


def postgres_required() -> bool:
    """True when a missing server must fail the tests (``GUARDRAILS_REQUIRE_POSTGRES=1``)."""
    return os.environ.get("GUARDRAILS_REQUIRE_POSTGRES") == "1"


@contextmanager
def temporary_schema(dsn: str) -> Iterator[str]:
    """A connection string for a new, empty schema; the schema is dropped on exit."""
    import psycopg
    from psycopg.conninfo import make_conninfo

    name = f"guardrails_test_{uuid.uuid4().hex[:12]}"
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute(f'CREATE SCHEMA "{name}"')
    try:
        yield make_conninfo(dsn, options=f"-c search_path={name}")
    finally:
        with psycopg.connect(dsn, autocommit=True) as conn:
            conn.execute(f'DROP SCHEMA IF EXISTS "{name}" CASCADE')
