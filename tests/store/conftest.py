"""Fixtures of the store tests that more than one module uses."""

from __future__ import annotations

import uuid
from collections.abc import Iterator

import pytest


@pytest.fixture
def two_roles(pg_dsn: str) -> Iterator[tuple[str, str]]:
    """An owner DSN and an application DSN on a fresh schema; the roles are dropped after."""
    import psycopg
    from psycopg.conninfo import conninfo_to_dict, make_conninfo

    tag = uuid.uuid4().hex[:10]
    owner, app, schema = f"gr_owner_{tag}", f"gr_app_{tag}", f"gr_roles_{tag}"
    admin = make_conninfo(pg_dsn, options=None)
    with psycopg.connect(admin, autocommit=True) as conn:
        conn.execute(f'CREATE ROLE "{owner}" LOGIN')
        conn.execute(f'CREATE ROLE "{app}" LOGIN')
        conn.execute(f'CREATE SCHEMA "{schema}" AUTHORIZATION "{owner}"')
    base = {k: v for k, v in conninfo_to_dict(pg_dsn).items() if k != "options"}
    as_role = lambda role: make_conninfo(  # noqa: E731
        **{**base, "user": role}, options=f"-c search_path={schema}"
    )
    try:
        yield as_role(owner), as_role(app)
    finally:
        with psycopg.connect(admin, autocommit=True) as conn:
            conn.execute(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')
            for role in (app, owner):
                conn.execute(f'DROP OWNED BY "{role}"')
                conn.execute(f'DROP ROLE "{role}"')
